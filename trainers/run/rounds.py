"""Rounds of rollout -> offline training: how ``sft`` and ``dpo`` train online.

One pass of SFT (or DPO) over the start model's own rollouts has little to teach: the embedded
team's rows are replies the model already gives, and one pass hardly moves it. Iterating is what makes SFT learn: each
round plays ``rollout_problems`` *fresh* training problems x ``rollout_samples`` with the latest
model, trains on what that play gave, and hands the result to the next round: expert iteration
(rejection-sampling fine-tuning, as in STaR and ReST-EM, continued from the latest model rather
than restarted). A DPO round cuts its pairs from its own play and uses the round's start model
as the reference (iterative DPO; with the default ``sft`` term on the chosen replies, iterative
RPO, Pang et al. 2024). On the embedded team more than one DPO round broke the refiner, so
``dpo`` plays one by default, after SFT rounds (``--sft_first``, on by default).

**Stages.** A run is a list of `Stage`: SFT rounds, then DPO rounds (``dpo``), or one kind
only (``sft``; ``dpo --sft_first false``). Rounds are numbered across stages and each plays fresh problems.

**Budget.** ``--max_train_minutes`` bounds the rounds, rollouts and validation checks
included: a stage starts another round only while the time since the run began plus its last
round's time (with its check) fits in its share of the budget (``dpo``'s ``sft_budget`` for the
SFT stage, all of it for the last stage), so a run ends inside the budget; a stage's first round
always runs. ``--iterations`` caps a stage's count.

**Selection on validation.** How many rounds the clock allows depends on the machine, and more
rounds are not always better: the same default ``dpo`` fit 7 SFT rounds on one machine and left the
embedded team worse than it started, where on a slower one 5 rounds fit and it gained (docs/results.md,
"SFT -> DPO rounds, chosen on validation"). So
(``--select_on_validation``, on by default) the start model and each round's model are scored on ``--validation_problems`` (100) x
``--validation_samples`` (1) episodes of validation problems by ``--select_metric``
(``maj1@turnK``; any numeric key of `trainers.evaluation.evaluate.evaluate`'s metrics, higher is
better; an unknown key stops the run at the start model's check, listing the keys), with
`evaluate` itself (the evaluation's sampling settings and seed, without its compute-matched
"alone" comparison or intervals; the same seed every check, so checks differ by the model only).
The best-scoring model, the start model included, is kept: a round must beat the best so far to
replace it. A stage stops after ``--patience`` (2) rounds in a row without a better score (0:
never early), and a later stage starts from the best model so far. Each round's record holds
``validation``, ``validation_seconds``, ``improved`` and ``best_round``; the results hold
``selected_round`` (0: the start model) and ``selection`` (where its problems came from, the
start's and the best score, the stages stopped early, the checks' seconds). One printed line per check says where it stands.

Where the validation problems come from: a generated task (``unknown``, ``arithmetic``) has a
validation split sharing no text with train or test (`envs.splits`); the check takes the
evaluation's levels that hold it (and, when ``--eval_split validation`` evaluates on that split,
the problems after the evaluation's). A task without one (a user's JSONL, ``--data_path``; the
hub's gsm8k/math/anli splits) takes the ``--validation_problems`` training problems after the
first ``--train_problems``: rounds play only those first ones (``offset = index x
rollout_problems``, wrapping around them), so no round plays a validation problem. When the
training split holds too few problems for that, or any validation problem's text occurs among
the training or the evaluation problems, selection is off for the run, with one logged line
saying why; it is off too with ``--eval_problems 0`` (no evaluation at all) and under
``accelerate launch`` (several processes). Off, the run keeps the newest round's model, as
before.

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
import dataclasses
import json
import logging
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envs.tasks import PROCEDURAL_TASKS
from trainers.algorithms.sft import good_turn, rollout_episodes
from trainers.evaluation.evaluate import EvalConfig, evaluate, held_levels
from trainers.rollout.records import Episode
from trainers.run.args import RunArguments
from trainers.run.checkpoint import resume_checkpoint_requested, write_json_atomic
from trainers.run.experiment import eval_config, finish_run, start_run, task_problems

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


def metric_of(metrics: dict[str, Any], key: str) -> float:
    """`metrics[key]` when it is a number, else a ValueError listing the numeric keys."""
    numeric = {
        k: v for k, v in metrics.items() if isinstance(v, int | float) and not isinstance(v, bool)
    }
    if key not in numeric:
        raise ValueError(
            f"select_metric {key!r} is not a figure of the validation evaluation; pass one of: "
            + ", ".join(sorted(numeric))
        )
    return float(numeric[key])


@dataclass
class Validation:
    """The check that chooses between a run's rounds: `evaluation` (the validation problems; its
    model is set per check) scored by `metric` (higher is better); a stage stops after
    `patience` rounds in a row without a better score (0 or None: never early)."""

    evaluation: EvalConfig
    metric: str
    patience: int | None
    where: str

    def score(self, model: str) -> tuple[float, float]:
        """`model`'s score and the seconds the check took."""
        began = time.perf_counter()
        results = evaluate(dataclasses.replace(self.evaluation, model=str(model)))
        return metric_of(results["metrics"], self.metric), time.perf_counter() - began

    def signature(self) -> dict[str, Any]:
        """What makes two checks' scores comparable (a resumed run's against its own)."""
        fields = {k: v for k, v in vars(self.evaluation).items() if k != "model"}
        return json.loads(json.dumps({"metric": self.metric, **fields}, default=str))

    def describe(self) -> str:
        e = self.evaluation
        episodes = "episode" if e.samples == 1 else "episodes"
        return f"{self.metric} on {e.num_problems} {self.where} x {e.samples} {episodes}"

    def stops(self, stale: int) -> bool:
        """Whether `stale` rounds in a row without a better score end a stage."""
        return bool(self.patience) and stale >= self.patience


