"""The run helpers shared by every training script: the time budget."""

from __future__ import annotations

import pytest
from transformers import TrainerControl, TrainerState

from trainers import run
from trainers.args import EnvArguments


def test_time_budget_stops_and_saves_once_the_minutes_have_passed(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(run.time, "perf_counter", lambda: clock[0])
    budget = run.TimeBudget(minutes=0.5)
    state, control = TrainerState(), TrainerControl()
    budget.on_train_begin(None, state, control)
    for step, now in enumerate((110.0, 129.9), start=1):
        clock[0], state.global_step = now, step
        budget.on_step_end(None, state, control)
        assert not control.should_training_stop and not control.should_save
    clock[0], state.global_step = 130.0, 3
    budget.on_step_end(None, state, control)
    assert control.should_training_stop and control.should_save and budget.stopped_at == 3


def test_time_budget_comes_from_the_env_arguments_and_is_checked():
    assert run.callbacks(EnvArguments()) == []
    (budget,) = run.callbacks(EnvArguments(max_train_minutes=15))
    assert isinstance(budget, run.TimeBudget) and budget.seconds == 900
    with pytest.raises(ValueError, match="max_train_minutes"):
        EnvArguments(max_train_minutes=0)
    with pytest.raises(ValueError, match="minutes"):
        run.TimeBudget(-1)
