"""Procedural arithmetic word problems: offline, seeded, with difficulty levels.

Problem ``index`` of a (split, difficulty, seed) triple is generated from its own
``random.Random`` seeded by those values, so any problem can be rebuilt alone, in any order,
on any machine (reasoning-gym's per-index seeding). Level ``d`` chains ``d`` operations; operand
ranges grow with the level; every intermediate quantity is a non-negative integer. The metadata
holds the expression, the start value and the steps (``[operator, operand]`` pairs), from which
worked solutions can be written (`trainers.embedded` does, for the warm-start transcripts).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence

from envs.sources import Problem, ProblemSource

MAX_DIFFICULTY = 5
NAMES = (
    "Mia",
    "Noah",
    "Ava",
    "Liam",
    "Zoe",
    "Omar",
    "Lena",
    "Ravi",
    "Sofia",
    "Kenji",
    "Ines",
    "Tom",
)
ITEMS = ("apples", "marbles", "stickers", "books", "coins", "pencils", "cookies", "cards", "shells")
SPLIT_SALT = {"train": 0, "validation": 1, "test": 2}


def _add(rng: random.Random, value: int, level: int, name: str, item: str) -> tuple[int, str, str]:
    k = rng.randint(2, 9 * level + 1)
    text = rng.choice(
        (
            f"{name} buys {k} more {item}.",
            f"A friend gives {name} {k} {item}.",
            f"{name} finds {k} {item}.",
        )
    )
    return value + k, text, f"+ {k}"


def _sub(rng: random.Random, value: int, level: int, name: str, item: str) -> tuple[int, str, str]:
    if value < 2:
        return _add(rng, value, level, name, item)
    k = rng.randint(1, value - 1)
    text = rng.choice(
        (f"{name} gives away {k} {item}.", f"{name} loses {k} {item}.", f"{name} uses {k} {item}.")
    )
    return value - k, text, f"- {k}"


def _mul(rng: random.Random, value: int, level: int, name: str, item: str) -> tuple[int, str, str]:
    k = rng.randint(2, 2 + level)
    words = {2: "doubles", 3: "triples"}
    verb = words.get(k, f"becomes {k} times as large")
    return value * k, f"Then the number of {item} {name} has {verb}.", f"* {k}"


def _div(rng: random.Random, value: int, level: int, name: str, item: str) -> tuple[int, str, str]:
    divisors = [k for k in range(2, 10) if value % k == 0 and value // k > 0]
    if not divisors:
        return _mul(rng, value, level, name, item)
    k = rng.choice(divisors)
    text = f"{name} shares the {item} equally among {k} boxes and keeps only one box."
    return value // k, text, f"/ {k}"


OPS = (_add, _sub, _mul, _div)
APPLY = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a // b,
}


def generate_problem(
    index: int, *, difficulty: int = 1, split: str = "train", seed: int = 0
) -> Problem:
    """Build problem `index` of the given split, difficulty and seed (pure function of them)."""
    rng = random.Random(f"arithmetic|{seed}|{SPLIT_SALT.get(split, split)}|{difficulty}|{index}")
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    value = rng.randint(2, 10 * difficulty + 10)
    sentences = [f"{name} has {value} {item}."]
    expression = str(value)
    start, steps = value, []
    # Multiplication and division appear from level 2 on, keeping level 1 to one add/subtract.
    ops = OPS if difficulty > 1 else OPS[:2]
    for _ in range(difficulty):
        value, text, step = rng.choice(ops)(rng, value, difficulty, name, item)
        sentences.append(text)
        steps.append([step[0], int(step[2:])])
        expression = f"({expression} {step})"
    sentences.append(f"How many {item} does {name} have now?")
    return Problem(
        id=f"arithmetic/{split}/d{difficulty}/s{seed}/{index}",
        question=" ".join(sentences),
        answer=str(value),
        metadata={
            "source": "arithmetic",
            "index": index,
            "split": split,
            "difficulty": difficulty,
            "seed": seed,
            "expression": expression[1:-1] if expression.startswith("(") else expression,
            "start": start,
            "steps": steps,
        },
    )


def worked_solution(problem: Problem, slip_at: int | None = None, slip: int = 0) -> tuple[str, int]:
    """A step-by-step solution of an arithmetic problem and its final value.

    With `slip_at`, step number `slip_at` comes out `slip` too high, and the error propagates.
    """
    meta = problem["metadata"]
    value = meta["start"]
    lines = [f"Start with {value}."]
    for i, (op, k) in enumerate(meta["steps"]):
        new = APPLY[op](value, k) + (slip if i == slip_at else 0)
        lines.append(f"{value} {op} {k} = {new}.")
        value = new
    lines.append(f"The answer is \\boxed{{{value}}}.")
    return " ".join(lines), value


class GeneratedSource(ProblemSource):
    """`size` problems of a procedural family; items are built on access, so size costs nothing.

    Args:
        generate (`Callable`): ``generate(index, difficulty=, split=, seed=) -> Problem``, a pure
            function of its arguments.
        name (`str`): the family, the first part of its problem ids
            (``<name>/<split>/d<level>/s<seed>/<index>``).
        size (`int`, defaults to 1000): number of problems.
        difficulty (`int` or `Sequence[int]`, defaults to 1): level 1..`max_difficulty`, or
            several levels cycled over the indices (a curriculum mix).
        split (`str`, defaults to "train"): "train", "validation" or "test"; splits use disjoint
            random streams, so held-out problems are generated, not stored.
        seed (`int`, defaults to 0): changes every problem.
        max_difficulty (`int`, defaults to 5): the highest level.
    """

    def __init__(
        self,
        generate: Callable[..., Problem],
        name: str,
        size: int = 1000,
        difficulty: int | Sequence[int] = 1,
        split: str = "train",
        seed: int = 0,
        max_difficulty: int = MAX_DIFFICULTY,
    ) -> None:
        levels = [difficulty] if isinstance(difficulty, int) else list(difficulty)
        if not levels or any(
            not isinstance(d, int) or not 1 <= d <= max_difficulty for d in levels
        ):
            raise ValueError(
                f"{name} difficulty must be an int in 1..{max_difficulty} or a list of them, "
                f"got {difficulty!r}"
            )
        if not isinstance(size, int) or size < 1:
            raise ValueError(f"{name} size must be a positive int, got {size!r}")
        self.generate = generate
        self.size, self.levels, self.split, self.seed = size, levels, split, seed
        self.name, self.max_difficulty = name, max_difficulty

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> Problem:
        if not -self.size <= index < self.size:
            raise IndexError(f"problem index {index} out of range for {self.size} problems")
        index %= self.size
        level = self.levels[index % len(self.levels)]
        return self.generate(index, difficulty=level, split=self.split, seed=self.seed)

    def __iter__(self) -> Iterator[Problem]:
        return (self[i] for i in range(self.size))

    def get(self, problem_id: str) -> Problem:
        try:
            _, split, level, seed, index = problem_id.split("/")
            difficulty = int(level[1:])
            if not 1 <= difficulty <= self.max_difficulty:  # d999999999 would never finish
                raise ValueError(f"level {difficulty} is outside 1..{self.max_difficulty}")
            problem = self.generate(
                int(index), difficulty=difficulty, split=split, seed=int(seed[1:])
            )
        except ValueError as err:
            raise KeyError(
                f"{problem_id!r} is not a problem id of the {self.name} family "
                f"('{self.name}/<split>/d<level>/s<seed>/<index>'): {err}"
            ) from err
        if problem["id"] != problem_id:
            raise KeyError(f"{problem_id!r} is not a valid {self.name} problem id")
        return problem


class ArithmeticSource(GeneratedSource):
    """`size` generated arithmetic problems (see `GeneratedSource` for the arguments)."""

    def __init__(
        self,
        size: int = 1000,
        difficulty: int | Sequence[int] = 1,
        split: str = "train",
        seed: int = 0,
    ) -> None:
        super().__init__(generate_problem, "arithmetic", size, difficulty, split, seed)
