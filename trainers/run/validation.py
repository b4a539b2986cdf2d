"""The validation check that chooses between the rounds of an SFT or DPO run
(`trainers.algorithms.round_selection`): `validation_check` builds it from the run's arguments,
`Validation` scores a model with `trainers.evaluation.evaluate.evaluate`.

Where the validation problems come from: a generated task (``unknown``, ``arithmetic``) has a
validation split sharing no text with train or test (`envs.tasks.splits`); the check takes the
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
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from typing import Any

from envs.tasks import is_procedural
from envs.tasks.problems import ProblemSet
from trainers.evaluation.config import EvalConfig
from trainers.evaluation.evaluate import evaluate
from trainers.evaluation.splits import describe_levels
from trainers.run.args import Job
from trainers.run.bridge import eval_config


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
        results = evaluate(self.evaluation.replaced(model=str(model)))
        return metric_of(results["metrics"], self.metric), time.perf_counter() - began

    def signature(self) -> dict[str, Any]:
        """What makes two checks' scores comparable (a resumed run's against its own)."""
        fields = {k: v for k, v in vars(self.evaluation).items() if k != "model"}
        return json.loads(json.dumps({"metric": self.metric, **fields}, default=str))

    def describe(self) -> str:
        e = self.evaluation
        episodes = "episode" if e.samples == 1 else "episodes"
        return f"{self.metric} on {e.problems.count} {self.where} x {e.samples} {episodes}"

    def stops(self, stale: int) -> bool:
        """Whether `stale` rounds in a row without a better score end a stage."""
        return bool(self.patience) and stale >= self.patience


def validation_check(job: Job, config: Any, start_model: str) -> tuple[Validation | None, str]:
    """The run's `Validation` (module docstring, "Where the validation problems come from"), or
    None and why selection is off."""
    if not getattr(config, "select_on_validation", False):
        return None, "--select_on_validation false"
    if not job.eval.eval_problems:
        return None, "--eval_problems 0 runs no evaluation, the validation check included"
    if getattr(config, "world_size", 1) > 1:
        return None, "the validation check runs in one process (not under accelerate launch)"
    evaluation = eval_config(job, start_model, config)
    check, where = _check_config(job, config, evaluation)
    if check is None:
        return None, where
    refusal = _not_held_out(job, evaluation, check)
    if refusal:
        return None, refusal
    return Validation(check, config.select_metric, config.patience, where), ""


def _check_config(job: Job, config: Any, evaluation: EvalConfig) -> tuple[EvalConfig | None, str]:
    """The validation check's evaluation and where its problems come from, or None and why not."""
    size = config.validation_problems
    common = {
        "samples": config.validation_samples,
        "ks": (1,),
        "compare": False,  # the compute-matched "alone" comparison: not needed to choose
        "intervals": False,
        "save_episodes": None,
        "progress": False,
        "role_models": {},
        "role_adapters_dir": None,
    }
    if is_procedural(job.env.task):
        # after the evaluation's own problems when it evaluates on the validation split too
        offset = job.eval.eval_problems if evaluation.problems.split == "validation" else 0
        candidates = evaluation.levels() or job.env.levels()
        try:
            problems = ProblemSet(
                job.env.task,
                split="validation",
                count=size,
                offset=offset,
                data_path=job.env.data_path,
                verifier=evaluation.problems.verifier,
            ).evaluated(candidates)
        except ValueError as exc:
            return None, f"too few validation problems: {exc} (--validation_problems)"
        levels = problems.level_list()
        check = evaluation.replaced(problems=problems, **common)
        return check, f"validation-split problems (levels {describe_levels(levels)})"
    # the training problems after those the rounds play
    problems = dataclasses.replace(
        evaluation.problems,
        data_path=job.env.data_path,
        split="train",
        count=size,
        offset=job.train_problems,
    )
    check = evaluation.replaced(problems=problems, **common)
    return check, f"training problems after the first {job.train_problems} (never rolled out)"


def _not_held_out(job: Job, evaluation: EvalConfig, check: EvalConfig) -> str:
    """Why the check's problems are not held out (too few, or shared with the evaluation's or
    the rounds' problems), or "" when they are."""
    import envs

    size = check.problems.count or 0
    held = check.problems.problems()
    if len(held) < size:
        return (
            f"the training split holds {check.problems.offset + len(held)} problems, fewer than "
            f"--train_problems {job.train_problems} + --validation_problems {size}; lower "
            "either to select rounds on validation problems the rounds never play"
        )
    others = {"evaluation": evaluation.problems.problems()}
    if not is_procedural(job.env.task):  # generated splits are disjoint by construction
        others["training"] = job.train_set("train", job.train_problems).problems()
    for name, problems in others.items():
        shared = envs.overlap(held, problems)
        if shared:
            return (
                f"{len(shared)} of the {size} validation problems occur among the {name} "
                f"problems, e.g. {shared[0][:80]!r}"
            )
    return ""
