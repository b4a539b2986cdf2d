"""Evaluation runs: an env x task x policies on a problem subset, and its markdown report."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.base import GenerationArguments
from agents.roles import RoleMap
from envs.tasks import PROCEDURAL_TASKS
from trainers.embedded import EMBEDDED_TASK, EmbeddedRecipe
from trainers.evaluation.metrics import bootstrap_intervals, compute_metrics
from trainers.rollout.engine import RolloutEngine
from trainers.rollout.records import save_episodes

logger = logging.getLogger(__name__)
HEADLINE = ("accuracy", "pass1@turn1", "maj1@turnK", "pass1@turnK")


@dataclass
class EvalConfig:
    """What to evaluate; see ``scripts/evaluate.py --help`` for each field."""

    env_id: str = "math/reflection-v0"
    task: str = EMBEDDED_TASK
    data_path: str | None = None
    split: str | None = None
    difficulty: Sequence[int] | None = None
    num_problems: int = 200
    offset: int = 0
    model: str | None = None
    role_models: dict[str, str] = field(default_factory=dict)
    role_adapters: str | None = None
    ensemble: str | None = None
    ensemble_size: int = 3
    samples: int = 1
    ks: Sequence[int] = (1,)
    rounds: int | None = None
    num_agents: int | None = None
    temperature: float = 1.0
    greedy: bool = False
    max_new_tokens: int = 96
    num_envs: int = 64
    seed: int = 0
    compare: bool = True
    intervals: bool = True
    save_episodes: Path | None = None
    progress: bool = False
    device: str | None = None

    def env_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"task": self.task}
        if self.data_path:
            kwargs["data_path"] = self.data_path
        if self.task in PROCEDURAL_TASKS:
            # Held out by default: the embedded model was warm-started on the train split.
            kwargs["split"] = self.split or "test"
            levels = list(self.difficulty or EmbeddedRecipe().difficulty)
            kwargs["task_kwargs"] = {"difficulty": levels, "size": self.offset + self.num_problems}
        elif self.split:
            kwargs["split"] = self.split
        if self.rounds is not None:
            kwargs["rounds"] = self.rounds
        if self.num_agents is not None:
            kwargs["num_agents"] = self.num_agents
        return kwargs

    def generation_args(self) -> GenerationArguments:
        return GenerationArguments(
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            do_sample=not self.greedy,
            seed=self.seed,
        )


def run_env(config: EvalConfig, env_id: str, policies: RoleMap) -> tuple[dict[str, Any], list]:
    kwargs = config.env_kwargs()
    if env_id == "math/solve-v0":
        kwargs.pop("rounds", None)
        kwargs.pop("num_agents", None)
    engine = RolloutEngine(
        env_id, policies, kwargs, num_envs=config.num_envs, progress=config.progress
    )
    problems = engine.problem_ids(config.num_problems, config.offset)
    episodes = engine.run(problems, group_size=config.samples, seed=config.seed)
    metrics = compute_metrics(episodes, ks=config.ks)
    tokens = sum(len(t.completion_ids) for e in episodes for t in e.turns)
    metrics["generated_tokens"] = tokens
    if config.intervals:  # 95% percentile bootstrap over problems
        metrics["ci95"] = bootstrap_intervals(episodes, seed=config.seed)
    return metrics, episodes


def evaluate(config: EvalConfig, policies: RoleMap | None = None) -> dict[str, Any]:
    """Run the evaluation (and the single-agent baseline when `config.compare`)."""
    from envs.roles import answer_roles
    from trainers.evaluation.policies import build_role_map

    policies = policies or build_role_map(
        config.model,
        config.role_models,
        config.generation_args(),
        ensemble=config.ensemble,
        ensemble_size=config.ensemble_size,
        device=config.device,
        role_adapters=config.role_adapters,
        answer_roles=answer_roles(config.env_id),
    )
    metrics, episodes = run_env(config, config.env_id, policies)
    if config.save_episodes:
        save_episodes(config.save_episodes, episodes)
    results: dict[str, Any] = {
        "config": _jsonable(config),
        "env": config.env_id,
        "metrics": metrics,
    }
    if config.compare and config.env_id != "math/solve-v0":
        results["single_agent"], _ = run_env(config, "math/solve-v0", policies)
    return results


def _jsonable(config: EvalConfig) -> dict[str, Any]:
    return {
        k: (str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v)
        for k, v in vars(config).items()
    }


def markdown_report(results: dict[str, Any]) -> str:
    """Headline metrics, flips, per-agent table and the single- vs multi-agent comparison."""
    m = results["metrics"]
    lines = [f"## {results['env']}: {m['problems']} problems, {m['episodes']} episodes", ""]
    keys = [k for k in m if k in HEADLINE or k.startswith(("pass@", "flip/", "review/"))]
    lines += ["| metric | value |", "|---|---|"] + [f"| {k} | {m[k]:.3f} |" for k in keys]
    audited = any("false_arithmetic" in a for a in m["agents"].values())
    extra = " false arithmetic |" if audited else ""
    lines += [
        "",
        f"| agent | turns | reward | accuracy | parse errors | tokens/turn |{extra}",
        "|---|---|---|---|---|---|" + ("---|" if audited else ""),
    ]
    for agent, a in m["agents"].items():
        row = (
            f"| {agent} | {a['turns']} | {a['reward']:.3f} | {a['accuracy']:.3f} | "
            f"{a['parse_error']:.3f} | {a['completion_tokens']:.1f} |"
        )
        if audited:
            row += f" {a['false_arithmetic']:.3f} |" if "false_arithmetic" in a else " |"
        lines.append(row)
    single = results.get("single_agent")
    if single:
        lines += [
            "",
            f"| same model, same problems | single agent (solve-v0) | multi-agent ({results['env']}) |",
            "|---|---|---|",
        ]
        for key in HEADLINE:
            lines.append(f"| {key} | {single[key]:.3f} | {m[key]:.3f} |")
    return "\n".join(lines)
