"""Train the agents of `math/tool-v0` (analyzer -> executor -> verifier, programs run sandboxed).

    python scripts/train_tool.py                      # GRPO, embedded model, unknown task, CPU
    python scripts/train_tool.py grpo --rounds 1 --role_weights "executor=1,verifier=0.5"
    python scripts/train_tool.py grpo --help           # every field (env, GRPOConfig)

The first argument picks the algorithm (`grpo` or `ppo`). It evaluates on held-out problems,
trains, evaluates again, and writes the model, metrics.json and curves.png to --output_dir.
The shipped embedded model was never trained on this env's roles, so by default it first gets a
warm-up SFT on the embedded recipe's tool transcripts (`--warmup_sft_steps`, 500; saved and
evaluated in --output_dir/warmup), then RL; both share --max_train_minutes (see
`trainers.run.warmup`). `--warmup_sft_steps 0` skips it; `--warmup_data FILE.jsonl` brings your
own demonstrations for another model or task.
Each executor turn runs its program in a fresh sandboxed process (see `envs.sandbox`).

Its defaults beyond the env's own are its run defaults, stated where the env is registered
(`envs.spec("math/tool-v0").run_task`); ``mathteams train tool`` runs the same job.
"""

import sys

from trainers.run.cli import run_script

if __name__ == "__main__":
    run_script("math/tool-v0", sys.argv[1:], doc=__doc__)
