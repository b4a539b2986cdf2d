"""The held-out guard: the problems a run trains or evaluates on (`task_problems`), and the
refusal of a run whose evaluation problems occur among its training problems
(`check_held_out`). Generated tasks are held out by construction (`envs.splits`; their levels:
`trainers.evaluation.splits`)."""

from __future__ import annotations

import logging
from typing import Any

from trainers.evaluation.config import EvalConfig
from trainers.rollout.source import RunSource

logger = logging.getLogger(__name__)


class OverlapError(ValueError):
    """A run's evaluation problems occur among its training problems."""


def task_problems(kwargs: dict[str, Any], count: int, offset: int = 0) -> list[dict[str, Any]]:
    """Problems `offset`..`offset + count - 1` (at most the source's) of the task an env built
    with `kwargs` plays: what a run trains or evaluates on."""
    import envs

    options = dict(kwargs.get("task_kwargs") or {})
    for key in ("data_path", "split"):
        if kwargs.get(key) is not None:
            options[key] = kwargs[key]
    source = envs.make_task(kwargs["task"], **options).source
    return [source[i] for i in range(offset, min(offset + count, len(source)))]


def check_held_out(job: RunSource, evaluation: EvalConfig) -> dict[str, Any]:
    """Refuse (`OverlapError`) a run whose evaluation problems share a text with its training
    problems (`envs.overlap`: whitespace and case ignored), unless ``--allow_overlap``; return
    the counts compared. Generated tasks are held out by construction (`envs.splits`); a user's
    JSONL or hub split is checked here, as the training problems the run will read
    (`job`: the run's settings, a `trainers.run.args.Job`)."""
    import envs

    train = task_problems(job.env_kwargs(split="train"), job.train_problems)
    held = task_problems(evaluation.env_kwargs(), evaluation.num_problems, evaluation.offset)
    shared = envs.overlap(held, train)
    figures = {"train_problems": len(train), "eval_problems": len(held), "shared": len(shared)}
    if shared and not job.allow_overlap:
        examples = "; ".join(repr(text[:100]) for text in shared[:3])
        raise OverlapError(
            f"refusing to train: {len(shared)} of the {len(held)} evaluation problems occur among "
            f"the {len(train)} training problems (whitespace and case ignored), e.g. {examples}. "
            "Evaluate on other problems (--eval_split, --eval_data_path) or pass --allow_overlap "
            "to train anyway"
        )
    if shared:
        logger.warning("--allow_overlap: %d evaluation problems are training problems", len(shared))
    return figures
