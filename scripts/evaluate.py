"""Evaluate policies on any registered env x task, with the metrics multi-agent papers report.

    python scripts/evaluate.py                                   # embedded model, reflection, unknown task
    python scripts/evaluate.py --env_id math/debate-v0 --num_problems 100 --json out.json
    python scripts/evaluate.py --task gsm8k --data_path ../shared/data/gsm8k/test.jsonl --model_name_or_path Qwen/Qwen2.5-0.5B-Instruct

Flags use the training scripts' names (``scripts/train_<env>.py``): --env_id, --data_path,
--model_name_or_path, --role_models ROLE=PATH,..., --max_completion_length (tokens per turn),
--num_envs, and the env's own options (--rounds, --num_agents, --refiner_mode...: one group
derived from its options dataclass). A training run's own before/after evaluation plays the same env with
--split and the problem count as its only overrides. The old dashed names (--num-problems,
--max-new-tokens, --model, --role-model, --role-adapters, ...) still work, with a warning.

Leads (unless --no_compare) with the team against the same model alone on the same problems,
compute-matched: the team's majority vote (maj1@turnK), final answer and first answer (pass1@turn1)
beside the model alone given the team's first-turn prompt (math/solve-v0's where they agree) with
k independent samples per problem (mean pass@1 and majority vote maj@k, for each k of --alone-k:
by default 1, 3 and the team's generations per episode), tokens per episode on both sides, and
paired bootstrap intervals on team - alone; procedural tasks per level. The model alone is also
matched in tokens: the first k whose samples spend the team's tokens per episode (enough samples
are drawn for it, up to 10 per problem), and the stronger of the two baselines is named. Then the
verification gap per level (the accuracy of the first answers the first review accepted minus
that of all first answers) beside the critic's true-positive and true-negative rates, fixes,
breaks and the model alone's pass@k - maj@k; then accuracy (the final answer), pass@k (with
--samples >= k), pass1@turnK, the wrong->right / right->wrong flip rates per round and
per-agent metrics. --plot writes accuracy against generations and tokens (the alone maj@k curve,
the team's answers as points).
"""

from trainers.run.evaluate_cli import main

if __name__ == "__main__":
    main()
