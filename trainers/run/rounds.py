"""Rounds of rollout -> offline training: how ``sft`` and ``dpo`` train online.

One pass of SFT (or DPO) over the start model's own rollouts has little to teach: the embedded
team's rows are replies the model already gives (token accuracy 0.98 before the first step) and
one pass moved its headline by -0.010 (docs/results.md). Iterating is what makes SFT learn: each
round plays ``rollout_problems`` *fresh* training problems x ``rollout_samples`` with the latest
model, trains on what that play gave, and hands the result to the next round: expert iteration
(rejection-sampling fine-tuning, as in STaR and ReST-EM, continued from the latest model rather
than restarted). A DPO round cuts its pairs from its own play and uses the round's start model
as the reference (iterative DPO; with the default ``sft`` term on the chosen replies, iterative
RPO, Pang et al. 2024). On the embedded team more than one DPO round broke the refiner, so
``dpo`` plays one by default, after SFT rounds (``--sft_first``, on by default).

**Stages.** A run is a list of `Stage`: SFT rounds, then DPO rounds (``dpo``), or one kind
only (``sft``; ``dpo --sft_first false``). Rounds are numbered across stages and each plays fresh problems.

**Budget.** ``--max_train_minutes`` bounds the rounds, rollouts included: a stage starts another
round only while the time since the run began plus its last round's time fits in its share of
the budget (``dpo``'s ``sft_budget`` for the SFT stage, all of it for the last stage), so a run
ends inside the budget; a stage's first round always runs. ``--iterations`` caps a stage's
count.

**Files.** Round ``k`` writes ``rounds/round-k/`` (its trained model in ``model/``) and last
``round.json``, which records every round so far and the log history; the previous round's
folder is then removed (one model on disk at a time). The newest round's model is copied to
``final/``.

**Empty rounds.** When the run's first round holds nothing to train on (no good turn, no pair)
the run stops with an error saying which setting to change; a later round that finds nothing
keeps its model, says why in its record, and the run goes on.

**Resume.** ``--resume_from_checkpoint true`` continues after the newest round whose
``round.json`` is whole (with a fresh time budget); a round cut off midway is played again from
its start, and a stage the run had moved past is not played again.
"""

from __future__ import annotations

import copy
import json
import logging
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainers.algorithms.sft import good_turn, rollout_episodes
from trainers.rollout.records import Episode
from trainers.run.args import EnvArguments
from trainers.run.checkpoint import resume_checkpoint_requested, write_json_atomic
from trainers.run.experiment import finish_run, start_run

logger = logging.getLogger(__name__)

ROUND_FILE = "round.json"


class NoTrainingDataError(ValueError):
    """A round's rollouts hold nothing to train on (no good turn, no preference pair)."""


# update(model_path, episodes, round_config, round_dir) -> (trained model folder, figures):
# figures hold "steps" and "log_history" (the round's trainer rows), the rest goes to the record.
Update = Callable[[str, Sequence[Episode], Any, Path], tuple[Path, dict[str, Any]]]


def round_config(config: Any, index: int, round_dir: Path) -> Any:
    """`config` for round `index` (0-based): its own output folder and seed, never resumed
    (a round is resumed as a whole, from the round before it)."""
    out = copy.copy(config)
    out.output_dir = str(round_dir / "run")
    out.seed = config.seed + index
    out.resume_from_checkpoint = None
    return out


def rollout_figures(episodes: Sequence[Episode]) -> dict[str, float]:
    """Per agent: mean reward and share of good turns (`good_turn`: the turns SFT keeps) of the
    round's rollouts, as ``agents/<agent>/reward`` and ``agents/<agent>/accuracy``."""
    turns: dict[str, list[Any]] = {}
    for episode in episodes:
        for turn in episode.turns:
            turns.setdefault(turn.agent, []).append(turn)
    figures = {}
    for agent, rows in sorted(turns.items()):
        figures[f"agents/{agent}/reward"] = sum(t.reward for t in rows) / len(rows)
        figures[f"agents/{agent}/accuracy"] = sum(good_turn(t) for t in rows) / len(rows)
    return figures


def completed_rounds(rounds_dir: Path) -> dict[str, Any] | None:
    """The newest whole ``round.json`` under `rounds_dir` whose model folder exists; None."""
    found = []
    for path in rounds_dir.glob(f"round-*/{ROUND_FILE}"):
        try:
            state = json.loads(path.read_text())
            index = int(state["records"][-1]["round"])
        except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
            logger.warning("%s is unreadable (%s): that round is played again", path, exc)
            continue
        if Path(state["records"][-1]["model"], "config.json").is_file():
            found.append((index, state))
    return max(found, key=lambda item: item[0])[1] if found else None


