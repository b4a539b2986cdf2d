"""What every `scripts/train_<env>.py` does: evaluate, train, evaluate again, write the results.

Writes into ``output_dir``: the trained model (``final/``, with what its run played,
``final/mathteams.json``: `trainers.evaluation.saved`, and its model card, ``final/README.md``:
`trainers.run.card`), ``metrics.json`` (before/after
evaluation and the training log), ``curves.png`` (reward and accuracy per agent over steps) and,
where the evaluations compared the team with the model alone, ``compute.png`` (accuracy against
generations and tokens, before and after: `trainers.evaluation.report.plots.plot_compute`).
Files are replaced atomically; ``metrics.json`` is first written with the "before" evaluation,
which a run resumed with ``--resume_from_checkpoint`` reuses (`trainers.algorithms.checkpoint`).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from trainers.algorithms.checkpoint import (
    atomic_path,
    resume_checkpoint_requested,
    write_json_atomic,
)
from trainers.embedded import resolve_model
from trainers.evaluation.config import EvalConfig
from trainers.evaluation.evaluate import evaluate
from trainers.evaluation.held_out import check_held_out
from trainers.evaluation.report.plots import has_curve, plot_compute, plot_curves
from trainers.evaluation.report.summary import summary, summary_table
from trainers.evaluation.report.tables import markdown_report
from trainers.evaluation.saved import SAVED_FILE, saved_data
from trainers.run.args import Job
from trainers.run.bridge import eval_config
from trainers.run.card import write_card

logger = logging.getLogger(__name__)


def is_main(config: Any) -> bool:
    """Whether this is the main process of the run (always, outside ``accelerate launch``)."""
    return config.process_index == 0


def start_run(job: Job, config: Any, algo: str) -> tuple[Path, dict[str, Any]]:
    """Create ``output_dir``, resolve the start model, evaluate it (``results["before"]``).

    Under ``accelerate launch`` only the main process evaluates and writes; every process trains.
    """
    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    start_model = resolve_model(job.model.model_name_or_path, job.env.task)
    results: dict[str, Any] = {"env": job.env_id, "algo": algo, "start_model": start_model}
    # the training env's kwargs (critic_reward, audit...)
    results["env_kwargs"] = job.protocol().env_kwargs()
    results["processes"] = config.world_size
    if not job.eval.eval_problems:
        return out, results
    before = eval_config(job, start_model, config)
    results["held_out"] = check_held_out(job, before)  # every process, before any model
    if is_main(config):
        results["before"] = kept_before(out / "metrics.json", before, config) or evaluate(before)
        print(markdown_report(results["before"]))
        write_json_atomic(out / "metrics.json", results)  # a killed run keeps its "before"
    return out, results


def kept_before(path: Path, before: EvalConfig, config: Any) -> dict[str, Any] | None:
    """A resumed run's earlier "before" evaluation from `path`, if it used the same settings."""
    if resume_checkpoint_requested(config) and path.is_file():
        try:
            kept = json.loads(path.read_text()).get("before")
        except (OSError, ValueError) as exc:
            logger.warning("%s is unreadable (%s): evaluating the start again", path, exc)
            return None
        same = before.as_dict()
        if isinstance(kept, dict) and kept.get("config") == same:
            logger.info("resumed run: reusing the before-evaluation in %s", path)
            return kept
    return None


def after_config(job: Job, config: Any, results: dict[str, Any], final: Path) -> EvalConfig | None:
    """The after-training evaluation of the model saved at `final` (None: ``--eval_problems
    0``): the held-out evaluation of `eval_config`, played by `final`, or by the model RL
    started from with `final`'s adapter or model per role."""
    if not job.eval.eval_problems:
        return None
    after = eval_config(job, str(final), config)
    base = results.get("rl_start_model", results["start_model"])  # RL's start (warmed up?)
    if job.model.role_adapters:  # final/ holds one adapter per role
        return after.replaced(model=base, role_adapters_dir=str(final))
    if job.model.role_models:  # final/ holds one model per role
        roles = sorted(p.parent.name for p in final.glob("*/config.json"))
        return after.replaced(model=base, role_models={r: str(final / r) for r in roles})
    return after


def finish_run(
    job: Job,
    config: Any,
    results: dict[str, Any],
    final: Path,
    log_history: list[dict[str, Any]],
) -> dict[str, Any]:
    """Evaluate the saved model at `final`, write metrics.json and curves.png; return results.

    Call it on every process after ``trainer.save_model(final)``; only the main one evaluates.
    """
    out = Path(config.output_dir)
    results["log_history"] = log_history
    if not is_main(config):
        return results
    after = after_config(job, config, results, final)
    protocol, saved = job.protocol(config=config), final / SAVED_FILE
    write_json_atomic(saved, saved_data(final, protocol, after, results["algo"]))
    if after is not None:
        results["after"] = evaluate(after)
        print(markdown_report(results["after"]))
        results["summary"] = summary(results)
        print(summary_table(results["summary"]))
    written = [final, saved, write_card(final, protocol, results)]
    write_json_atomic(out / "metrics.json", results)
    title = f"{job.env_id} {results['algo']}"
    with atomic_path(out / "curves.png") as tmp:
        plot_curves(log_history, tmp, title, results.get("summary"))
    written += [out / "metrics.json", out / "curves.png"]
    evaluations = {w: results[w] for w in ("before", "after") if has_curve(results.get(w))}
    if evaluations:  # accuracy against compute, team and model alone, before and after
        with atomic_path(out / "compute.png") as tmp:
            plot_compute(evaluations, tmp, title)
        written.append(out / "compute.png")
    print(f"wrote {', '.join(map(str, written))}")
    return results
