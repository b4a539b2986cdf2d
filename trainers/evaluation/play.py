"""Playing an evaluation: an env (or an engine's) on the config's problems, its episodes
scored (`run_env`)."""

from __future__ import annotations

from typing import Any

from agents.roles import RoleMap
from trainers.evaluation.config import EvalConfig
from trainers.evaluation.metrics import bootstrap_intervals, compute_metrics, level_metrics
from trainers.rollout.engine import RolloutEngine


def run_env(
    config: EvalConfig,
    env_id: str,
    policies: RoleMap,
    group_size: int | None = None,
    engine: RolloutEngine | None = None,
) -> tuple[dict[str, Any], list]:
    """Play `env_id` (or `engine`'s env) on the config's problems, `group_size` (default: the
    config's ``samples``) episodes each; returns its metrics (with ``ci95`` and, for procedural
    tasks, ``levels``) and the episodes."""
    if engine is None:
        engine = RolloutEngine(
            env_id,
            policies,
            config.protocol.env_kwargs(env_id),
            num_envs=config.num_envs,
            progress=config.progress,
        )
    problems = engine.problem_ids(config.problems.count, config.problems.offset)
    episodes = engine.run(problems, group_size=group_size or config.samples, seed=config.seed)
    metrics = compute_metrics(episodes, ks=config.ks)
    tokens = sum(len(t.completion_ids) for e in episodes for t in e.turns)
    metrics["generated_tokens"] = tokens
    metrics["tokens_per_episode"] = tokens / len(episodes)
    levels = level_metrics(episodes)
    if levels:
        metrics["levels"] = levels
    members = level_metrics(episodes, by_member=True)
    if len(members) > 1:  # a mixed task (envs.tasks.mixed): per member too
        metrics["members"] = members
    if config.intervals:  # 95% percentile bootstrap over problems
        metrics["ci95"] = bootstrap_intervals(episodes, seed=config.seed)
    return metrics, episodes
