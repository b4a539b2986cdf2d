"""Procedural arithmetic word problems: offline, seeded, with difficulty levels.

Candidate ``index`` of a (difficulty, seed) pair is generated from its own ``random.Random``
seeded by those values, so any problem can be rebuilt alone, in any order, on any machine
(reasoning-gym's per-index seeding); `GeneratedSource` serves the candidates of one split, the
split of each being a hash of its text (`envs.tasks.splits`), so no text is in two splits. Level
``d`` chains ``d`` operations; operand ranges grow with the level; every intermediate quantity is
a non-negative integer. The metadata holds the expression, the start value and the steps
(``[operator, operand]`` pairs), from which worked solutions can be written (`trainers.embedded`
does, for the warm-start transcripts).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from envs.tasks.sources import Problem, ProblemSource
from envs.tasks.splits import SPLITS, canonical_text, check_split, split_of

MAX_DIFFICULTY = 5
DEFAULT_SIZE = 1000  # problems of a generated source when no size is given
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


def generate_problem(index: int, *, difficulty: int = 1, seed: int = 0) -> Problem:
    """Candidate `index` of the family's stream at this difficulty and seed (a pure function of
    them); `GeneratedSource` assigns its split by its text."""
    rng = random.Random(f"arithmetic|{seed}|{difficulty}|{index}")
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
        id=f"arithmetic/d{difficulty}/s{seed}/{index}",
        question=" ".join(sentences),
        answer=str(value),
        metadata={
            "source": "arithmetic",
            "index": index,
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


class LevelStream:
    """The distinct problems of one (family, level, seed), each in the split its text hashes to
    (`envs.tasks.splits`), discovered lazily from the family's seeded candidate stream and shared by
    every source of that family, level and seed (the env copies of a run read one stream).

    Candidate ``j`` is ``generate(j, difficulty=level, seed=seed)``; a candidate whose text was
    drawn before (in any split) is skipped, so a split's problems are distinct texts. A level is
    *exhausted* when `STALL` candidates in a row bring no new text: it then holds exactly the
    texts found, which for a small level (``unknown`` level 1: about 430 in all) is all of them.
    """

    STALL = 50_000  # candidates in a row with no new text: the level holds no more
    MAX_DRAWS = 3_000_000  # a level this big is never exhausted in practice; stop looking

    def __init__(self, generate: Callable[..., Problem], level: int, seed: int) -> None:
        self.generate, self.level, self.seed = generate, level, seed
        self.found: dict[str, list[int]] = {split: [] for split in SPLITS}  # candidate indices
        self.seen: set[str] = set()
        self.draws = 0
        self.stale = 0
        self.exhausted = False  # every text of the level found
        self.capped = False  # MAX_DRAWS drawn without exhausting it: the counts are lower bounds
        self.lock = threading.Lock()

    def ensure(self, split: str, count: int, max_draws: int | None = None) -> int:
        """Draw until `split` holds `count` problems, the level is exhausted or `max_draws`
        candidates have been drawn in all; return how many problems `split` holds."""
        found = self.found[split]
        limit = self.MAX_DRAWS if max_draws is None else min(max_draws, self.MAX_DRAWS)
        with self.lock:
            while len(found) < count and not (self.exhausted or self.capped):
                if self.draws >= limit:
                    break
                problem = self.generate(self.draws, difficulty=self.level, seed=self.seed)
                text = canonical_text(problem["question"])
                if text in self.seen:
                    self.stale += 1
                else:
                    self.seen.add(text)
                    self.found[split_of(text)].append(self.draws)
                    self.stale = 0
                self.draws += 1
                self.exhausted = self.stale >= self.STALL
                self.capped = not self.exhausted and self.draws >= self.MAX_DRAWS
            return len(found)

    def candidate(self, split: str, k: int) -> int:
        """The candidate index of problem `k` of `split` (cycling a small split's problems when
        `k` is past them; `GeneratedSource` decides whether that is allowed)."""
        available = self.ensure(split, k + 1)
        if available == 0:
            raise ValueError(f"level {self.level} holds no {split} problem")
        return self.found[split][k % available]


_STREAMS: dict[tuple[Any, ...], LevelStream] = {}
_STREAMS_LOCK = threading.Lock()


def level_stream(generate: Callable[..., Problem], name: str, level: int, seed: int) -> LevelStream:
    """The shared `LevelStream` of a family's level and seed."""
    key = (generate, name, level, seed)
    with _STREAMS_LOCK:
        if key not in _STREAMS:
            _STREAMS[key] = LevelStream(generate, level, seed)
        return _STREAMS[key]


