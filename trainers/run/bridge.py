"""The bridge from a run to its evaluations: the `EvalConfig` of a run's held-out evaluation,
matching its training env (`eval_config`)."""

from __future__ import annotations

from typing import Any

from trainers.evaluation.config import EvalConfig
from trainers.run.args import Job


def eval_config(job: Job, model: str, config: Any) -> EvalConfig:
    """Held-out evaluation matching the training env (its verifier and its own options: rounds,
    rewards, audit and protocol, `Job.env_options`): generated tasks' ``--eval_split``
    (default test), of the training levels that hold enough distinct problems of it
    (``--eval_difficulty`` to choose); ``--eval_data_path`` for a local file.

    `config` is any algorithm's config; its `temperature` and its tokens per turn
    (`max_completion_length`, every algorithm's name) set the sampling, else 1.0 and
    `EvalConfig`'s 96 tokens; ``--eval_temperature`` sets the evaluation's own. It runs where
    training runs (the config's device: a GPU unless ``use_cpu``).
    """
    device = getattr(config, "device", None)
    evaluation = job.eval
    return EvalConfig(
        env_id=job.env_id,
        problems=job.eval_set(),
        model=model,
        samples=evaluation.eval_samples,
        temperature=evaluation.eval_temperature or getattr(config, "temperature", None) or 1.0,
        max_completion_length=getattr(config, "max_completion_length", None)
        or EvalConfig.max_completion_length,
        num_envs=job.rollout.num_envs,
        seed=config.seed,
        device=None if device is None else str(device),
        env_options=job.env_options(),
    )
