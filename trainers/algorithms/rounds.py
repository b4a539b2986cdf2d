"""Rounds of rollout -> offline training: how ``sft`` and ``dpo`` train online.

One pass of SFT (or DPO) over the start model's own rollouts has little to teach: the embedded
team's rows are replies the model already gives, and one pass hardly moves it. Iterating is what makes SFT learn: each
round plays ``rollout_problems`` *fresh* training problems x ``rollout_samples`` with the latest
model, trains on what that play gave, and hands the result to the next round: expert iteration
(rejection-sampling fine-tuning, as in STaR and ReST-EM, continued from the latest model rather
than restarted). A DPO round cuts its pairs from its own play and uses the round's start model
as the reference (iterative DPO; with the default ``sft`` term on the chosen replies, iterative
RPO, Pang et al. 2024). On the embedded team more than one DPO round broke the refiner (`git show
93f0224:docs/results.md`, "SFT and DPO in rounds"), so
``dpo`` plays one by default, after SFT rounds (``--sft_first``, on by default).

**Stages.** A run is a list of `Stage`: SFT rounds, then DPO rounds (``dpo``), or one kind
only (``sft``; ``dpo --sft_first false``). Rounds are numbered across stages and each plays fresh problems.

**Budget.** ``--max_train_minutes`` bounds the rounds, rollouts and validation checks
included: a stage starts another round only while the time since the run began plus its last
round's time (with its check) fits in its share of the budget (``dpo``'s ``sft_budget`` for the
SFT stage, all of it for the last stage), so a run ends inside the budget; a stage's first round
always runs. ``--iterations`` caps a stage's count.

**Selection on validation.** Each round's model is scored on validation problems and the best
kept (`trainers.algorithms.round_selection`; the check, which problems and how they are scored:
`trainers.run.validation`); a run's scripts enter through `trainers.run.train.train_rounds`.

**Files.** Round ``k`` writes ``rounds/round-k/`` (its trained model in ``model/``) and last
``round.json``, which records every round so far, the log history and the best model so far
(``selection``: its ``best`` round, model folder and score, and the check that scored them). Every other round's
folder is then removed but the best round's: at most two models on disk. The kept model (the
best, or with selection off the newest) is copied to ``final/``.

**Empty rounds.** When the run's first round holds nothing to train on (no good turn, no pair)
the run stops with an error saying which setting to change; a later round that finds nothing
keeps its model, says why in its record, and the run goes on.

**Resume.** ``--resume_from_checkpoint true`` continues after the newest round whose
``round.json`` is whole (with a fresh time budget); a round cut off midway is played again from
its start, and a stage the run had moved past (or stopped early, ``patience``) is not played
again. The best model so far, its score and the rounds without improvement come back from
``round.json``; when the check has changed since (other flags) or the best model's folder is
gone, selection starts afresh from the resumed model, scored first.
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

from trainers.algorithms.checkpoint import resume_checkpoint_requested, write_json_atomic
from trainers.algorithms.round_selection import (
    Check,
    keep_final,
    select,
    stale_rounds,
    start_selection,
)
from trainers.algorithms.sft import good_turn, rollout_episodes
from trainers.rollout.records import Episode, review_roles_of
from trainers.rollout.source import RunSource

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
    turns: dict[str, list[tuple[float, bool]]] = {}
    for episode in episodes:
        reviewing = review_roles_of(episode)
        for turn in episode.turns:
            turns.setdefault(turn.agent, []).append((turn.reward, good_turn(turn, reviewing)))
    figures = {}
    for agent, rows in sorted(turns.items()):
        figures[f"agents/{agent}/reward"] = sum(reward for reward, _ in rows) / len(rows)
        figures[f"agents/{agent}/accuracy"] = sum(good for _, good in rows) / len(rows)
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


def resumed_rounds(
    config: Any, rounds_dir: Path, start_model: str
) -> tuple[dict[str, Any] | None, list[dict[str, Any]], list[dict[str, Any]], str]:
    """(state, records, history, model): a resumed run's newest complete round
    (`completed_rounds`), or a fresh start from `start_model`."""
    state = completed_rounds(rounds_dir) if resume_checkpoint_requested(config) else None
    if state is None:
        if resume_checkpoint_requested(config):
            logger.warning("no complete round in %s: starting afresh", rounds_dir)
        return None, [], [], start_model
    records = state["records"]
    logger.info("resuming after round %d (%s)", len(records), records[-1]["model"])
    return state, records, state["history"], records[-1]["model"]


@dataclass
class Rounds:
    """A run's rounds so far (`play_rounds`): their records and log history, the selection's
    state (`start_selection`), where they are saved, the validation check (None: rounds are not
    selected) and the time budget: `seconds` (None: none) since `began` (a
    ``time.perf_counter()`` reading)."""

    rounds_dir: Path
    records: list[dict[str, Any]]
    history: list[dict[str, Any]]
    selection: dict[str, Any]
    validation: Check | None
    seconds: float | None
    began: float


def play_rounds(
    job: RunSource,
    config: Any,
    stages: Sequence[Stage],
    out: Path,
    start_model: str,
    validation: Check | None,
    why_not: str,
    began: float,
) -> tuple[dict[str, Any], Path, list[dict[str, Any]]]:
    """Run each stage's rounds of rollout -> update in turn from `start_model` (or a resumed
    run's newest round), each scored by `validation` when there is one (None: ``why_not`` says
    why not), within the time budget counted from `began`; keep the best model, or the newest, in
    ``out/final`` (module docstring). Returns the run's figures (``rounds``,
    ``selected_round``, ``selection``, ``train_seconds``, ``train_steps``,
    ``rollout_episodes``), the final model's folder and the log history."""
    rounds_dir = out / "rounds"
    state, records, history, model = resumed_rounds(config, rounds_dir, start_model)
    budget = 60.0 * job.max_train_minutes if job.max_train_minutes else None
    selection = start_selection(validation, state, records, model, why_not)
    run = Rounds(rounds_dir, records, history, selection, validation, budget, began)
    names = [stage.name for stage in stages]
    for position, stage in enumerate(stages):
        model = play_stage(job, config, run, stage, names[position + 1 :], model)
    final = keep_final(out, model, validation, selection)
    figures = {
        "rounds": records,
        "selected_round": selection["best"]["round"] if validation else len(records),
        "selection": {k: v for k, v in selection.items() if k != "check"},
        "train_seconds": time.perf_counter() - began,
        "train_steps": sum(r["steps"] for r in records),
        "rollout_episodes": sum(r["episodes"] for r in records),
    }
    return figures, final, history


