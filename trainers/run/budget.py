"""A run's clock as `Trainer` callbacks: `TimeBudget` stops training once
``--max_train_minutes`` are spent; `Checkpoints` saves one every ``--save_minutes`` of training
(beside the config's ``save_steps``; its ``save_total_limit`` keeps the newest two) and none on
the step training stops at, as the run saves ``final/`` then. `callbacks` makes them from the
run's arguments, the budget less what a warm-up already spent (`budget_minutes`)."""

from __future__ import annotations

import logging
import time

from transformers import TrainerCallback

from trainers.run.args import Job

logger = logging.getLogger(__name__)


class TimeBudget(TrainerCallback):
    """Stops training once `minutes` of training have passed (the run saves ``final/`` next).

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
        return control


class Checkpoints(TrainerCallback):
    """When a run checkpoints: also once `minutes` of training (None: never by time) have
    passed since the last checkpoint or the start, so a slow run is resumable however few steps
    it takes (the config's ``save_steps`` saves on its own), and never on the step training
    stops at (the budget's or ``max_steps``'): the run saves ``final/`` then, and a checkpoint
    would duplicate it. It must come after the callbacks that stop training."""

    def __init__(self, minutes: float | None = None) -> None:
        if minutes is not None and not minutes > 0:
            raise ValueError(f"save_minutes must be > 0 or None, got {minutes!r}")
        self.seconds = None if minutes is None else 60.0 * minutes
        self.last: float | None = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.last = time.perf_counter()

    def on_save(self, args, state, control, **kwargs):
        self.last = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if control.should_training_stop:
            control.should_save = False
            return control
        due = self.seconds is not None and self.last is not None
        if due and time.perf_counter() - self.last >= self.seconds:
            control.should_save = True  # never unset: save_steps may have asked on its own
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
    """The run's callbacks from its arguments: the time budget (`budget_minutes`), then when
    to checkpoint (`Checkpoints`: ``--save_minutes``, never a duplicate of ``final/``)."""
    minutes = budget_minutes(job, spent_seconds)
    budget = [] if minutes is None else [TimeBudget(minutes)]
    return [*budget, Checkpoints(job.rollout.save_minutes)]
