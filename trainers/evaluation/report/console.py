"""The main job's terminal while it trains: one progress bar over the run's real budget and a
compact line every few steps, instead of transformers' bar over ``max_steps`` (which reads 12%
when the time budget ends the run) and its dict of ~30 metrics printed at every log.

The full metrics are not lost: each log goes, unchanged, to ``OUTPUT_DIR/log.jsonl`` (one JSON
object per line), to ``report_to``'s loggers and to ``trainer.state.log_history`` (and so to
``metrics.json``). `install` puts a `Console` in place of transformers' `ProgressCallback` /
`PrinterCallback` on a built trainer.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm
from transformers import PrinterCallback, ProgressCallback, TrainerCallback
from transformers import logging as hf_logging

from envs.roles import role_of
from trainers.rollout.records import review_roles_for

AGENT = "agents/"  # the per-role metrics the rollout logs: agents/<name>/{reward,accuracy}
FIGURES = ("reward", "accuracy", "balanced_accuracy")


def clock(seconds: float) -> str:
    """``3725`` -> ``"1:02:05"``, ``206`` -> ``"3:26"``."""
    minutes, secs = divmod(round(max(seconds, 0.0)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def role_figures(logs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Mean reward and accuracy per agent over `logs`: ``{"critic_0": {"reward": .., ..}}``."""
    sums: dict[tuple[str, str], list[float]] = defaultdict(list)
    for row in logs:
        for key, value in row.items():
            parts = key.split("/")
            wanted = key.startswith(AGENT) and len(parts) == 3 and parts[2] in FIGURES
            if wanted and isinstance(value, int | float) and math.isfinite(value):
                sums[(parts[1], parts[2])].append(float(value))
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for (agent, name), values in sorted(sums.items()):
        out[agent][name] = sum(values) / len(values)
    return dict(out)


def compact_line(
    step: int,
    max_steps: int,
    elapsed: float,
    left: float | None,
    logs: list[dict[str, Any]],
    env_id: str | None = None,
) -> str:
    """One line: the step, time elapsed and left, and each agent's mean reward and accuracy over
    `logs` (a reviewer's accuracy, a critic's or a verifier's, is that of its verdicts: "review
    acc"; its roles are `env_id`'s, `review_roles_for`: every registered env's when None)."""
    reviewing = review_roles_for(env_id)
    when = f"{clock(elapsed)} elapsed" + (f", {clock(left)} left" if left is not None else "")
    parts = [f"step {step}/{max_steps} ({when})"]
    for agent, figures in role_figures(logs).items():
        text = agent
        if "reward" in figures:
            text += f" reward {figures['reward']:.2f}"
        if "accuracy" in figures:
            review = "review " if role_of(agent) in reviewing else ""  # a verdict's accuracy
            text += f" {review}acc {figures['accuracy']:.2f}"
        if "balanced_accuracy" in figures:  # a reviewer's verdicts, both classes weighed alike
            text += f" balanced {figures['balanced_accuracy']:.2f}"
        parts.append(text)
    return " | ".join(parts)


