"""The splits of a generated task an evaluation reads: the levels that hold enough distinct
problems of a split (`held_levels`), and how many each level's splits hold
(`level_split_sizes`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from envs.arithmetic import split_sizes

logger = logging.getLogger(__name__)


Levels = list[int] | dict[str, list[int]]
"""A generated task's levels, or a mixed task's (`envs.mixed`): each member's."""


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


def member_levels(task: str, levels: Any) -> dict[str, list[int]]:
    """Each member's levels of a mixed `task`: its entry of a mapping, the same list for every
    member, or (none given) its declared default levels (`envs.tasks.Levels`)."""
    from envs.mixed import member_names
    from envs.tasks import default_levels

    out = {}
    for name in member_names(task):
        given = levels.get(name) if isinstance(levels, Mapping) else levels
        out[name] = list(given or default_levels(name))
    return out


def held_levels(task: str, split: str, levels: Any, size: int) -> Levels:
    """The `levels` of a generated task that hold their share of `size` distinct problems of
    `split` (`envs.tasks.levels_holding`), each dropped one logged: ``unknown`` level 1 holds 48
    test problems, fewer than a third of 200, so the default evaluation is levels 2 and 3. A
    mixed task's: each member's (`member_levels`), each holding its share of `size`."""
    from envs.mixed import is_mixed
    from envs.tasks import levels_holding

    if is_mixed(task):
        mine = member_levels(task, levels)
        share = -(-size // len(mine))  # interleaved: the first `size` hold this many of each
        return {
            name: held_levels(name, split, own, share)  # type: ignore[misc]
            for name, own in mine.items()
        }

    kept, dropped = levels_holding(task, split, levels, size)
    for level, held in dropped.items():
        logger.warning(
            "%s level %d left out of the evaluation: it holds %d distinct %s problems, fewer "
            "than its share of %d problems over levels %s (choose levels with difficulty)",
            task,
            level,
            held,
            split,
            size,
            levels,
        )
    return kept


def level_split_sizes(task: str, levels: Any, draws: int = 150_000) -> dict[str, Any]:
    """For each level of a generated task, how many distinct problems each split holds
    (`envs.arithmetic.split_sizes`; ``exact`` False: lower bounds, the level is bigger); a
    mixed task's: per member."""
    import envs
    from envs.mixed import is_mixed

    if is_mixed(task):
        return {
            name: level_split_sizes(name, mine, draws)
            for name, mine in member_levels(task, levels).items()
        }

    out: dict[str, Any] = {}
    for level in dict.fromkeys(levels):
        source = envs.make_task(task, size=1, difficulty=level).source
        counts, exact = split_sizes(source.generate, source.name, level, draws=draws)
        out[str(level)] = {**counts, "exact": exact}
    return out
