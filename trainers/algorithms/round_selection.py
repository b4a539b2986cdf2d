"""Choosing between the rounds of a run (`trainers.algorithms.rounds`) on validation problems.

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

The check itself, its problems and its scoring, is the run's (`trainers.run.validation`); the
selection sees it as a `Check`.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

logger = logging.getLogger(__name__)


class Check(Protocol):
    """What the selection asks of the validation check (`trainers.run.validation.Validation`):
    its metric (higher is better), patience and problems (`evaluation`'s ``num_problems`` and
    ``samples``, `where` they come from), and a model's score."""

    metric: str
    patience: int | None
    where: str
    evaluation: Any

    def score(self, model: str) -> tuple[float, float]:
        """`model`'s score and the seconds the check took."""
        ...

    def signature(self) -> dict[str, Any]:
        """What makes two checks' scores comparable (a resumed run's against its own)."""
        ...

    def describe(self) -> str: ...

    def stops(self, stale: int) -> bool:
        """Whether `stale` rounds in a row without a better score end a stage."""
        ...


def stale_rounds(records: Sequence[dict[str, Any]], stage: str) -> int:
    """How many of `stage`'s last rounds in a row did not improve the validation score."""
    count = 0
    for record in reversed([r for r in records if r.get("stage") == stage]):
        if record.get("improved", True):
            break
        count += 1
    return count


def resumed_best(state: dict[str, Any] | None, validation: Check | None) -> dict[str, Any] | None:
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


def start_selection(
    validation: Check | None,
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
        problems=validation.evaluation.problems.count,
        samples=validation.evaluation.samples,
        where=validation.where,
        patience=validation.patience,
        check=validation.signature(),
        best=best,
    )
    return selection


def keep_final(out: Path, newest: str, validation: Check | None, selection: dict[str, Any]) -> Path:
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
    validation: Check,
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