class Console(TrainerCallback):
    """A tqdm bar over the run's budget and a compact line every `every` logged steps.

    With a time budget (`minutes`, ``--max_train_minutes``) the bar shows the share of the run's
    budget spent: the larger of the time's share and the steps' (``max_steps``), since the run
    ends at whichever bound comes first, with the minutes and the step count beside it; without
    one, it counts steps over ``max_steps``. Each line averages the logs since the
    previous line (`compact_line`; `env_id`, the env trained, names its reviewing roles). Only
    the main process prints and writes `log_path`.
    """

    def __init__(
        self,
        minutes: float | None = None,
        every: int = 10,
        log_path: str | Path | None = None,
        file: Any = None,
        env_id: str | None = None,
    ) -> None:
        if every < 1:
            raise ValueError(f"every must be >= 1 step, got {every}")
        self.env_id = env_id
        self.seconds = 60.0 * minutes if minutes else None
        self.every = every
        self.log_path = Path(log_path) if log_path is not None else None
        self.file = file  # where the bar and the lines go (None: stderr, tqdm's default)
        self.bar: Any = None
        self.began = 0.0
        self.pending: list[dict[str, Any]] = []
        self.last_line = 0
        self.lines: list[str] = []
        self._bars_were_on = True

    def on_train_begin(self, args, state, control, **kwargs):
        self.began = time.perf_counter()
        if not state.is_world_process_zero:
            return
        # transformers' own bars ("Writing model shards" at every checkpoint) would cut ours
        self._bars_were_on = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()
        options: dict[str, Any] = {
            "file": self.file,
            "dynamic_ncols": True,
            "disable": bool(args.disable_tqdm),
        }
        if self.seconds is not None:
            self.bar = tqdm(total=100, unit="%", bar_format="{l_bar}{bar}|{postfix}", **options)
        else:
            self.bar = tqdm(total=state.max_steps, unit="step", **options)

    def elapsed(self) -> float:
        return time.perf_counter() - self.began

    def spent(self, state) -> float:
        """The share of the run's budget spent, 0 to 1: of its time or of its steps, whichever
        ends the run first."""
        by_time = self.elapsed() / self.seconds if self.seconds else 0.0
        by_steps = state.global_step / state.max_steps if state.max_steps > 0 else 0.0
        return min(max(by_time, by_steps), 1.0)

    def left(self, state) -> float | None:
        """Seconds left: what the time budget leaves, or the steps left at the mean step time,
        whichever ends first."""
        elapsed, step = self.elapsed(), state.global_step
        by_steps = elapsed / step * (state.max_steps - step) if step else None
        if self.seconds is None:
            return by_steps
        by_time = max(self.seconds - elapsed, 0.0)
        return by_time if by_steps is None else min(by_time, by_steps)

    def on_step_end(self, args, state, control, **kwargs):
        if self.bar is None:
            return
        if self.seconds is not None:
            self.bar.n = round(100 * self.spent(state), 1)
            minutes = f"{self.elapsed() / 60:.1f}/{self.seconds / 60:.1f} min"
            # tqdm writes a postfix after ", ": the bar reads "40%|####      |, 6.0/15.0 min, ..."
            self.bar.set_postfix_str(f"{minutes}, step {state.global_step}/{state.max_steps}")
        else:
            self.bar.update(state.global_step - self.bar.n)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with self.log_path.open("a", encoding="utf-8") as f:
                f.write(json.dumps({"step": state.global_step, **logs}, default=str) + "\n")
        if not any(key.startswith(AGENT) for key in logs):
            return  # the end-of-training summary (train_runtime, ...) stays in the log file
        self.pending.append(dict(logs))
        step = state.global_step
        if step == 1 or step - self.last_line >= self.every or step >= state.max_steps:
            self.write_line(state)

    def write_line(self, state) -> None:
        """The compact line of the logs since the previous one, above the bar."""
        line = compact_line(
            state.global_step,
            state.max_steps,
            self.elapsed(),
            self.left(state),
            self.pending,
            self.env_id,
        )
        self.lines.append(line)
        out = self.file or sys.stderr  # the bar's stream, so lines do not cut it
        if self.bar is not None and not self.bar.disable:
            self.bar.write(line, file=out)
        else:
            print(line, file=out, flush=True)
        self.pending, self.last_line = [], state.global_step

    def on_train_end(self, args, state, control, **kwargs):
        if self.pending:  # the steps since the last line: the budget ended the run
            self.write_line(state)
        if self.bar is not None:
            self.bar.close()
            self.bar = None
            if self._bars_were_on:
                hf_logging.enable_progress_bar()


def install(trainer: Any, console: Console) -> Any:
    """Put `console` in place of transformers' `ProgressCallback` and `PrinterCallback` (one of
    which every `Trainer` adds) on `trainer`; return it."""
    trainer.remove_callback(ProgressCallback)
    trainer.remove_callback(PrinterCallback)
    trainer.add_callback(console)
    return trainer
