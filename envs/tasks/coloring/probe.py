"""How a model plays ``coloring``, per level: its solver, its critic and its refiner, each on
the solver's own answers, beside the scripted check and patch.

    mathteams probe coloring --model DIR          # a build: build_embedded.py --variant coloring
    mathteams probe coloring --model DIR --problems 400 --split test --sample

Plays held-out ``coloring`` problems (validation by default) through `math/reflection-v0` as a
run on ``coloring`` plays it (the refiner patches and is shown the first named clash), greedy
(``--sample``: at T=1, as the team plays), and prints, per level:

- **solver**: the share of its one-shot colourings that are right; of its misses, how many
  are within 2 vertices of right (the material a check and a patch can repair), and the share
  of vertices coloured right (chance on a free vertex: 1/3);
- **critic on its own answers** and **on scripted ones** (the right colouring or a slip of
  `rows.slip`, half each): true-positive and true-negative rates,
  balanced accuracy, and the share of its rejections whose named edge (``BAD u v``) is a real
  clash;
- **refiner on the solver's wrong answers**, shown the first clash as a sound critic names it:
  how often its patch is the scripted min-conflicts patch (`rows.min_conflicts`), and
  for it and for the scripted patch the share that leave fewer clashes, and that are right.

``--drills N`` adds the lookup alone, on scan drills no build saw (`rows.scan_drill_rows`
with another seed): the share of marks (an edge and its two ends' colours) written right.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from typing import Any

from envs.tasks.coloring.faults import ColoringFaults
from envs.tasks.coloring.rows import (
    clashes,
    min_conflicts,
    scan_drill_rows,
    slip,
    solution,
    solve_reply,
)
from envs.tasks.coloring.verifier import parse_coloring, read_boxes

MARK = re.compile(r"(\d+) (\d+) ([ABC]) ([ABC])")


def _rates(rows: list[tuple[bool, bool, bool | None]]) -> str:
    """TPR, TNR, balanced accuracy and named-real rate (the share of rejections whose named edge
    is a real clash) of (truth, accepted, named real) rows."""
    right = [r for r in rows if r[0]]
    wrong = [r for r in rows if not r[0]]
    tpr = sum(r[1] for r in right) / len(right) if right else float("nan")
    tnr = sum(not r[1] for r in wrong) / len(wrong) if wrong else float("nan")
    named = [r[2] for r in rows if not r[1] and r[2] is not None]
    balanced = (tpr + tnr) / 2 if right and wrong else (tpr if right else tnr)
    real = sum(named) / len(named) if named else float("nan")
    return f"TPR {tpr:.2f} TNR {tnr:.2f} balanced {balanced:.2f} named real {real:.2f}"


def _colours(answer: str, n: int) -> list[str] | None:
    """The colouring a solver's answer states, vertex by vertex, or None when it states none
    whole (`verifier.parse_coloring` on its last box)."""
    boxes = read_boxes(answer)
    coloring = parse_coloring(boxes[-1], n)[0] if boxes else None
    if coloring is None or sorted(coloring) != list(range(n)):
        return None
    return [coloring[v] for v in range(n)]


def solver_line(problems: list[Any], answers: list[str]) -> str:
    """The solver's share right, its misses within 2 vertices, and its vertices right."""
    right = near = unread = 0
    vertices = []
    for problem, answer in zip(problems, answers, strict=True):
        truth = solution(problem)
        stated = _colours(answer, len(truth))
        if stated is None:
            unread += 1
            vertices.append(0.0)
            continue
        off = sum(a != b for a, b in zip(stated, truth, strict=True))
        right += off == 0
        near += 0 < off <= 2
        vertices.append(1 - off / len(truth))
    misses = len(problems) - right
    return (
        f"solver right {right / len(problems):.3f}, misses within 2 vertices {near} of "
        f"{misses} (unread {unread}), vertices right {sum(vertices) / len(vertices):.3f}"
    )


