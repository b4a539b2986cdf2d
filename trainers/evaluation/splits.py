"""The splits of a generated task an evaluation reads: the levels that hold enough distinct
problems of a split (`held_levels`), and how many each level's splits hold
(`level_split_sizes`)."""

from __future__ import annotations

import logging
from typing import Any

from envs.arithmetic import split_sizes

logger = logging.getLogger(__name__)


def held_levels(task: str, split: str, levels: list[int], size: int) -> list[int]:
    """The `levels` of a generated task that hold their share of `size` distinct problems of
    `split` (`envs.tasks.levels_holding`), each dropped one logged: ``unknown`` level 1 holds 48
    test problems, fewer than a third of 200, so the default evaluation is levels 2 and 3."""
    from envs.tasks import levels_holding

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


def level_split_sizes(task: str, levels: list[int], draws: int = 150_000) -> dict[str, Any]:
    """For each level of a generated task, how many distinct problems each split holds
    (`envs.arithmetic.split_sizes`; ``exact`` False: lower bounds, the level is bigger)."""
    import envs

    out: dict[str, Any] = {}
    for level in dict.fromkeys(levels):
        source = envs.make_task(task, size=1, difficulty=level).source
        counts, exact = split_sizes(source.generate, source.name, level, draws=draws)
        out[str(level)] = {**counts, "exact": exact}
    return out
