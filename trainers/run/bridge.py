"""The bridge from a run to its evaluations: the `EvalConfig` of a run's held-out evaluation,
matching its training env (`eval_config`)."""

from __future__ import annotations

from typing import Any

from envs.tasks import PROCEDURAL_TASKS
from trainers.evaluation.config import EvalConfig
from trainers.evaluation.splits import held_levels
from trainers.run.args import RunArguments


def eval_config(env_args: RunArguments, model: str, config: Any) -> EvalConfig:
    """Held-out evaluation matching the training env (its verifier, rewards, audit and protocol:
    `RunArguments.env_options`): generated tasks' ``--eval_split``
    (default test), of the training levels that hold enough distinct problems of it
    (``--eval_difficulty`` to choose); ``--eval_data_path`` for a local file.

    `config` is any algorithm's config; its `temperature` and its tokens per turn
    (`max_completion_length`, every algorithm's name) set the sampling, else 1.0 and
    `EvalConfig`'s 96 tokens; ``--eval_temperature`` sets the evaluation's own. It runs where
    training runs (the config's device: a GPU unless ``use_cpu``).
    """
    device = getattr(config, "device", None)
    levels = env_args.eval_difficulty
    if env_args.task in PROCEDURAL_TASKS and not levels:  # the training levels that hold enough
        split = env_args.eval_split or "test"
        levels = held_levels(env_args.task, split, env_args.difficulty, env_args.eval_problems)
    return EvalConfig(
        env_id=env_args.env_id,
        task=env_args.task,
        data_path=env_args.eval_data_path or env_args.data_path,
        split=env_args.eval_split,
        difficulty=levels,
        num_problems=env_args.eval_problems,
        model=model,
        samples=env_args.eval_samples,
        rounds=env_args.rounds,
        num_agents=env_args.num_agents,
        temperature=env_args.eval_temperature or getattr(config, "temperature", None) or 1.0,
        max_completion_length=getattr(config, "max_completion_length", None)
        or EvalConfig.max_completion_length,
        num_envs=env_args.num_envs,
        seed=config.seed,
        device=None if device is None else str(device),
        env_options=env_args.env_options(),
    )
