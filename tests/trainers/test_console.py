"""The main job's console: a bar over the budget, a compact line, the full logs in a file."""

from __future__ import annotations

import io
import json
from types import SimpleNamespace

import pytest
from transformers import PrinterCallback, ProgressCallback, TrainerControl, TrainerState

from trainers.evaluation.report import console as con

LOG = {
    "loss": -0.08,
    "grad_norm": 0.24,
    "completions/mean_length": 27.3,
    "agents/critic_0/accuracy": 0.9,
    "agents/critic_0/reward": 0.8,
    "agents/critic_0/completion_length": 48.5,
    "agents/solver_0/accuracy": 0.2,
    "agents/solver_0/reward": 0.2,
}


def test_clock_reads_minutes_and_hours():
    assert con.clock(206) == "3:26"
    assert con.clock(3725) == "1:02:05"
    assert con.clock(-3) == "0:00"


def test_compact_line_has_step_time_and_each_roles_mean_reward_and_accuracy():
    second = {**LOG, "agents/critic_0/accuracy": 0.7, "agents/solver_0/reward": 0.4}
    line = con.compact_line(40, 1000, 206.0, 694.0, [LOG, second])
    assert line == (
        "step 40/1000 (3:26 elapsed, 11:34 left) | critic_0 reward 0.80 review acc 0.80 | "
        "solver_0 reward 0.30 acc 0.20"
    )
    assert "loss" not in line and "completions" not in line
    balanced = {**LOG, "agents/critic_0/balanced_accuracy": 0.6}
    assert "critic_0 reward 0.80 review acc 0.90 balanced 0.60 |" in con.compact_line(
        40, 1000, 206.0, 694.0, [balanced]
    )


def run_console(tmp_path, monkeypatch, minutes, steps=25, every=10):
    now = [0.0]
    monkeypatch.setattr(con.time, "perf_counter", lambda: now[0])
    out = io.StringIO()
    console = con.Console(minutes=minutes, every=every, log_path=tmp_path / "log.jsonl", file=out)
    args = SimpleNamespace(disable_tqdm=True)  # lines only: the bar's redraws are tqdm's
    state, control = TrainerState(max_steps=1000), TrainerControl()
    state.is_world_process_zero = True
    console.on_train_begin(args, state, control)
    for step in range(1, steps + 1):
        now[0], state.global_step = 6.0 * step, step
        console.on_step_end(args, state, control)
        console.on_log(args, state, control, logs=dict(LOG))
    console.on_log(args, state, control, logs={"train_runtime": 150.0})
    console.on_train_end(args, state, control)
    return console, out.getvalue()


def test_console_prints_a_line_every_few_steps_and_logs_everything(tmp_path, monkeypatch):
    console, printed = run_console(tmp_path, monkeypatch, minutes=15)
    assert [line.split(" (")[0] for line in console.lines] == [
        "step 1/1000",
        "step 11/1000",
        "step 21/1000",
        "step 25/1000",  # the steps since the last line, when training ends
    ]
    assert printed.splitlines() == console.lines
    # 15 minutes of budget, 21 steps of 6 s: the budget ends first (774 s left, not 5,874)
    assert "(2:06 elapsed, 12:54 left)" in console.lines[-2]
    assert "{" not in printed and "loss" not in printed
    rows = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert len(rows) == 26 and rows[0] == {"step": 1, **LOG}
    assert rows[-1] == {"step": 25, "train_runtime": 150.0}


def test_console_without_a_time_budget_counts_steps_left(tmp_path, monkeypatch):
    console, _ = run_console(tmp_path, monkeypatch, minutes=None, steps=1)
    assert "(0:06 elapsed, 1:39:54 left)" in console.lines[0]  # 999 steps of 6 s


def time_bar(monkeypatch, minutes, max_steps):
    now = [0.0]
    monkeypatch.setattr(con.time, "perf_counter", lambda: now[0])
    console = con.Console(minutes=minutes, file=io.StringIO())
    args = SimpleNamespace(disable_tqdm=False)
    state, control = TrainerState(max_steps=max_steps), TrainerControl()
    state.is_world_process_zero = True
    console.on_train_begin(args, state, control)
    assert console.bar.total == 100 and console.bar.unit == "%"

    def step(seconds, global_step):
        now[0], state.global_step = seconds, global_step
        console.on_step_end(args, state, control)
        return console.bar.n, console.bar.postfix

    return step, lambda: console.on_train_end(args, state, control)


def test_time_bar_runs_over_the_time_budget_when_time_ends_the_run(monkeypatch):
    step, end = time_bar(monkeypatch, minutes=2, max_steps=1000)
    assert step(90.0, 17) == (75.0, "1.5/2.0 min, step 17/1000")
    assert step(500.0, 80)[0] == 100  # past the budget: the bar stops full
    end()


def test_time_bar_runs_over_the_steps_when_steps_end_the_run(monkeypatch):
    """`--max_steps 177 --max_train_minutes 1000`: the steps end the run, so the bar follows
    them, not the 1,000 minutes (it read 0% at the end before)."""
    step, end = time_bar(monkeypatch, minutes=1000, max_steps=177)
    assert step(60.0, 9) == (5.1, "1.0/1000.0 min, step 9/177")
    assert step(1000.0, 177)[0] == 100
    end()


def test_install_replaces_transformers_bar_and_printer():
    removed, added = [], []
    trainer = SimpleNamespace(remove_callback=removed.append, add_callback=added.append)
    console = con.Console()
    con.install(trainer, console)
    assert removed == [ProgressCallback, PrinterCallback] and added == [console]


def test_console_checks_its_interval():
    with pytest.raises(ValueError, match="every"):
        con.Console(every=0)


def test_compact_line_reads_the_reviewing_roles_of_the_env_it_trains():
    """A "review acc" is a reviewer's of the env given (its facts' review roles); with no env,
    every registered env's reviewers."""
    tool = {"agents/verifier_0/accuracy": 0.5, "agents/critic_0/accuracy": 0.9}
    line = con.compact_line(1, 10, 1.0, None, [tool], env_id="math/tool-v0")
    assert line.endswith("critic_0 acc 0.90 | verifier_0 review acc 0.50")
    line = con.compact_line(1, 10, 1.0, None, [tool], env_id="math/debate-v0")  # no reviewer
    assert line.endswith("critic_0 acc 0.90 | verifier_0 acc 0.50")
    line = con.compact_line(1, 10, 1.0, None, [tool])
    assert line.endswith("critic_0 review acc 0.90 | verifier_0 review acc 0.50")


def test_the_verification_table_names_the_reviewer_of_its_env():
    from trainers.evaluation.report.verification import reviewer

    metrics = {"agents": {"critic_0": {}, "verifier_0": {}}}
    assert reviewer(metrics, "math/tool-v0") == "verifier"
    assert reviewer(metrics, "math/reflection-v0") == reviewer(metrics) == "critic"
    assert reviewer(metrics, "math/debate-v0") == "review"  # debate has no reviewer
