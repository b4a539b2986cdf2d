"""How well a model's ``reach`` critic checks, per level: on scripted answers and on its own.

    python scripts/probe_critic.py --model DIR                  # a build on reach (--variant reach)
    python scripts/probe_critic.py                              # the shipped model
    python scripts/probe_critic.py --model DIR --problems 400 --greedy

Plays held-out ``reach`` problems (validation split by default) through `math/reflection-v0` and
asks the model's critic for a verdict on two kinds of answers:

- **scripted**: the right chain or a slip of `trainers.embedded.transcripts.reach_slip` (half
  each), the answers the critic was built on;
- **own**: the model's own solver answers (sampled at T=1), the answers it meets in a team.

For each it prints, per level, the critic's true-positive and true-negative rates and balanced
accuracy (truth: the ``reach`` verifier), and how often its whole check is the scripted one
(`transcripts.reach_check_reply`, as the code now writes it: a build on older transcripts
scores 0 there). ``--show N`` prints N wrong verdicts on its own answers.
A quicker, narrower read than `scripts/evaluate.py`, which plays whole episodes.
"""

from __future__ import annotations

import argparse
import random
from typing import Any


def table(name: str, rows: list[tuple[int, bool, bool, bool]]) -> None:
    """Prints per-level TPR, TNR, balanced accuracy and exact-check rate of (level, truth,
    verdict, exact) rows."""
    print(f"{name}:")
    for level in [*sorted({r[0] for r in rows}), None]:
        sub = [r for r in rows if level is None or r[0] == level]
        right = [r for r in sub if r[1]]
        wrong = [r for r in sub if not r[1]]
        tpr = sum(r[2] for r in right) / len(right) if right else float("nan")
        tnr = sum(not r[2] for r in wrong) / len(wrong) if wrong else float("nan")
        exact = sum(r[3] for r in sub) / len(sub)
        label = "all" if level is None else f"level {level}"
        print(
            f"  {label:8s} n={len(sub):4d} right {len(right) / len(sub):.2f}  TPR {tpr:.2f}  "
            f"TNR {tnr:.2f}  balanced {(tpr + tnr) / 2:.3f}  exact check {exact:.2f}"
        )


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model", default=None, help="a model folder (default: the shipped embedded model)"
    )
    parser.add_argument("--problems", type=int, default=400, help="problems, spread over levels")
    parser.add_argument("--difficulty", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--split", default="validation", choices=["validation", "test"])
    parser.add_argument("--greedy", action="store_true", help="greedy critic (default: T=1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--show", type=int, default=0, help="wrong verdicts to print")
    return parser


def policies(args: argparse.Namespace) -> tuple[Any, Any]:
    """The solver (sampled at T=1) and the critic (greedy with ``--greedy``) of ``--model``,
    sharing one model; torch seeded and on ``--threads`` threads."""
    import dataclasses

    import torch

    from agents.base import GenerationArguments
    from agents.hf import HFPolicy
    from trainers.embedded import resolve_model

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    sampled = GenerationArguments(max_new_tokens=90, seed=args.seed, max_batch_size=64)
    solver = HFPolicy.from_pretrained(resolve_model(args.model), sampled)
    critic = HFPolicy(
        solver.model,
        solver.tokenizer,
        dataclasses.replace(sampled, max_new_tokens=120, do_sample=not args.greedy),
    )
    return solver, critic


def main(argv: list[str] | None = None) -> None:
    args = make_parser().parse_args(argv)

    import envs
    from envs.reflection import parse_verdict
    from trainers.embedded.transcripts import reach_check_reply, reach_slip, reach_solve_reply

    solver, critic = policies(args)
    task = envs.make_task(
        "reach", split=args.split, size=args.problems, difficulty=args.difficulty, seed=args.seed
    )
    problems, verifier = list(task.source), task.verifier
    rng = random.Random(args.seed)

    def observe(problem: dict, answer: str | None = None) -> dict[str, str]:
        """What the solver sees (no `answer`) or the critic sees after the solver's `answer`."""
        env = envs.make("math/reflection-v0", rounds=2, task="reach", wrapped=False)
        env.reset(options={"problem": problem})
        if answer is None:
            return env.observe("solver_0")
        env.step(answer)
        return env.observe("critic_0")

    def critic_rows(answers: list[str]) -> tuple[list, list[str]]:
        checks = critic.act([observe(p, a) for p, a in zip(problems, answers, strict=True)])
        rows = []
        for problem, answer, check in zip(problems, answers, checks, strict=True):
            truth = verifier.verify(answer, problem["answer"]).correct
            exact = check.strip() == reach_check_reply(problem, answer)
            rows.append(
                (problem["metadata"]["difficulty"], truth, parse_verdict(check) is True, exact)
            )
        return rows, checks

    scripted = [
        reach_solve_reply(p, None if rng.random() < 0.5 else reach_slip(p, rng)) for p in problems
    ]
    table("scripted answers (right or a transcript slip)", critic_rows(scripted)[0])

    own = solver.act([observe(p) for p in problems])
    rows, checks = critic_rows(own)
    table("its own solver's answers (sampled)", rows)
    shown = [i for i, r in enumerate(rows) if r[1] != r[2]][: args.show]
    for i in shown:
        print(f"\n{problems[i]['question']}\nanswer: {own[i].strip()}\ncheck:  {checks[i].strip()}")


if __name__ == "__main__":
    main()