def refiner_line(env: Any, policy: Any, problems: list[Any], answers: list[str]) -> str:
    """The refiner on the wrong answers among `answers`, shown their first clash as a sound
    critic names it, against the scripted min-conflicts patch of the same clash."""
    faults = ColoringFaults()
    cases, observations = [], []
    for problem, answer in zip(problems, answers, strict=True):
        stated = _colours(answer, problem["metadata"]["n"])
        patch = None if stated is None else min_conflicts(problem, stated)
        if patch is None:
            continue  # nothing clashes, or both ends of the first clash are given
        u, v = clashes(problem, stated)[0]
        env.reset(options={"problem": problem})
        env.step(answer)
        env.step(f"BAD {u} {v}. Verdict: incorrect")
        observations.append(env.observe("refiner_0"))
        cases.append((problem, answer, stated, patch))
    if not cases:
        return "refiner: no wrong answer to patch"
    replies = policy.act(observations)
    fixed = [0, 0]
    fewer = [0, 0]
    same = 0
    for (problem, answer, stated, (vertex, colour)), reply in zip(cases, replies, strict=True):
        scripted = list(stated)
        scripted[vertex] = colour
        patched = faults.patch(answer, reply, problem["answer"]) or answer
        learnt = _colours(patched, len(stated)) or stated
        same += learnt == scripted
        before = len(clashes(problem, stated))
        for i, after in enumerate((learnt, scripted)):
            fewer[i] += len(clashes(problem, after)) < before
            fixed[i] += after == solution(problem)
    count = len(cases)
    return (
        f"refiner on {count} named clashes: the scripted patch {same / count:.2f}, fewer clashes "
        f"{fewer[0] / count:.2f} (scripted {fewer[1] / count:.2f}), right after it "
        f"{fixed[0] / count:.2f} (scripted {fixed[1] / count:.2f})"
    )


def critic_line(env: Any, policy: Any, problems: list[Any], answers: list[str], name: str) -> str:
    """The critic's rates (`_rates`) on `answers`."""
    faults = ColoringFaults()
    observations = []
    for problem, answer in zip(problems, answers, strict=True):
        env.reset(options={"problem": problem})
        env.step(answer)
        observations.append(env.observe("critic_0"))
    reviews = policy.act(observations)
    rows = []
    for answer, review, problem in zip(answers, reviews, problems, strict=True):
        truth = env.verifier.verify(answer, problem["answer"]).correct
        accepted = "verdict: correct" in review.lower()
        named = faults.named(review)
        real = bool(named) and named[0] in faults.faults(answer, problem["answer"])
        rows.append((truth, accepted, None if accepted else real))
    return f"critic on {name} answers: {_rates(rows)}"


def probe_level(policy: Any, env: Any, level: int, args: Any, rng: random.Random) -> str:
    """One level's line: the solver, the critic on its own and on scripted answers, the
    refiner."""
    from envs.tasks import make_task

    problems = list(
        make_task("coloring", split=args.split, size=args.problems, difficulty=level).source
    )

    def observe(agent: str) -> list[Any]:
        out = []
        for problem in problems:
            env.reset(options={"problem": problem})
            out.append(env.observe(agent))
        return out

    own = policy.act(observe("solver_0"))
    scripted = [
        solve_reply(p) if rng.random() < 0.5 else solve_reply(p, slip(p, rng)) for p in problems
    ]
    return " | ".join(
        [
            f"level {level}: {solver_line(problems, own)}",
            critic_line(env, policy, problems, own, "own"),
            critic_line(env, policy, problems, scripted, "scripted"),
            refiner_line(env, policy, problems, own),
        ]
    )


def probe_drills(policy: Any, count: int) -> str:
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


def add_arguments(parser: Any) -> None:
    """The probe's own flags (`trainers.embedded.probe_family` adds the model's)."""
    parser.add_argument("--problems", type=int, default=100, help="problems per level")
    parser.add_argument("--difficulty", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--split", default="validation", choices=["validation", "test"])
    parser.add_argument("--drills", type=int, default=0, help="scan drills (0: none)")


def run(policy: Any, env: Any, args: Any) -> Iterator[str]:
    """The probe's lines: one per level, then the drills' (`FamilyProbe.run`)."""
    rng = random.Random(args.seed)
    for level in args.difficulty:
        yield probe_level(policy, env, level, args, rng)
    if args.drills:
        yield probe_drills(policy, args.drills)
