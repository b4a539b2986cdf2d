"""The bridge from a run to its evaluations: the `EvalConfig` of a run's held-out evaluation,
matching its training env (`eval_config`)."""

from __future__ import annotations

from typing import Any

from trainers.evaluation.config import EvalConfig, Players
from trainers.run.args import Job


def eval_config(job: Job, model: str, config: Any) -> EvalConfig:
    """Held-out evaluation of `model` matching the training env (`Job.eval_protocol`: its
    verifier and its own options, rewards, audit and protocol; the held-out problems; the
    config's tokens per turn and temperature, ``--eval_temperature`` for its own), with
    ``--eval_samples`` episodes a problem, the run's env copies and seed. It runs where
    training runs (the config's device: a GPU unless ``use_cpu``).
    """
    device = getattr(config, "device", None)
    return EvalConfig(
        protocol=job.eval_protocol(config),
        players=Players(model=model, device=None if device is None else str(device)),
        samples=job.eval.eval_samples,
        num_envs=job.rollout.num_envs,
        seed=config.seed,
    )
