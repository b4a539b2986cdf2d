"""Held out by construction: a generated problem's split is a function of its text alone.

A procedural family (``arithmetic``, ``unknown``, any `envs.tasks.arithmetic.GeneratedSource`) draws
candidate problems from a seeded stream; each candidate's split is a keyed hash of its
*canonical* question text (whitespace runs collapsed, case folded) into train / validation / test
with the shares of `SPLIT_SHARES`. No text can be in two splits, whatever the seed, the size or
the level mix, and the embedded build and every training run read the train split only.

`overlap(a, b)` is the guard every training script runs before it trains: the texts two problem
collections share, after the same normalisation.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

SPLITS = ("train", "validation", "test")
SPLIT_SHARES = {"train": 0.8, "validation": 0.1, "test": 0.1}
SPLIT_KEY = b"mathteams/splits/v1"  # changing it reassigns every problem: a new version of them


def canonical_text(text: str) -> str:
    """`text` with whitespace runs collapsed to one space, stripped and case-folded."""
    return " ".join(str(text).split()).casefold()


def split_of(text: str) -> str:
    """The split of a question text: "train", "validation" or "test" (`SPLIT_SHARES`)."""
    digest = hashlib.blake2b(canonical_text(text).encode(), key=SPLIT_KEY, digest_size=8)
    u = int.from_bytes(digest.digest(), "big") / 2**64
    bound = 0.0
    for split in SPLITS:
        bound += SPLIT_SHARES[split]
        if u < bound:
            return split
    return SPLITS[-1]


def check_split(split: Any, family: str) -> str:
    """`split` if it names a split of a generated family, else a ValueError naming the choices."""
    if split not in SPLITS:
        raise ValueError(f"{family}: split must be one of {', '.join(SPLITS)}, got {split!r}")
    return split


def _texts(problems: Any) -> Iterable[str]:
    """The question texts of a task, a problem source, or an iterable of problems or strings."""
    source = getattr(problems, "source", problems)  # a Task holds its problems in .source
    for item in source:
        if isinstance(item, str):
            yield item
        elif isinstance(item, Mapping) and isinstance(item.get("question"), str):
            yield item["question"]
        else:
            raise TypeError(
                "overlap() takes problem sources, tasks, or iterables of problems "
                f"({{'question': str, ...}}) or strings; got an item of type {type(item).__name__}"
            )


def overlap(a: Any, b: Any) -> list[str]:
    """The question texts of `a` that also occur in `b`, after normalising whitespace and case
    (`canonical_text`); each shared text once, as `a` first words it, in `a`'s order.

    `a` and `b` are `ProblemSource`s, `Task`s, or iterables of problems or question strings::

        envs.overlap(train_task.source, test_task.source)  # [] when held out
    """
    theirs = {canonical_text(t) for t in _texts(b)}
    shared, seen = [], set()
    for text in _texts(a):
        key = canonical_text(text)
        if key in theirs and key not in seen:
            seen.add(key)
            shared.append(text)
    return shared