def validation_check(
    env_args: RunArguments, config: Any, start_model: str
) -> tuple[Validation | None, str]:
    """The run's `Validation` (module docstring, "Where the validation problems come from"), or
    None and why selection is off."""
    if not getattr(config, "select_on_validation", False):
        return None, "--select_on_validation false"
    if not env_args.eval_problems:
        return None, "--eval_problems 0 runs no evaluation, the validation check included"
    if getattr(config, "world_size", 1) > 1:
        return None, "the validation check runs in one process (not under accelerate launch)"
    evaluation = eval_config(env_args, start_model, config)
    check, where = _check_config(env_args, config, evaluation)
    if check is None:
        return None, where
    refusal = _not_held_out(env_args, evaluation, check)
    if refusal:
        return None, refusal
    return Validation(check, config.select_metric, config.patience, where), ""


def _check_config(
    env_args: RunArguments, config: Any, evaluation: EvalConfig
) -> tuple[EvalConfig | None, str]:
    """The validation check's evaluation and where its problems come from, or None and why not."""
    size = config.validation_problems
    common = {
        "num_problems": size,
        "samples": config.validation_samples,
        "ks": (1,),
        "compare": False,  # the compute-matched "alone" comparison: not needed to choose
        "intervals": False,
        "save_episodes": None,
        "progress": False,
        "role_models": {},
        "role_adapters_dir": None,
    }
    if env_args.task in PROCEDURAL_TASKS:
        # after the evaluation's own problems when it evaluates on the validation split too
        offset = env_args.eval_problems if evaluation.split == "validation" else 0
        candidates = list(evaluation.difficulty or env_args.difficulty)
        try:
            levels = held_levels(env_args.task, "validation", candidates, offset + size)
        except ValueError as exc:
            return None, f"too few validation problems: {exc} (--validation_problems)"
        check = dataclasses.replace(
            evaluation,
            data_path=env_args.data_path,
            split="validation",
            difficulty=levels,
            offset=offset,
            **common,
        )
        return check, f"validation-split problems (levels {', '.join(map(str, levels))})"
    # the training problems after those the rounds play
    check = dataclasses.replace(
        evaluation,
        data_path=env_args.data_path,
        split="train",
        offset=env_args.train_problems,
        **common,
    )
    return check, f"training problems after the first {env_args.train_problems} (never rolled out)"


