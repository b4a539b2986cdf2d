"""How a model plays ``coloring``, per level: its solver, its critic and the lookup under both.

    python scripts/probe_coloring.py --model DIR          # a build: build_embedded.py --variant coloring
    python scripts/probe_coloring.py --model DIR --problems 400 --split test

Plays held-out ``coloring`` problems (validation by default) through `math/reflection-v0` and
prints, per level:

- **solver**: the share of its one-shot colourings that are right, and the share of vertices it
  colours right (chance on a free vertex: 1/3);
- **critic on its own answers** and **on scripted ones** (the right colouring or a slip of
  `trainers.embedded.coloring_rows.slip`, half each): true-positive and true-negative rates,
  balanced accuracy, and among its rejections of wrong answers the share whose named edge
  (``BAD u v``) is a real clash.

Then the lookup alone, on scan drills the build never saw (`coloring_rows.scan_drill_rows`
with another seed): the share of marks (an edge and its two ends' colours) written right, and
of verdicts. A critic whose marks are at chance has not learnt the lookup its check is made of.
"""

from __future__ import annotations

import argparse
import random
import re
from typing import Any

MARK = re.compile(r"(\d+) (\d+) ([ABC]) ([ABC])")


def _rates(rows: list[tuple[bool, bool, bool | None]]) -> str:
    """TPR, TNR, balanced accuracy and named-real rate of (truth, accepted, named real) rows."""
    right = [r for r in rows if r[0]]
    wrong = [r for r in rows if not r[0]]
    tpr = sum(r[1] for r in right) / len(right) if right else float("nan")
    tnr = sum(not r[1] for r in wrong) / len(wrong) if wrong else float("nan")
    named = [r[2] for r in wrong if not r[1] and r[2] is not None]
    balanced = (tpr + tnr) / 2 if right and wrong else (tpr if right else tnr)
    real = sum(named) / len(named) if named else float("nan")
    return f"TPR {tpr:.2f} TNR {tnr:.2f} balanced {balanced:.2f} named real {real:.2f}"


def probe_level(policy: Any, level: int, args: argparse.Namespace, rng: random.Random) -> str:
    import envs
    from envs.tasks.faults import ColoringFaults
    from trainers.embedded.coloring_rows import slip, solution, solve_reply

    problems = list(
        envs.make_task("coloring", split=args.split, size=args.problems, difficulty=level).source
    )
    env = envs.make("math/reflection-v0", task="coloring", refiner_mode="patch").unwrapped
    faults = ColoringFaults()

    def observe(agent: str, answers: list[str] | None = None) -> list[Any]:
        out = []
        for i, problem in enumerate(problems):
            env.reset(options={"problem": problem})
            if answers is not None:
                env.step(answers[i])
            out.append(env.observe(agent))
        return out

    own = policy.act(observe("solver_0"))
    verdicts = [env.verifier.verify(a, p["answer"]) for a, p in zip(own, problems, strict=True)]
    per_vertex = []
    for answer, problem in zip(own, problems, strict=True):
        stated = dict(re.findall(r"(\d+) ([ABC])", answer))
        right = solution(problem)
        per_vertex.append(sum(stated.get(str(v)) == c for v, c in enumerate(right)) / len(right))
    scripted = [
        solve_reply(p) if rng.random() < 0.5 else solve_reply(p, slip(p, rng)) for p in problems
    ]
    solved = sum(v.correct for v in verdicts) / len(problems)
    vertices = sum(per_vertex) / len(per_vertex)
    parts = [f"level {level}: solver right {solved:.3f}, vertices right {vertices:.3f}"]
    for name, answers in (("own", own), ("scripted", scripted)):
        reviews = policy.act(observe("critic_0", answers))
        rows = []
        for answer, review, problem in zip(answers, reviews, problems, strict=True):
            truth = env.verifier.verify(answer, problem["answer"]).correct
            accepted = "verdict: correct" in review.lower()
            named = faults.named(review)
            real = bool(named) and named[0] in faults.faults(answer, problem["answer"])
            rows.append((truth, accepted, None if truth or accepted else real))
        parts.append(f"critic on {name} answers: {_rates(rows)}")
    return " | ".join(parts)


def probe_drills(policy: Any, count: int) -> str:
    from trainers.embedded.coloring_rows import scan_drill_rows

    rows = scan_drill_rows(count, seed=12345)  # a seed the build does not use
    observations = [
        {"instruction": r["messages"][0]["content"], "prompt": r["messages"][1]["content"]}
        for r in rows
    ]
    replies = policy.act(observations)
    marks = right = verdicts = 0
    for row, reply in zip(rows, replies, strict=True):
        target = row["messages"][2]["content"]
        wanted, got = MARK.findall(target), MARK.findall(reply)
        marks += len(wanted)
        right += sum(a == b for a, b in zip(wanted, got, strict=False))
        verdicts += ("Verdict: correct" in target) == ("Verdict: correct" in reply)
    return (
        f"scan drills ({count}): marks right {right / max(marks, 1):.3f}, "
        f"verdicts right {verdicts / count:.3f}"
    )


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default=None, help="a model folder (default: the shipped one)")
    parser.add_argument("--problems", type=int, default=100, help="problems per level")
    parser.add_argument("--difficulty", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--split", default="validation", choices=["validation", "test"])
    parser.add_argument("--drills", type=int, default=300, help="scan drills (0: none)")
    parser.add_argument("--max_new_tokens", type=int, default=160)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    import torch

    from agents.base import GenerationArguments
    from agents.hf import HFPolicy
    from trainers.embedded import resolve_model

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    generation = GenerationArguments(max_new_tokens=args.max_new_tokens, temperature=1.0)
    policy = HFPolicy.from_pretrained(resolve_model(args.model, "coloring"), generation)
    rng = random.Random(args.seed)
    for level in args.difficulty:
        print(probe_level(policy, level, args, rng), flush=True)
    if args.drills:
        print(probe_drills(policy, args.drills), flush=True)
    return 0