def split_sizes(
    generate: Callable[..., Problem], name: str, level: int, seed: int = 0, draws: int = 200_000
) -> tuple[dict[str, int], bool]:
    """How many distinct problems each split of a level holds, from `draws` candidates of its
    stream (or more, when the process drew that stream further already: streams are shared):
    ``(counts, exact)``; `exact` is False when the level was not exhausted, and the counts are
    then lower bounds (``unknown`` level 3 and up, every ``arithmetic`` level)."""
    stream = level_stream(generate, name, level, seed)
    stream.ensure(SPLITS[0], stream.MAX_DRAWS, max_draws=draws)
    return {split: len(stream.found[split]) for split in SPLITS}, stream.exhausted


class GeneratedSource(ProblemSource):
    """`size` problems of a procedural family, held out by construction (`envs.tasks.splits`).

    A problem's split is a keyed hash of its question text, so no text is in two splits whatever
    the seed or size; within a split every problem is a distinct text. Problems are built on
    access (the first access of a level draws its stream; every source of the family, level and
    seed shares it), and problem ``k`` of a level can be rebuilt alone from its id.

    Args:
        generate (`Callable`): ``generate(index, *, difficulty, seed) -> Problem``, candidate
            ``index`` of the family's stream at that level: a pure function of its arguments. Its
            id and split are replaced by the source's.
        name (`str`): the family, the first part of its problem ids
            (``<name>/<split>/d<level>/s<seed>/<k>``: problem k of that level and split).
        size (`int | None`, defaults to None): number of problems; None: 1000, or fewer when
            a level holds fewer distinct problems of the split than its share of 1000
            (``unknown`` level 1: 333 train, 47 validation, 48 test problems).
        difficulty (`int` or `Sequence[int]`, defaults to 1): level 1..`max_difficulty`, or
            several levels cycled over the indices (a curriculum mix).
        split (`str`, defaults to "train"): "train", "validation" or "test".
        seed (`int`, defaults to 0): the order in which a split's problems are served (for a
            small level, the same problems in another order).
        max_difficulty (`int`, defaults to 5): the highest level.
        repeat (`bool`, defaults to False): a level with fewer distinct problems in the split
            than the size asks of it cycles them (epochs, for training); False raises a
            ValueError naming the level, how many it holds and what to pass instead.
    """

    def __init__(
        self,
        generate: Callable[..., Problem],
        name: str,
        size: int | None = None,
        difficulty: int | Sequence[int] = 1,
        split: str = "train",
        seed: int = 0,
        max_difficulty: int = MAX_DIFFICULTY,
        repeat: bool = False,
    ) -> None:
        levels = [difficulty] if isinstance(difficulty, int) else list(difficulty)
        if not levels or any(
            not isinstance(d, int) or not 1 <= d <= max_difficulty for d in levels
        ):
            raise ValueError(
                f"{name} difficulty must be an int in 1..{max_difficulty} or a list of them, "
                f"got {difficulty!r}"
            )
        if size is not None and (not isinstance(size, int) or size < 1):
            raise ValueError(f"{name} size must be a positive int or None, got {size!r}")
        self.generate, self.split = generate, check_split(split, name)
        self.levels, self.seed, self.repeat = levels, seed, repeat
        self.name, self.max_difficulty = name, max_difficulty
        self.size = size or DEFAULT_SIZE
        if size is None and not repeat:  # as many as every level holds, up to DEFAULT_SIZE
            for level in dict.fromkeys(levels):
                held = self.stream(level).ensure(self.split, self.per_level(level))
                if held < self.per_level(level):
                    self.size = min(self.size, self.max_size(level, held)) or 1
        for level in dict.fromkeys(levels):
            needed = self.per_level(level)
            held = self.stream(level).ensure(self.split, needed)
            if needed and (held == 0 or (held < needed and not repeat)):
                raise ValueError(
                    f"{name} level {level} holds {held} distinct {self.split} problems, but "
                    f"size={size} over levels {levels} asks {needed} of it. Pass a size of at "
                    f"most {self.max_size(level, held)}, leave level {level} out of difficulty, "
                    "or pass repeat=True to cycle them (for training)"
                )

    def stream(self, level: int, seed: int | None = None) -> LevelStream:
        seed = self.seed if seed is None else seed
        return level_stream(self.generate, self.name, level, seed)

    def slot(self, index: int) -> tuple[int, int]:
        """(level, k): problem `index` is problem k of its level (levels cycle over indices)."""
        rounds, position = divmod(index, len(self.levels))
        level = self.levels[position]
        per_round = self.levels.count(level)
        return level, rounds * per_round + self.levels[:position].count(level)

    def per_level(self, level: int) -> int:
        """How many of the `size` problems are of `level`."""
        return sum(1 for i in range(self.size) if self.levels[i % len(self.levels)] == level)

    def max_size(self, level: int, held: int) -> int:
        """The largest size whose share of `level` is at most `held` problems."""
        share = self.levels.count(level)
        return max(held // share * len(self.levels), 0)

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> Problem:
        if not -self.size <= index < self.size:
            raise IndexError(f"problem index {index} out of range for {self.size} problems")
        level, k = self.slot(index % self.size)
        return self._problem(level, self.split, k, self.seed)

    def __iter__(self) -> Iterator[Problem]:
        return (self[i] for i in range(self.size))

    def _problem(self, level: int, split: str, k: int, seed: int) -> Problem:
        j = self.stream(level, seed).candidate(split, k)
        problem = self.generate(j, difficulty=level, seed=seed)
        return Problem(
            id=f"{self.name}/{split}/d{level}/s{seed}/{k}",
            question=problem["question"],
            answer=problem["answer"],
            metadata={
                **problem["metadata"],
                "split": split,
                "difficulty": level,
                "seed": seed,
                "index": k,
                "candidate": j,
            },
        )

    def get(self, problem_id: str) -> Problem:
        try:
            name, split, level, seed_part, index = problem_id.split("/")
            difficulty, k, seed = int(level[1:]), int(index), int(seed_part[1:])
            if name != self.name or not seed_part.startswith("s"):
                raise ValueError(f"not of the {self.name} family")
            if not 1 <= difficulty <= self.max_difficulty:  # d999999999 would never finish
                raise ValueError(f"level {difficulty} is outside 1..{self.max_difficulty}")
            check_split(split, self.name)
            if k < 0:
                raise ValueError(f"index {k} is negative")
            held = self.stream(difficulty, seed).ensure(split, k + 1)
            if k >= held and not self.repeat:
                raise ValueError(f"level {difficulty} holds {held} {split} problems")
            problem = self._problem(difficulty, split, k, seed)
        except ValueError as err:
            raise KeyError(
                f"{problem_id!r} is not a problem id of this {self.name} source "
                f"('{self.name}/<split>/d<level>/s<seed>/<index>'): {err}"
            ) from err
        return problem


class ArithmeticSource(GeneratedSource):
    """`size` generated arithmetic problems (see `GeneratedSource` for the arguments)."""

    def __init__(
        self,
        size: int | None = None,
        difficulty: int | Sequence[int] = 1,
        split: str = "train",
        seed: int = 0,
        repeat: bool = False,
    ) -> None:
        super().__init__(
            generate_problem, "arithmetic", size, difficulty, split, seed, repeat=repeat
        )