def _not_held_out(env_args: RunArguments, evaluation: EvalConfig, check: EvalConfig) -> str:
    """Why the check's problems are not held out (too few, or shared with the evaluation's or
    the rounds' problems), or "" when they are."""
    import envs

    size = check.num_problems
    held = task_problems(check.env_kwargs(), size, check.offset)
    if len(held) < size:
        return (
            f"the training split holds {check.offset + len(held)} problems, fewer than "
            f"--train_problems {env_args.train_problems} + --validation_problems {size}; lower "
            "either to select rounds on validation problems the rounds never play"
        )
    others = {
        "evaluation": task_problems(
            evaluation.env_kwargs(), evaluation.num_problems, evaluation.offset
        )
    }
    if env_args.task not in PROCEDURAL_TASKS:  # generated splits are disjoint by construction
        others["training"] = task_problems(
            env_args.env_kwargs(split="train"), env_args.train_problems
        )
    for name, problems in others.items():
        shared = envs.overlap(held, problems)
        if shared:
            return (
                f"{len(shared)} of the {size} validation problems occur among the {name} "
                f"problems, e.g. {shared[0][:80]!r}"
            )
    return ""


def stale_rounds(records: Sequence[dict[str, Any]], stage: str) -> int:
    """How many of `stage`'s last rounds in a row did not improve the validation score."""
    count = 0
    for record in reversed([r for r in records if r.get("stage") == stage]):
        if record.get("improved", True):
            break
        count += 1
    return count


def resumed_best(
    state: dict[str, Any] | None, validation: Validation | None
) -> dict[str, Any] | None:
    """The best model so far recorded in a resumed run's `state`, when it was scored by the same
    check and its folder is still there; else None (logged when there was one)."""
    if state is None or validation is None:
        return None
    kept = state.get("selection")
    if not kept:
        return None
    best = kept["best"]
    if kept.get("check") != validation.signature():
        logger.warning("the validation check changed since the run began: selecting afresh")
        return None
    if not Path(best["model"], "config.json").is_file():
        logger.warning("the best model so far (%s) is gone: selecting afresh", best["model"])
        return None
    return best


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


def start_selection(
    validation: Validation | None,
    state: dict[str, Any] | None,
    records: Sequence[dict[str, Any]],
    model: str,
    why_not: str = "",
) -> dict[str, Any]:
    """The selection's state: off (``why_not`` says why) without a validation check, else a
    resumed run's (`resumed_best`), else afresh with `model` (the start model, or a resumed
    run's newest) scored as the best so far."""
    if validation is None:
        logger.warning(
            "rounds are not selected on validation problems (%s): final/ is the newest "
            "round's model",
            why_not,
        )
        return {"enabled": False, "reason": why_not}
    best = resumed_best(state, validation)
    if best is not None and state is not None:
        selection = dict(state["selection"])
    else:
        score, seconds = validation.score(model)
        best = {"round": len(records), "model": str(model), "score": score}
        selection = {"start": score, "start_round": len(records), "seconds": seconds}
        who = f"round {len(records)}'s model" if records else "start model"
        print(f"validation check: {validation.describe()}; {who} {score:.3f} ({seconds:.0f} s)")
    selection.setdefault("stopped_early", [])
    selection.update(
        enabled=True,
        metric=validation.metric,
        problems=validation.evaluation.num_problems,
        samples=validation.evaluation.samples,
        where=validation.where,
        patience=validation.patience,
        check=validation.signature(),
        best=best,
    )
    return selection


