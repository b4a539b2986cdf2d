"""The held-out guard: the refusal of a run whose evaluation problems (`EvalConfig.problem_set`)
occur among its training problems (`Job.train_set`): `check_held_out`. Generated tasks are held
out by construction (`envs.tasks.splits`; their levels: `trainers.evaluation.splits`)."""

from __future__ import annotations

import logging
from typing import Any

from trainers.evaluation.config import EvalConfig
from trainers.rollout.source import RunSource

logger = logging.getLogger(__name__)


class OverlapError(ValueError):
    """A run's evaluation problems occur among its training problems."""


def check_held_out(job: RunSource, evaluation: EvalConfig) -> dict[str, Any]:
    """Refuse (`OverlapError`) a run whose evaluation problems share a text with its training
    problems (`envs.overlap`: whitespace and case ignored), unless ``--allow_overlap``; return
    the counts compared. Generated tasks are held out by construction (`envs.tasks.splits`); a
    user's JSONL or hub split is checked here, as the training problems the run will read
    (`job`: the run's settings, a `trainers.run.args.Job`)."""
    import envs

    train = job.train_set("train", job.train_problems).problems()
    held = evaluation.problems.problems()
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
