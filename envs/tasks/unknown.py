"""Procedural "find the start" problems: an unknown start, checked by substitution.

An unknown start goes through ``d`` additions and subtractions, in order, and ends at a stated
value; the question asks for the start::

    Find x: x + 7 - 4 = 21.

Solving means undoing the steps backwards (21 + 4 - 7 = 18); checking a proposed start means
replaying the steps forwards, in the order the problem tells them, and comparing with the stated
end (18 + 7 = 25, 25 - 4 = 21: it matches). A wrong start misses the end by exactly its own
error, so the check also tells how to repair it. Checking costs as much as solving here: both
are the same chain of small steps, one run forwards and one backwards, so a critic made of the
same model checks no better than its solver solves. This is the control family, the one without
a generation-verification gap: measured, a trained team ties the same model's self-consistency
on it (docs/results.md, "The main job over 3 seeds"). ``reach`` (`envs.tasks.reach`) is the
family with the gap.

Level ``d`` has ``d`` steps of 2..9 each; the start is 2..30 and every quantity stays an integer in
1..60, so each step is a small fact while undoing several at once is not. Candidate ``index`` of
a (difficulty, seed) pair comes from its own seeded ``random.Random`` (as ``arithmetic``), so any
problem can be rebuilt alone; a problem's split is a hash of its text (`envs.tasks.splits`). The
metadata holds the start, the steps (``[operator, operand]`` pairs) and the end, from which checks
are written (`replay`).

Distinct problems per level and split (keyed hash, shares 0.8 / 0.1 / 0.1; seed-independent;
`envs.tasks.arithmetic.split_sizes`): see the README's task table.
"""

from __future__ import annotations

import random
from typing import Any

from envs.tasks.arithmetic import APPLY
from envs.tasks.sources import Problem

MAX_DIFFICULTY = 4
LIMIT = 60  # every quantity stays in 1..LIMIT
INVERSE = {"+": "-", "-": "+"}  # the operator that undoes each step


def generate_problem(index: int, *, difficulty: int = 1, seed: int = 0) -> Problem:
    """Candidate `index` of the family's stream at this difficulty and seed (a pure function of
    them); `envs.tasks.arithmetic.GeneratedSource` assigns its split by its text."""
    rng = random.Random(f"unknown|{seed}|{difficulty}|{index}")
    start = value = rng.randint(2, 30)
    steps = []
    for _ in range(difficulty):
        k = rng.randint(2, 9)
        add = rng.random() < 0.5
        if value + k > LIMIT:
            add = False
        if value - k < 1:
            add = True
        value = value + k if add else value - k
        steps.append(["+" if add else "-", k])
    chain = " ".join(f"{op} {k}" for op, k in steps)
    return Problem(
        id=f"unknown/d{difficulty}/s{seed}/{index}",
        question=f"Find x: x {chain} = {value}.",
        answer=str(start),
        metadata={
            "source": "unknown",
            "index": index,
            "difficulty": difficulty,
            "seed": seed,
            "start": start,
            "steps": steps,
            "end": value,
        },
    )


def replay(metadata: dict[str, Any], start: int) -> tuple[list[str], int]:
    """Replay the problem's steps forwards from `start`: the step equations and the end value."""
    value, lines = start, []
    for op, k in metadata["steps"]:
        new = APPLY[op](value, k)
        lines.append(f"{value} {op} {k} = {new}.")
        value = new
    return lines, value


def undo_steps(metadata: dict[str, Any]) -> list[tuple[str, int]]:
    """The steps that solve the problem from its stated end: each of its steps undone
    (``+ 7`` -> ``- 7``), last first."""
    return [(INVERSE[op], k) for op, k in reversed(metadata["steps"])]
