"""The same model alone, the team's baseline: the engine it plays (`alone_engine`: solve-v0, or
the team's first answering turn's prompt), how many samples it draws (`alone_samples`: up to the
team's generations and tokens), and the compute-matched comparison with the team
(`alone_side`: matched in generations and in tokens, `tokens_matched_k`; `matched_side`).

A team that uses a tool also meets the same model alone WITH that tool (`alone_tool_side`):
the single-agent env its env class names (its facts' ``alone_with_tool``, `tool_baseline`:
math/tool-v0 -> math/code-v0, one program run in the same sandbox), sampled and compared the
same way."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Sequence
from typing import Any

from pettingzoo import ParallelEnv
from pettingzoo.utils import wrappers

import envs as envs_pkg
from agents.roles import RoleMap
from envs.roles import answer_roles, role_of
from envs.solve import SolveEnv
from trainers.evaluation.compare import (
    TEAM_FIGURES,
    alone_curve,
    alone_problem_scores,
    compare_team_alone,
    team_spend,
    tokens_matched_k,
)
from trainers.evaluation.config import ALONE_ENV, EvalConfig
from trainers.evaluation.play import run_env
from trainers.rollout.engine import RolloutEngine

logger = logging.getLogger(__name__)
# The most alone samples per problem drawn to reach the team's tokens (`alone_samples`); more
# only where the alone ks ask for them.
ALONE_SAMPLES_MAX = 10


def team_generations(env: Any) -> int:
    """Generations one episode of `env` makes at most: its turns (AEC), or its rounds times its
    agents (Parallel: every agent speaks every round). Reflection with K rounds: 1 + 2K."""
    raw = env.unwrapped
    turns = int(raw.max_turns)
    return turns * len(raw.possible_agents) if isinstance(raw, ParallelEnv) else turns


def alone_ks(config: EvalConfig, generations: int) -> list[int]:
    """The ks of the alone baseline: the config's, else 1, 3 and the team's generations."""
    ks = config.alone_ks or (1, 3, generations)
    bad = [k for k in ks if not isinstance(k, int) or k < 1]
    if bad:
        raise ValueError(f"alone_ks must be ints >= 1, got {list(ks)!r}")
    return sorted(set(ks))


def alone_samples(ks: Sequence[int], samples: int, team_tokens: float, answer_tokens: float) -> int:
    """Alone samples per problem: as many generations as the team's for the largest k
    (``max(ks)`` per team episode, `samples` episodes), and at least the k whose samples reach
    the team's tokens per episode, estimated from one answer turn of the team's first answer
    (`answer_tokens`; the model alone plays that turn's prompt), up to `ALONE_SAMPLES_MAX`."""
    by_generations = max(ks) * samples
    if answer_tokens <= 0:
        return by_generations
    by_tokens, _ = tokens_matched_k(team_tokens, answer_tokens, ALONE_SAMPLES_MAX)
    return max(by_generations, by_tokens)


def _first_answer_turn(env: Any, seed: int, problem_id: str) -> tuple[str, dict[str, str]] | None:
    """(agent, observation) of `env`'s first turn on the problem, or None when that turn does
    not state an answer (math/tool-v0: an analyzer plans first)."""
    raw = env.unwrapped
    first = env.reset(seed=seed, options={"problem_id": problem_id})
    if isinstance(raw, ParallelEnv):
        agent = raw.possible_agents[0]
        obs = first[0][agent]
    else:
        agent = env.agent_selection
        obs = env.observe(agent)
    if role_of(agent) not in answer_roles(env):
        return None
    return agent, dict(obs)


class FirstTurnSolveEnv(SolveEnv):
    """`math/solve-v0` (one answer, scored by the task's verifier) whose prompt is the team env's
    first answering turn's: the alone baseline of a team whose first prompt differs from
    solve-v0's (debate, ensemble: their own instructions and prompts)."""

    def __init__(self, team_id: str, team_kwargs: dict[str, Any]) -> None:
        accepted = inspect.signature(SolveEnv.__init__).parameters
        super().__init__(**{k: v for k, v in team_kwargs.items() if k in accepted})
        self.team = envs_pkg.make(team_id, **team_kwargs)
        self._first: dict[str, str] = {}

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        super().reset(seed, options)
        pid = self.problem["id"]
        turn = _first_answer_turn(self.team, 0 if seed is None else seed, pid)
        if turn is None:
            raise ValueError("the team's first turn states no answer")
        self._first = turn[1]

    def observe(self, agent: str) -> dict[str, str]:
        return dict(self._first)


class _FirstTurnEngine(RolloutEngine):
    def __init__(self, team_id: str, team_kwargs: dict[str, Any], policies: RoleMap, **kw: Any):
        self._team = (team_id, dict(team_kwargs))
        super().__init__(ALONE_ENV, policies, {}, **kw)

    def _make_env(self) -> Any:
        return wrappers.OrderEnforcingWrapper(FirstTurnSolveEnv(*self._team))


def alone_engine(config: EvalConfig, policies: RoleMap) -> tuple[RolloutEngine, dict[str, Any]]:
    """The engine of the same model alone, and what it plays: `math/solve-v0` when its prompt and
    instruction equal the team's first answering turn's (reflection's solver), else that turn's
    prompt (`FirstTurnSolveEnv`); when the team's first turn states no answer, solve-v0's.
    It plays with the policy of the team's first answering agent."""
    team_kwargs = config.protocol.env_kwargs()
    team = envs_pkg.make(config.env_id, **team_kwargs)
    solo = envs_pkg.make(ALONE_ENV, **config.protocol.env_kwargs(ALONE_ENV))
    pid = solo.unwrapped.task.source[config.problems.offset]["id"]
    turn = _first_answer_turn(team, config.seed, pid)
    solo.reset(seed=config.seed, options={"problem_id": pid})
    solo_obs = solo.observe("solver_0")
    kw = {"num_envs": config.num_envs, "progress": config.progress}
    if turn is None:
        agent, prompt = "solver_0", f"{ALONE_ENV} (the team's first turn states no answer)"
    else:
        agent, obs = turn
        same = all(obs.get(k) == solo_obs.get(k) for k in ("instruction", "prompt"))
        prompt = ALONE_ENV if same else f"the first turn of {config.env_id} ({agent})"
    player = RoleMap({"*": policies.policy_for(agent)})
    if turn is None or prompt == ALONE_ENV:
        engine = RolloutEngine(ALONE_ENV, player, config.protocol.env_kwargs(ALONE_ENV), **kw)
    else:
        engine = _FirstTurnEngine(config.env_id, team_kwargs, player, **kw)
    return engine, {"prompt": prompt, "agent": agent, "generations": team_generations(team)}


def alone_side(
    config: EvalConfig,
    policies: RoleMap,
    episodes: list,
    metrics: dict[str, Any],
    team: dict[str, dict[str, Any]],
    per_problem: dict[str, dict[str, Any]],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The same model alone, compute-matched with the team's `episodes` in generations and in
    tokens: its `compute_metrics` and the comparison (`evaluate`'s ``single_agent`` and
    ``compare``); each problem's alone figures are added to `per_problem`."""
    engine, about = alone_engine(config, policies)
    single, compare, alone = matched_side(config, engine, about, episodes, metrics, team)
    _add_rows(per_problem, alone, "alone/")
    return single, compare


def tool_baseline(env_id: str, env_kwargs: dict[str, Any] | None = None) -> str | None:
    """The registered id of the single-agent env that plays `env_id`'s answers alone with the
    same tool, as the env's facts name it (`envs.options.EnvFacts.alone_with_tool`: math/tool-v0
    -> math/code-v0), or None when they name none; no env is built."""
    env_spec = envs_pkg.spec(env_id)
    if env_spec.options is None:  # an env without options states no facts: none named
        return None
    baseline = env_spec.facts(**(env_kwargs or {})).alone_with_tool
    return baseline if baseline and baseline != env_id else None


def alone_tool_side(
    config: EvalConfig,
    policies: RoleMap,
    episodes: list,
    metrics: dict[str, Any],
    team: dict[str, dict[str, Any]],
    per_problem: dict[str, dict[str, Any]],
    baseline: str,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The same model alone with the team's tool (`baseline`, e.g. math/code-v0: one program,
    run in the same sandbox), compute-matched with the team's `episodes` as `alone_side` is:
    its `compute_metrics` and the comparison (`evaluate`'s ``single_agent_tool`` and
    ``compare_tool``, ``compare``'s shape, ``alone_env`` naming the env); each problem's
    figures are added to `per_problem` as ``alone_tool/...``. It plays with the policy of the
    team's agent of the same name (the executor)."""
    solo = envs_pkg.make(baseline, **config.protocol.env_kwargs(baseline))
    agent = solo.unwrapped.possible_agents[0]
    solo.close()
    team_env = envs_pkg.make(config.env_id, **config.protocol.env_kwargs())
    about = {"prompt": f"{baseline} ({agent})", "generations": team_generations(team_env)}
    player = RoleMap({"*": policies.policy_for(agent)})
    kw = {"num_envs": config.num_envs, "progress": config.progress}
    engine = RolloutEngine(baseline, player, config.protocol.env_kwargs(baseline), **kw)
    single, compare, alone = matched_side(config, engine, about, episodes, metrics, team)
    _add_rows(per_problem, alone, "alone_tool/")
    return single, {"alone_env": baseline, **compare}


def _add_rows(
    per_problem: dict[str, dict[str, Any]], alone: dict[str, dict[str, Any]], prefix: str
) -> None:
    """Each problem's ``alone/...`` figures into `per_problem`, named ``<prefix>...``."""
    for pid, row in alone.items():
        per_problem.setdefault(pid, {}).update(
            {prefix + k.split("/", 1)[1]: v for k, v in row.items() if k.startswith("alone/")}
        )


def matched_side(
    config: EvalConfig,
    engine: RolloutEngine,
    about: dict[str, Any],
    episodes: list,
    metrics: dict[str, Any],
    team: dict[str, dict[str, Any]],
) -> tuple[dict[str, Any], dict[str, Any], dict[str, dict[str, float]]]:
    """Play `engine`'s single-answer env on the config's problems, sampled to the team's
    generations and tokens per episode (`alone_samples`), and compare it with the team
    (`compare_team_alone`): its metrics, the comparison and each problem's figures.
    `about` holds the ``prompt`` it plays and the team's ``generations`` per episode."""
    generations = about["generations"]
    ks = alone_ks(config, generations)
    spend = team_spend(episodes)
    team_tokens = metrics["tokens_per_episode"]
    samples = alone_samples(ks, config.samples, team_tokens, spend["answer_tokens"]["tokens"])
    single, alone_episodes = run_env(
        config, engine.env_id, engine.policies, group_size=samples, engine=engine
    )
    per_sample = single["tokens_per_episode"]
    tokens_k, capped = tokens_k_of(team_tokens, per_sample, samples)
    matched = generations if generations in ks else max(ks)  # of the ks asked for
    ks = sorted({*ks, tokens_k})
    curve_ks = range(1, min(samples, ALONE_SAMPLES_MAX) + 1)
    scored = alone_problem_scores(alone_episodes, sorted({*ks, *curve_ks}), seed=config.seed)
    wanted = {"alone/pass@1", *(f"alone/{m}@{k}" for k in ks for m in ("maj", "pass"))}
    alone = {
        pid: {k: v for k, v in row.items() if k in wanted or k == "tokens"}
        for pid, row in scored.items()
    }
    compare = {
        "ks": ks,
        "matched_k": matched,
        "tokens_k": tokens_k,
        "tokens_k_capped": capped,
        "team_generations": generations,
        "team_generations_mean": sum(len(e.turns) for e in episodes) / len(episodes),
        "alone_samples": samples,
        "alone_prompt": about["prompt"],
        "tokens_per_episode": {
            "team": team_tokens,
            **{f"alone@{k}": k * per_sample for k in ks},
        },
        "alone_tokens_per_sample": per_sample,
        "spent": {k: v for k, v in spend.items() if k in TEAM_FIGURES},
        "curve": alone_curve(scored, samples, per_sample),
    }
    compare.update(
        compare_team_alone(
            team, alone, ks, matched, resamples=1000, seed=config.seed, tokens_k=tokens_k
        )
    )
    return single, compare, alone


def tokens_k_of(team_tokens: float, per_sample: float, samples: int) -> tuple[int, bool]:
    """The tokens-matched k of the alone samples (`tokens_matched_k`), and whether it is capped
    at their `samples` per problem (logged)."""
    tokens_k, capped = tokens_matched_k(team_tokens, per_sample, samples)
    if capped:
        logger.warning(
            "the model alone reaches the team's %.1f tokens per episode only past its %d "
            "samples per problem (%.1f tokens each): tokens-matched k capped at %d",
            team_tokens,
            samples,
            per_sample,
            samples,
        )
    return tokens_k, capped
