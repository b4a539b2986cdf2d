"""Evaluation runs: an env x task x policies on a problem subset (`evaluate`), the team against
the same model alone, and alone with the team's tool where its env names one
(`trainers.evaluation.alone`), when asked. Its markdown report:
`trainers.evaluation.report.tables.markdown_report`."""

from __future__ import annotations

from typing import Any

from agents.roles import RoleMap
from envs.tasks import is_procedural
from trainers.evaluation.alone import alone_side, alone_tool_side, tool_baseline
from trainers.evaluation.compare import TEAM_FIGURES, team_problem_scores
from trainers.evaluation.config import ALONE_ENV, EvalConfig
from trainers.evaluation.metrics import level_of
from trainers.evaluation.oracle import oracle_side, scripted_repair
from trainers.evaluation.play import run_env
from trainers.evaluation.saved import for_model
from trainers.evaluation.splits import level_split_sizes
from trainers.rollout.records import save_episodes


def _config_of(config: EvalConfig | None, overrides: dict[str, Any]) -> EvalConfig:
    """`config` with `overrides` (`EvalConfig.of`'s flat names); without a config, the
    evaluation a model folder carries (``model=``, `trainers.evaluation.saved.for_model`), else
    the defaults."""
    if config is not None:
        return config.replaced(**overrides)
    model = overrides.pop("model", None)
    if model is None:
        return EvalConfig.of(**overrides)
    return for_model(model, **overrides)


def evaluate(
    config: EvalConfig | None = None, policies: RoleMap | None = None, **overrides: Any
) -> dict[str, Any]:
    """Run the evaluation and, when `config.compare`, the same model alone (compute-matched).

    ``evaluate(model="RUN/final")`` replays the evaluation the run that saved that folder made
    after training (`trainers.evaluation.saved.for_model`); other names (`EvalConfig.of`'s) override it or
    `config` (``evaluate(model="RUN/final", samples=4)``).

    Results: ``config``, ``env``, ``metrics`` (the team's `compute_metrics`, with ``ci95``,
    ``levels``, ``tokens_per_episode``), ``per_problem`` (problem id -> the team's ``team/vote``,
    ``team/final``, ``team/first`` and, when compared, the alone ``alone/pass@1``,
    ``alone/maj@k``, ``alone/pass@k``, and ``level``), and when compared ``single_agent`` (the
    alone samples' `compute_metrics`) and ``compare`` (`compare_team_alone` plus ``ks``,
    ``matched_k`` (generations: the team's per episode), ``tokens_k`` (tokens: the first k
    whose alone samples spend the team's tokens per episode; ``tokens_k_capped`` when the
    alone samples ran out first), ``baseline_k`` (the stronger of the two), ``team_generations``
    (the env's maximum; ``team_generations_mean``: what episodes used), ``alone_samples`` per
    problem, ``alone_prompt``, ``tokens_per_episode`` per side, ``alone_tokens_per_sample``,
    ``spent`` (generations and tokens per episode behind ``team/first``, ``team/final`` and
    ``team/vote``) and ``curve`` (the model alone's maj@k and pass@k for k = 1..alone samples,
    at most `ALONE_SAMPLES_MAX`, against generations and tokens: `alone_curve`)).

    A team whose env names a single agent with its tool (its facts' ``alone_with_tool``: math/tool-v0
    names math/code-v0, `trainers.evaluation.alone.tool_baseline`) is also compared with the
    same model alone with that tool, sampled and matched the same way: ``single_agent_tool``
    and ``compare_tool`` (``compare``'s keys, plus ``alone_env``), and ``alone_tool/pass@1``,
    ``alone_tool/maj@k``, ``alone_tool/pass@k`` in ``per_problem``.
    """
    from envs.roles import answer_roles as env_answer_roles
    from trainers.evaluation.policies import build_role_map

    if config is None or overrides:  # a model folder's own evaluation, or flat names
        config = _config_of(config, overrides)
    players = config.players
    policies = policies or build_role_map(
        players.model,
        players.role_models,
        config.generation_args(),
        ensemble=players.ensemble,
        ensemble_size=players.ensemble_size,
        device=players.device,
        role_adapters=players.role_adapters_dir,
        answer_roles=env_answer_roles(config.env_id),
        task=config.task,
    )
    if not isinstance(policies, RoleMap):
        policies = RoleMap(policies)
    metrics, episodes = run_env(config, config.env_id, policies)
    if config.save_episodes:
        save_episodes(config.save_episodes, episodes)
    results: dict[str, Any] = {
        "config": config.as_dict(),
        "env": config.env_id,
        "metrics": metrics,
    }
    team = team_problem_scores(episodes)
    per_problem = {pid: {k: row[k] for k in TEAM_FIGURES} for pid, row in team.items()}
    if config.compare and config.env_id != ALONE_ENV:
        results["single_agent"], results["compare"] = alone_side(
            config, policies, episodes, metrics, team, per_problem
        )
        baseline = tool_baseline(config.env_id, config.protocol.env_kwargs())
        if baseline is not None:
            results["single_agent_tool"], results["compare_tool"] = alone_tool_side(
                config, policies, episodes, metrics, team, per_problem, baseline
            )
    faults = scripted_repair(config) if config.compare else None
    if faults is not None:
        results["oracle"], oracle = oracle_side(config, policies, team, faults)
        for pid, row in oracle.items():
            per_problem.setdefault(pid, {}).update(row)
    for pid, row in per_problem.items():
        level = level_of(pid)
        if level is not None:
            row["level"] = level
    results["per_problem"] = per_problem
    if is_procedural(config.task):
        results["split_sizes"] = level_split_sizes(config.task, config.levels())
    return results
