"""Procedural "reach the target" problems: a search to solve, a replay to check.

Given numbers in a fixed order and a target, put ``+``, ``-`` or ``*`` between them, working
left to right, so that the chain ends at the target::

    Reach 20 from 3, 4, 8 in this order with + - * (left to right).
    -> \\boxed{3 * 4 = 12, 12 + 8 = 20}

Solving is a search: nothing in the numbers says which of the ``3^(n-1)`` operator sequences
lands on the target, so an answer given at a glance is a guess, and working it out means trying
sequences one by one. Checking a proposed chain is one replay: each step is a small fact and the
end is compared with the target once. This is the family where checking an answer is much
cheaper than producing it (a generation-verification gap), the kind where a critic made of the
same model can beat its solver and a team can beat the model's self-consistency. ``unknown``
(`envs.tasks.unknown`) is its control: there checking a start costs as much as finding it.

Level ``d`` has ``d + 2`` numbers of 2..9 (``3^(d+1)`` operator sequences: 9, 27, 81, 243); the
chain's every value stays an integer in 1..`LIMIT`, so each step is a fact the embedded model's
single-token numbers can state. Only problems with exactly one operator sequence that reaches
the target are kept (any intermediate values allowed in the count), so a problem has one right
chain and every right answer votes together (`rewards.reach`). Candidate ``index`` of a
(difficulty, seed) pair comes from its own seeded ``random.Random``, so any problem can be
rebuilt alone; a problem's split is a hash of its text (`envs.tasks.splits`). The metadata holds the
numbers, the operators and the target; the answer (the reference) is the right chain itself,
from which the verifier reads the numbers and the target.
"""

from __future__ import annotations

import itertools
import random

from envs.tasks.sources import Problem
from rewards.reach import Chain, apply

MAX_DIFFICULTY = 4
LIMIT = 150  # every value of the right chain stays in 1..LIMIT
OPERATORS = ("+", "-", "*")
MAX_TRIES = 200  # candidate draws per index before giving up on uniqueness (never reached)


def evaluate(numbers: list[int], ops: tuple[str, ...] | list[str]) -> list[int]:
    """The running values of the chain ``numbers[0] ops[0] numbers[1] ...``, left to right."""
    values = [numbers[0]]
    for op, number in zip(ops, numbers[1:], strict=True):
        values.append(apply(values[-1], op, number))
    return values


def solutions(numbers: list[int], target: int) -> list[tuple[str, ...]]:
    """Every operator sequence that takes `numbers` to `target`."""
    return [
        ops
        for ops in itertools.product(OPERATORS, repeat=len(numbers) - 1)
        if evaluate(numbers, ops)[-1] == target
    ]


def reaches(numbers: list[int], target: int, stop: int = 2) -> int:
    """How many operator sequences take `numbers` to `target`, counting up to `stop` (a depth-first
    search that ends as soon as `stop` are found: the uniqueness test of every candidate)."""
    found = 0

    def walk(i: int, value: int) -> None:
        nonlocal found
        if i == len(numbers):
            found += value == target
            return
        for op in OPERATORS:
            if found >= stop:
                return
            walk(i + 1, apply(value, op, numbers[i]))

    walk(1, numbers[0])
    return found


def chain_text(numbers: list[int], ops: tuple[str, ...] | list[str]) -> str:
    """The chain of `numbers` under `ops` in the verifier's spelling (``3 * 4 = 12, 12 + 8 =
    20``)."""
    values = evaluate(numbers, ops)
    steps = tuple((values[i], op, numbers[i + 1], values[i + 1]) for i, op in enumerate(ops))
    return Chain(steps).text()


def question(numbers: list[int], target: int) -> str:
    listed = ", ".join(map(str, numbers))
    return f"Reach {target} from {listed} in this order with + - * (left to right)."


def generate_problem(index: int, *, difficulty: int = 1, seed: int = 0) -> Problem:
    """Candidate `index` of the family's stream at this difficulty and seed (a pure function of
    them); `envs.tasks.arithmetic.GeneratedSource` assigns its split by its text."""
    if not 1 <= difficulty <= MAX_DIFFICULTY:
        raise ValueError(f"reach difficulty must be in 1..{MAX_DIFFICULTY}, got {difficulty!r}")
    rng = random.Random(f"reach|{seed}|{difficulty}|{index}")
    count = difficulty + 2
    for _ in range(MAX_TRIES):
        numbers = [rng.randint(2, 9)]
        ops: list[str] = []
        value = numbers[0]
        for _ in range(count - 1):
            number = rng.randint(2, 9)
            allowed = [op for op in OPERATORS if 1 <= apply(value, op, number) <= LIMIT]
            op = rng.choice(allowed)
            numbers.append(number)
            ops.append(op)
            value = apply(value, op, number)
        if reaches(numbers, value) == 1:
            break
    else:  # pragma: no cover - every level finds a unique problem within a few draws
        raise RuntimeError(f"reach: no unique problem in {MAX_TRIES} draws (index {index})")
    return Problem(
        id=f"reach/d{difficulty}/s{seed}/{index}",
        question=question(numbers, value),
        answer=chain_text(numbers, ops),
        metadata={
            "source": "reach",
            "index": index,
            "difficulty": difficulty,
            "seed": seed,
            "numbers": numbers,
            "operators": ops,
            "target": value,
        },
    )
