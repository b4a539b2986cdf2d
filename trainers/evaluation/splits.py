"""The levels of a generated task as runs write them (`Levels`, `as_levels`, `describe_levels`),
and how many distinct problems each level's splits hold (`level_split_sizes`). Which levels hold
enough problems for a set is the set's own question (`envs.tasks.problems.ProblemSet.held`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from envs.tasks.arithmetic import split_sizes
from envs.tasks.problems import ProblemSet

logger = logging.getLogger(__name__)


Levels = list[int] | dict[str, list[int]]
"""A generated task's levels, or a mixed task's (`envs.tasks.mixed`): each member's."""


def as_levels(value: Any) -> Levels:
    """`value` as `Levels`: a mapping member -> its levels kept as one, a sequence as a list."""
    if isinstance(value, Mapping):
        return {str(k): list(v) for k, v in value.items()}
    return list(value or ())


def describe_levels(levels: Levels) -> str:
    """``2, 3``, or a mixed task's ``unknown 2, 3; reach 2``."""
    if isinstance(levels, Mapping):
        return "; ".join(f"{name} {', '.join(map(str, lv))}" for name, lv in levels.items())
    return ", ".join(map(str, levels))


def level_split_sizes(task: str, levels: Any, draws: int = 150_000) -> dict[str, Any]:
    """For each level of a generated task, how many distinct problems each split holds
    (`envs.tasks.arithmetic.split_sizes`; ``exact`` False: lower bounds, the level is bigger); a
    mixed task's: per member."""
    import envs
    from envs.tasks.mixed import is_mixed

    if is_mixed(task):
        return {
            name: level_split_sizes(name, mine, draws)
            for name, mine in ProblemSet(task, levels=levels or None).level_list().items()
        }

    out: dict[str, Any] = {}
    for level in dict.fromkeys(levels):
        source = envs.make_task(task, size=1, difficulty=level).source
        counts, exact = split_sizes(source.generate, source.name, level, draws=draws)
        out[str(level)] = {**counts, "exact": exact}
    return out
