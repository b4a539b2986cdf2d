"""Train a learned verifier and compare it with the rule verifier.

    python scripts/train_verifier.py --scripted                    # no model: scripted solutions
    python scripts/train_verifier.py                               # rollouts of the embedded model
    python scripts/train_verifier.py --model Qwen/Qwen2.5-0.5B-Instruct --levels 1 2 3 --samples 8
    python scripts/train_verifier.py --scripted --json verifier.json --output-dir outputs/verifier

Steps: answers to arithmetic problems (`--scripted`: worked solutions, with more slips on harder
problems; otherwise rollouts of `--env` played by `--model`, labelled by the env's rule
verifier), balanced so that right and wrong answers are equally frequent at every difficulty
(`trainers.verifier.data.balance_rows`), a classifier trained on them (a tiny one from scratch,
or `--base-model`), and an evaluation on held-out problems (the test split) against the labels
and the rule verifier. The model folder goes to OUTPUT_DIR/model; serve it with

    python scripts/serve_rewards.py --verifier trainers.verifier.model:LearnedVerifier \\
        --verifier-kwargs '{"path": "OUTPUT_DIR/model"}'
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from trainers.verifier.data import balance_rows, rows_from_episodes, scripted_rows
from trainers.verifier.model import LearnedVerifier, evaluate_verifier, train_verifier


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    data = parser.add_argument_group("data")
    data.add_argument("--scripted", action="store_true", help="scripted answers, no model")
    data.add_argument("--model", default=None, help="policy for rollouts (default: embedded)")
    data.add_argument("--env", default="math/solve-v0", help="env of the rollouts")
    data.add_argument("--levels", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    data.add_argument("--train-problems", type=int, default=6000)
    data.add_argument("--eval-problems", type=int, default=600, help="held out (test split)")
    data.add_argument("--samples", type=int, default=4, help="rollout answers per problem")
    data.add_argument("--num-envs", type=int, default=64, help="rollout env copies")
    data.add_argument(
        "--max_completion_length",
        "--max-new-tokens",
        dest="max_new_tokens",
        type=int,
        default=96,
        help="tokens per turn of the rollouts (the training scripts' name; the old one works)",
    )
    data.add_argument("--balance", default="auto", choices=["auto", "level", "accuracy", "none"])
    data.add_argument("--bins", type=int, default=5, help="difficulty bins (accuracy)")
    model = parser.add_argument_group("model")
    model.add_argument("--base-model", default=None, help="classifier start (default: tiny)")
    model.add_argument("--hidden-size", type=int, default=48)
    model.add_argument("--num-layers", type=int, default=2)
    model.add_argument("--steps", type=int, default=600)
    model.add_argument("--batch-size", type=int, default=64)
    model.add_argument("--lr", type=float, default=3e-3)
    model.add_argument("--max-length", type=int, default=24, help="tokens (end of the text)")
    parser.add_argument("--rule", default="math", help="rule verifier to compare with")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--threads", type=int, default=0, help="torch CPU threads (0: torch's default)"
    )
    parser.add_argument("--output-dir", default="outputs/verifier")
    parser.add_argument("--json", default=None, help="write the results here")
    return parser


def rollout_rows(args: argparse.Namespace, split: str, count: int) -> list[dict[str, Any]]:
    """Answers of the policy to `count` problems of `split`, `--samples` each."""
    from agents import GenerationArguments, HFPolicy
    from trainers.embedded import resolve_model
    from trainers.rollout.engine import RolloutEngine

    generation = GenerationArguments(max_new_tokens=args.max_new_tokens, seed=args.seed)
    policy = HFPolicy.from_pretrained(resolve_model(args.model), generation)
    env_kwargs = {
        "task": "arithmetic",
        "split": split,
        "task_kwargs": {"difficulty": list(args.levels), "size": count, "seed": args.seed},
    }
    engine = RolloutEngine(args.env, policy, env_kwargs, num_envs=args.num_envs)
    episodes = engine.run(engine.problem_ids(count), group_size=args.samples, seed=args.seed)
    return rows_from_episodes(episodes, engine.task)


def table(results: dict[str, Any]) -> str:
    ev, bal = results["eval"], results["balance"]
    lines = [
        "| | learned | rule |",
        "|---|---|---|",
        f"| accuracy vs labels | {ev['accuracy']:.3f} | {ev['rule_accuracy']:.3f} |",
        f"| AUC | {ev['auc'] if ev['auc'] is None else round(ev['auc'], 3)} | - |",
        f"| agreement learned/rule | {ev['agreement_with_rule']:.3f} | |",
        f"| confusion vs labels (tp fp tn fn) | {' '.join(str(v) for v in ev['confusion'].values())} | |",
        "",
        "| balance | rows | right | wrong | corr(correct, difficulty) |",
        "|---|---|---|---|---|",
    ]
    for key in ("before", "after"):
        s = bal[key]
        corr = "n/a" if s["corr"] is None else f"{s['corr']:+.3f}"
        lines.append(f"| {key} | {s['rows']} | {s['right']} | {s['wrong']} | {corr} |")
    by = " ".join(f"{k}:{v:.2f}" for k, v in ev["accuracy_by_difficulty"].items())
    lines += ["", f"learned accuracy by difficulty: {by}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = make_parser().parse_args(argv)
    if args.threads > 0:  # on a shared CPU one thread each is often faster than contending
        import torch

        torch.set_num_threads(args.threads)
    started = time.time()
    if args.scripted:
        train = scripted_rows(args.train_problems, args.levels, "train", args.seed)
        held_out = scripted_rows(args.eval_problems, args.levels, "test", args.seed)
    else:
        train = rollout_rows(args, "train", args.train_problems)
        held_out = rollout_rows(args, "test", args.eval_problems)
    if args.balance == "none":
        balanced, report = train, balance_rows(train, "auto", args.bins, args.seed)[1]
        eval_rows = held_out
    else:
        balanced, report = balance_rows(train, args.balance, args.bins, args.seed)
        eval_rows, _ = balance_rows(held_out, args.balance, args.bins, args.seed)
    if not balanced or not eval_rows:
        raise SystemExit(
            f"no rows left after balancing ({len(balanced)} train, {len(eval_rows)} eval): the "
            "policy answers every problem of a bin right (or wrong); use more --samples or levels"
        )
    training = train_verifier(
        balanced,
        args.output_dir,
        eval_rows=eval_rows[:256],
        base_model=args.base_model,
        max_steps=args.steps,
        batch_size=args.batch_size,
        learning_rate=args.lr,
        max_length=args.max_length,
        seed=args.seed,
        model_kwargs={"hidden_size": args.hidden_size, "num_layers": args.num_layers},
    )
    verifier = LearnedVerifier(training["model_path"])
    results = {
        "args": vars(args),
        "balance": report,
        "training": training,
        "eval": evaluate_verifier(verifier, eval_rows, args.rule),
        "runtime_s": time.time() - started,
    }
    print(table(results))
    print(f"\nmodel: {training['model_path']}  ({results['runtime_s']:.0f} s)")
    print(
        "serve it: python scripts/serve_rewards.py --verifier "
        f"trainers.verifier.model:LearnedVerifier --verifier-kwargs "
        f"'{json.dumps({'path': training['model_path']})}'"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
