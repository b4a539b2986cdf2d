"""A run's time budget (``--max_train_minutes``) as a `Trainer` callback: `TimeBudget` stops
training, after saving a checkpoint, once the budget is spent; `callbacks` makes it from the
run's arguments, less what a warm-up already spent (`budget_minutes`)."""

from __future__ import annotations

import logging
import time

from transformers import TrainerCallback

from trainers.run.args import Job

logger = logging.getLogger(__name__)


class TimeBudget(TrainerCallback):
    """Stops training (after saving a checkpoint) once `minutes` of training have passed.

    The clock starts at ``on_train_begin`` of this process, so a resumed run gets a fresh budget.
    """

    def __init__(self, minutes: float) -> None:
        if not minutes > 0:
            raise ValueError(f"time budget must be > 0 minutes, got {minutes!r}")
        self.seconds = 60.0 * minutes
        self.began: float | None = None
        self.stopped_at: int | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.began = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if self.began is not None and time.perf_counter() - self.began >= self.seconds:
            if self.stopped_at is None:
                logger.info(
                    "time budget of %.1f min reached at step %d",
                    self.seconds / 60,
                    state.global_step,
                )
            self.stopped_at = state.global_step
            control.should_training_stop = True
            control.should_save = True
        return control


MIN_MINUTES = 1.0  # what a budget leaves to training after `spent_seconds` of warm-up, at least


def budget_minutes(job: Job, spent_seconds: float = 0.0) -> float | None:
    """What the time budget leaves to training: ``--max_train_minutes`` less `spent_seconds`
    already spent on the run's training (a warm-up), but at least `MIN_MINUTES`; None: none."""
    minutes = job.max_train_minutes
    if not minutes:
        return None
    return max(minutes - spent_seconds / 60, MIN_MINUTES)


def callbacks(job: Job, spent_seconds: float = 0.0) -> list[TrainerCallback]:
    """The run's callbacks from the env arguments: the time budget (`budget_minutes`)."""
    minutes = budget_minutes(job, spent_seconds)
    return [] if minutes is None else [TimeBudget(minutes)]