def play_stage(
    job: RunSource,
    config: Any,
    run: Rounds,
    stage: Stage,
    later: Sequence[str],
    model: str,
) -> str:
    """`stage`'s rounds from `model` (a stage the run had moved past, to one of the `later`
    stages, or had stopped early, is not played again), noted in `run`; return the newest
    round's model."""
    records, validation, selection = run.records, run.validation, run.selection
    done = [r for r in records if r.get("stage") == stage.name]
    if any(r.get("stage") in later for r in records):
        return model  # a resumed run that had moved past this stage
    stale = stale_rounds(records, stage.name) if validation else 0
    if validation is not None and validation.stops(stale):
        return model  # a resumed run that had stopped this stage early
    if validation is not None and not done and str(model) != selection["best"]["model"]:
        model = selection["best"]["model"]
        print(
            f"{stage.name}: starts from the best model so far (round {selection['best']['round']})"
        )
    last = None
    while len(done) < stage.iterations:
        spent = time.perf_counter() - run.began
        if (
            run.seconds is not None
            and last is not None
            and spent + last > stage.share * run.seconds
        ):
            logger.info("%s: no room for another round in the time budget", stage.name)
            break
        round_began = time.perf_counter()
        record, rows = play_round(job, config, stage, model, len(records), run.rounds_dir)
        step = sum(r["steps"] for r in records)
        index = len(records) + 1
        if validation is not None:
            stale = select(validation, selection, record, index, stale)
        run.history.extend(round_history(rows, step, index, stage.name))
        records.append(record)
        done.append(record)
        stops = validation is not None and validation.stops(stale)
        if stops:
            selection["stopped_early"].append(stage.name)
        save_round(run.rounds_dir, index, records, run.history, selection if validation else None)
        model = record["model"]
        last = time.perf_counter() - round_began
        logger.info("%s round %d done in %.0f s", stage.name, index, last)
        if stops:
            print(
                f"{stage.name}: {stale} rounds in a row without a better validation score "
                f"(--patience {validation.patience}): the stage stops"
            )
            break
    return model


def round_history(
    rows: Sequence[dict[str, Any]], step: int, index: int, stage: str
) -> list[dict[str, Any]]:
    """Round `index`'s training log rows for the run's history, at the run's step count: the
    round's rollout figures at `step`, then its trainer's rows after it."""
    first = {"step": step, "round": index, "stage": stage, **rows[0]}
    rest = [
        {**r, "step": step + r.get("step", 0), "round": index, "stage": stage} for r in rows[1:]
    ]
    return [first, *rest]


def save_round(
    rounds_dir: Path,
    index: int,
    records: list[dict[str, Any]],
    history: list[dict[str, Any]],
    selection: dict[str, Any] | None,
) -> None:
    """Write round `index`'s resume file (`ROUND_FILE`) and remove the round folders no longer
    needed: every one but the newest and, when rounds are selected, the best."""
    saved: dict[str, Any] = {"records": records, "history": history}
    if selection is not None:
        saved["selection"] = selection
    write_json_atomic(rounds_dir / f"round-{index}" / ROUND_FILE, saved)
    keep = {f"round-{index}"}
    if selection is not None:
        keep.add(f"round-{selection['best']['round']}")
    for folder in rounds_dir.glob("round-*"):
        if folder.name not in keep and folder.is_dir():
            shutil.rmtree(folder)


def play_round(
    job: RunSource, config: Any, stage: Stage, model: str, index: int, rounds_dir: Path
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Round `index` (0-based over the run): `model` plays fresh problems, `stage.update`
    trains on them. Returns the round's record and its history rows (the rollouts' figures,
    then the trainer's rows, steps counted from the round's start)."""
    began = time.perf_counter()
    episodes = rollout_episodes(
        job, model, config, seed=config.seed + index, offset=index * config.rollout_problems
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