def train_rounds(
    env_args: RunArguments, config: Any, algo: str, stages: Sequence[Stage]
) -> dict[str, Any]:
    """Evaluate the start, run each stage's rounds of rollout -> update in turn, each scored on
    the validation problems, keep the best model (module docstring) and evaluate it; return
    the figures."""
    out, results = start_run(env_args, config, algo)
    rounds_dir = out / "rounds"
    state, records, history, model = resumed_rounds(config, rounds_dir, results["start_model"])
    budget = 60.0 * env_args.max_train_minutes if env_args.max_train_minutes else None
    began = time.perf_counter()
    validation, why_not = validation_check(env_args, config, results["start_model"])
    selection = start_selection(validation, state, records, model, why_not)
    names = [stage.name for stage in stages]
    for position, stage in enumerate(stages):
        done = [r for r in records if r.get("stage") == stage.name]
        if any(r.get("stage") in names[position + 1 :] for r in records):
            continue  # a resumed run that had moved past this stage
        stale = stale_rounds(records, stage.name) if validation else 0
        if validation is not None and validation.stops(stale):
            continue  # a resumed run that had stopped this stage early
        if validation is not None and not done and str(model) != selection["best"]["model"]:
            model = selection["best"]["model"]
            print(
                f"{stage.name}: starts from the best model so far (round "
                f"{selection['best']['round']})"
            )
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
            if validation is not None:
                stale = select(validation, selection, record, index, stale)
            history.extend(round_history(rows, step, index, stage.name))
            records.append(record)
            done.append(record)
            stops = validation is not None and validation.stops(stale)
            if stops:
                selection["stopped_early"].append(stage.name)
            save_round(rounds_dir, index, records, history, selection if validation else None)
            model = record["model"]
            last = time.perf_counter() - round_began
            logger.info("%s round %d done in %.0f s", stage.name, index, last)
            if stops:
                print(
                    f"{stage.name}: {stale} rounds in a row without a better validation score "
                    f"(--patience {validation.patience}): the stage stops"
                )
                break
    final = keep_final(out, model, validation, selection)
    results["rounds"] = records
    results["selected_round"] = selection["best"]["round"] if validation else len(records)
    results["selection"] = {k: v for k, v in selection.items() if k != "check"}
    results["train_seconds"] = time.perf_counter() - began
    results["train_steps"] = sum(r["steps"] for r in records)
    results["rollout_episodes"] = sum(r["episodes"] for r in records)
    return finish_run(env_args, config, results, final, history)


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


def keep_final(
    out: Path, newest: str, validation: Validation | None, selection: dict[str, Any]
) -> Path:
    """Copy the kept model to ``out/final``: the best on validation, else the newest round's."""
    kept = selection["best"]["model"] if validation is not None else newest
    final = out / "final"
    if final.exists():
        shutil.rmtree(final)
    shutil.copytree(kept, final)
    if validation is not None:
        best = selection["best"]
        who = f"round {best['round']}'s model" if best["round"] else "the start model"
        print(
            f"final/ is {who}: validation {validation.metric} {best['score']:.3f} (start "
            f"{selection['start']:.3f})"
        )
    return final


def select(
    validation: Validation,
    selection: dict[str, Any],
    record: dict[str, Any],
    index: int,
    stale: int,
) -> int:
    """Score round `index`'s model (`record`), note it in `record`, make it `selection`'s best
    when it beats it, print where the run stands; return the rounds in a row without a better
    score."""
    score, seconds = validation.score(record["model"])
    best = selection["best"]
    improved = score > best["score"]
    if improved:
        best = selection["best"] = {"round": index, "model": record["model"], "score": score}
        stale = 0
    else:
        stale += 1
    selection["seconds"] = selection.get("seconds", 0.0) + seconds
    record.update(
        validation=score,
        validation_seconds=round(seconds, 1),
        improved=improved,
        best_round=best["round"],
    )
    if improved:
        note = "the best so far"
    else:
        where = "the start model" if best["round"] == 0 else f"round {best['round']}"
        plural = "" if stale == 1 else "s"
        note = f"best {best['score']:.3f} ({where}); {stale} round{plural} in a row not above it"
    print(
        f"{record['stage']} round {index}: validation {validation.metric} {score:.3f}, {note} "
        f"(check {seconds:.0f} s; round {record['seconds']:.0f} s)"
    )
    return stale


def play_round(
    env_args: RunArguments, config: Any, stage: Stage, model: str, index: int, rounds_dir: Path
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