@dataclass
class Stage:
    """Rounds of one kind: `update` trains each; at most `iterations` of them, started while the
    time since the run began plus the stage's last round fits in `share` of the budget (the
    stage's first round always runs)."""

    name: str
    update: Update
    iterations: int
    share: float = 1.0

    def __post_init__(self) -> None:
        if self.iterations < 1:
            raise ValueError(f"{self.name}: iterations={self.iterations}; it must be >= 1")
        if not 0 < self.share <= 1:
            raise ValueError(f"{self.name}: budget share {self.share}; it must be in (0, 1]")


def train_rounds(
    env_args: EnvArguments, config: Any, algo: str, stages: Sequence[Stage]
) -> dict[str, Any]:
    """Evaluate the start, run each stage's rounds of rollout -> update in turn (module
    docstring), evaluate the newest round's model; return the figures."""
    out, results = start_run(env_args, config, algo)
    rounds_dir = out / "rounds"
    model, records, history = results["start_model"], [], []
    state = completed_rounds(rounds_dir) if resume_checkpoint_requested(config) else None
    if state is not None:
        records, history = state["records"], state["history"]
        model = records[-1]["model"]
        logger.info("resuming after round %d (%s)", len(records), model)
    elif resume_checkpoint_requested(config):
        logger.warning("no complete round in %s: starting afresh", rounds_dir)
    budget = 60.0 * env_args.max_train_minutes if env_args.max_train_minutes else None
    began = time.perf_counter()
    names = [stage.name for stage in stages]
    for position, stage in enumerate(stages):
        done = [r for r in records if r.get("stage") == stage.name]
        if any(r.get("stage") in names[position + 1 :] for r in records):
            continue  # a resumed run that had moved past this stage
        last = None
        while len(done) < stage.iterations:
            spent = time.perf_counter() - began
            if budget is not None and last is not None and spent + last > stage.share * budget:
                logger.info("%s: no room for another round in the time budget", stage.name)
                break
            round_began = time.perf_counter()
            record, rows = play_round(env_args, config, stage, model, len(records), rounds_dir)
            step = sum(r["steps"] for r in records)
            index = len(records) + 1
            history.append({"step": step, "round": index, "stage": stage.name, **rows[0]})
            history.extend(
                {**r, "step": step + r.get("step", 0), "round": index, "stage": stage.name}
                for r in rows[1:]
            )
            records.append(record)
            done.append(record)
            write_json_atomic(
                rounds_dir / f"round-{index}" / ROUND_FILE, {"records": records, "history": history}
            )
            previous = rounds_dir / f"round-{index - 1}"
            if previous.is_dir():
                shutil.rmtree(previous)
            model = record["model"]
            last = time.perf_counter() - round_began
            logger.info("%s round %d done in %.0f s", stage.name, index, last)
    final = out / "final"
    if final.exists():
        shutil.rmtree(final)
    shutil.copytree(model, final)
    results["rounds"] = records
    results["train_seconds"] = time.perf_counter() - began
    results["train_steps"] = sum(r["steps"] for r in records)
    results["rollout_episodes"] = sum(r["episodes"] for r in records)
    return finish_run(env_args, config, results, final, history)


def play_round(
    env_args: EnvArguments, config: Any, stage: Stage, model: str, index: int, rounds_dir: Path
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Round `index` (0-based over the run): `model` plays fresh problems, `stage.update`
    trains on them. Returns the round's record and its history rows (the rollouts' figures,
    then the trainer's rows, steps counted from the round's start)."""
    began = time.perf_counter()
    episodes = rollout_episodes(
        env_args, model, config, seed=config.seed + index, offset=index * config.rollout_problems
    )
    rolled = time.perf_counter()
    round_dir = rounds_dir / f"round-{index + 1}"
    if round_dir.exists():  # a round cut off midway: played again from its start
        shutil.rmtree(round_dir)
    try:
        trained, figures = stage.update(
            model, episodes, round_config(config, index, round_dir), round_dir
        )
    except NoTrainingDataError as exc:
        if index == 0:  # the start model's play gives nothing: a setting must change
            raise
        logger.warning("round %d trains nothing and keeps its model: %s", index + 1, exc)
        trained = round_dir / "model"
        shutil.copytree(model, trained)
        figures = {"steps": 0, "log_history": [], "skipped": str(exc)}
    rows = [rollout_figures(episodes), *figures.pop("log_history")]
    record = {
        **figures,
        "round": index + 1,
        "stage": stage.name,
        "model": str(trained),
        "episodes": len(episodes),
        "rollout_seconds": round(rolled - began, 1),
        "seconds": round(time.perf_counter() - began, 1),
    }
    return record, rows
