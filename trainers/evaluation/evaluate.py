"""Evaluation runs: an env x task x policies on a problem subset, and its markdown report."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pettingzoo import ParallelEnv
from pettingzoo.utils import wrappers

import envs as envs_pkg
from agents.base import GenerationArguments
from agents.roles import RoleMap
from envs.arithmetic import split_sizes
from envs.roles import answer_roles, role_of
from envs.solve import SolveEnv
from envs.tasks import PROCEDURAL_TASKS
from trainers.embedded import EMBEDDED_TASK, embedded_levels
from trainers.evaluation.metrics import (
    TEAM_FIGURES,
    alone_curve,
    alone_problem_scores,
    bootstrap_intervals,
    compare_team_alone,
    compute_metrics,
    level_metrics,
    level_of,
    team_problem_scores,
    team_spend,
    tokens_matched_k,
)
from trainers.evaluation.report import verification_report
from trainers.rollout.engine import RolloutEngine
from trainers.rollout.records import save_episodes

logger = logging.getLogger(__name__)
HEADLINE = ("accuracy", "pass1@turn1", "maj1@turnK", "pass1@turnK")
ALONE_ENV = "math/solve-v0"
# The most alone samples per problem drawn to reach the team's tokens (`alone_samples`); more
# only where the alone ks ask for them.
ALONE_SAMPLES_MAX = 10
# How reports name the figures (`trainers.evaluation.metrics.compare_team_alone`).
LABELS = {
    "team/vote": "team: majority vote (maj1@turnK)",
    "team/final": "team: final answer",
    "team/first": "team: first answer (pass1@turn1)",
    "alone/pass@1": "alone: pass@1 (mean of its samples)",
}


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
    role_adapters_dir: str | None = None  # one LoRA adapter per role: <dir>/<role>/
    ensemble: str | None = None
    ensemble_size: int = 3
    samples: int = 1
    ks: Sequence[int] = (1,)
    rounds: int | None = None
    num_agents: int | None = None
    temperature: float = 1.0
    greedy: bool = False
    max_completion_length: int = 96  # tokens per turn, the training configs' name
    num_envs: int = 64
    seed: int = 0
    compare: bool = True
    # The same model alone gets k independent samples per problem for each k here (mean pass@1
    # and maj@k); None: 1, 3 and the team's generations per episode (`team_generations`).
    alone_ks: Sequence[int] | None = None
    intervals: bool = True
    save_episodes: Path | None = None
    progress: bool = False
    device: str | None = None
    # The team env's own kwargs beyond the task (``{"refiner_mode": "resolve", "verifier":
    # "math"}``): the same env the run trained, played as it trained. The model alone plays
    # solve-v0 with the same ``verifier``.
    env_options: dict[str, Any] = field(default_factory=dict)

    def env_kwargs(self) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"task": self.task}
        if self.data_path:
            kwargs["data_path"] = self.data_path
        if self.task in PROCEDURAL_TASKS:
            # Held out by construction (`envs.splits`): the test split, distinct texts.
            kwargs["split"] = self.split or "test"
            kwargs["task_kwargs"] = {
                "difficulty": self.levels(),
                "size": self.offset + self.num_problems,
            }
        elif self.split:
            kwargs["split"] = self.split
        if self.rounds is not None:
            kwargs["rounds"] = self.rounds
        if self.num_agents is not None:
            kwargs["num_agents"] = self.num_agents
        return {**kwargs, **self.env_options}

    def __post_init__(self) -> None:
        if self.task in PROCEDURAL_TASKS and not self.difficulty:
            self.difficulty = self.levels()

    def levels(self, candidates: Sequence[int] | None = None) -> list[int]:
        """The levels of a generated task to evaluate: `difficulty` as given, else those of
        `candidates` (default: the embedded recipe's) that hold their share of the problems as
        distinct texts of the split (`held_levels`)."""
        if self.difficulty:
            return list(self.difficulty)
        return held_levels(
            self.task,
            self.split or "test",
            list(candidates or embedded_levels(self.task)),
            self.offset + self.num_problems,
        )

    def generation_args(self) -> GenerationArguments:
        return GenerationArguments(
            max_new_tokens=self.max_completion_length,
            temperature=self.temperature,
            do_sample=not self.greedy,
            seed=self.seed,
        )


def held_levels(task: str, split: str, levels: list[int], size: int) -> list[int]:
    """The `levels` of a generated task that hold their share of `size` distinct problems of
    `split` (`envs.tasks.levels_holding`), each dropped one logged: ``unknown`` level 1 holds 48
    test problems, fewer than a third of 200, so the default evaluation is levels 2 and 3."""
    from envs.tasks import levels_holding

    kept, dropped = levels_holding(task, split, levels, size)
    for level, held in dropped.items():
        logger.warning(
            "%s level %d left out of the evaluation: it holds %d distinct %s problems, fewer "
            "than its share of %d problems over levels %s (choose levels with difficulty)",
            task,
            level,
            held,
            split,
            size,
            levels,
        )
    return kept


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
            env_kwargs_for(config, env_id),
            num_envs=config.num_envs,
            progress=config.progress,
        )
    problems = engine.problem_ids(config.num_problems, config.offset)
    episodes = engine.run(problems, group_size=group_size or config.samples, seed=config.seed)
    metrics = compute_metrics(episodes, ks=config.ks)
    tokens = sum(len(t.completion_ids) for e in episodes for t in e.turns)
    metrics["generated_tokens"] = tokens
    metrics["tokens_per_episode"] = tokens / len(episodes)
    levels = level_metrics(episodes)
    if levels:
        metrics["levels"] = levels
    if config.intervals:  # 95% percentile bootstrap over problems
        metrics["ci95"] = bootstrap_intervals(episodes, seed=config.seed)
    return metrics, episodes


def env_kwargs_for(config: EvalConfig, env_id: str) -> dict[str, Any]:
    """The config's env kwargs, less those `env_id` does not take (solve-v0: rounds, agents)."""
    kwargs = config.env_kwargs()
    if env_id == ALONE_ENV:
        kwargs.pop("rounds", None)
        kwargs.pop("num_agents", None)
        for key in config.env_options:
            if key != "verifier":  # the team env's own options
                kwargs.pop(key, None)
    return kwargs


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
    team_kwargs = config.env_kwargs()
    team = envs_pkg.make(config.env_id, **team_kwargs)
    solo = envs_pkg.make(ALONE_ENV, **env_kwargs_for(config, ALONE_ENV))
    pid = solo.unwrapped.task.source[config.offset]["id"]
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
        engine = RolloutEngine(ALONE_ENV, player, env_kwargs_for(config, ALONE_ENV), **kw)
    else:
        engine = _FirstTurnEngine(config.env_id, team_kwargs, player, **kw)
    return engine, {"prompt": prompt, "agent": agent, "generations": team_generations(team)}


def evaluate(config: EvalConfig, policies: RoleMap | None = None) -> dict[str, Any]:
    """Run the evaluation and, when `config.compare`, the same model alone (compute-matched).

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
    """
    from envs.roles import answer_roles as env_answer_roles
    from trainers.evaluation.policies import build_role_map

    policies = policies or build_role_map(
        config.model,
        config.role_models,
        config.generation_args(),
        ensemble=config.ensemble,
        ensemble_size=config.ensemble_size,
        device=config.device,
        role_adapters=config.role_adapters_dir,
        answer_roles=env_answer_roles(config.env_id),
    )
    if not isinstance(policies, RoleMap):
        policies = RoleMap(policies)
    metrics, episodes = run_env(config, config.env_id, policies)
    if config.save_episodes:
        save_episodes(config.save_episodes, episodes)
    results: dict[str, Any] = {
        "config": _jsonable(config),
        "env": config.env_id,
        "metrics": metrics,
    }
    team = team_problem_scores(episodes)
    per_problem = {pid: {k: row[k] for k in TEAM_FIGURES} for pid, row in team.items()}
    if config.compare and config.env_id != ALONE_ENV:
        results["single_agent"], results["compare"] = _alone_side(
            config, policies, episodes, metrics, team, per_problem
        )
    for pid, row in per_problem.items():
        level = level_of(pid)
        if level is not None:
            row["level"] = level
    results["per_problem"] = per_problem
    if config.task in PROCEDURAL_TASKS:
        results["split_sizes"] = level_split_sizes(config.task, list(config.difficulty or []))
    return results


def _alone_side(
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
    generations = about["generations"]
    ks = alone_ks(config, generations)
    spend = team_spend(episodes)
    team_tokens = metrics["tokens_per_episode"]
    samples = alone_samples(ks, config.samples, team_tokens, spend["answer_tokens"]["tokens"])
    single, alone_episodes = run_env(config, ALONE_ENV, policies, group_size=samples, engine=engine)
    per_sample = single["tokens_per_episode"]
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
    matched = generations if generations in ks else max(ks)  # of the ks asked for
    ks = sorted({*ks, tokens_k})
    curve_ks = range(1, min(samples, ALONE_SAMPLES_MAX) + 1)
    scored = alone_problem_scores(alone_episodes, sorted({*ks, *curve_ks}), seed=config.seed)
    wanted = {"alone/pass@1", *(f"alone/{m}@{k}" for k in ks for m in ("maj", "pass"))}
    alone = {
        pid: {k: v for k, v in row.items() if k in wanted or k == "tokens"}
        for pid, row in scored.items()
    }
    for pid, row in alone.items():
        per_problem.setdefault(pid, {}).update(
            {k: v for k, v in row.items() if k.startswith("alone/")}
        )
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
    return single, compare


def level_split_sizes(task: str, levels: list[int], draws: int = 150_000) -> dict[str, Any]:
    """For each level of a generated task, how many distinct problems each split holds
    (`envs.arithmetic.split_sizes`; ``exact`` False: lower bounds, the level is bigger)."""
    import envs

    out: dict[str, Any] = {}
    for level in dict.fromkeys(levels):
        source = envs.make_task(task, size=1, difficulty=level).source
        counts, exact = split_sizes(source.generate, source.name, level, draws=draws)
        out[str(level)] = {**counts, "exact": exact}
    return out


def split_size_report(sizes: dict[str, Any]) -> list[str]:
    """The per-level split sizes as a markdown table (">= n" where a count is a lower bound)."""
    if not sizes:
        return []
    lines = ["| level | train | validation | test |", "|---|---|---|---|"]
    for level, row in sizes.items():
        mark = "" if row["exact"] else ">= "
        lines.append(
            f"| {level} |"
            + "".join(f" {mark}{row[s]:,} |" for s in ("train", "validation", "test"))
        )
    return ["Distinct problems per split (a problem's split is a hash of its text):", "", *lines]


def _jsonable(config: EvalConfig) -> dict[str, Any]:
    return {
        k: (str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v)
        for k, v in vars(config).items()
    }


def _ci(value: float, ci: list[float] | None, signed: bool = False) -> str:
    fmt = "{:+.3f}" if signed else "{:.3f}"
    text = fmt.format(value)
    return f"{text} [{fmt.format(ci[0])}, {fmt.format(ci[1])}]" if ci else text


def label(name: str) -> str:
    """How reports name a figure of `compare_team_alone` (``alone/maj@5`` -> "alone: maj@5")."""
    if name in LABELS:
        return LABELS[name]
    if " - " in name:
        return " - ".join(label(part).split(" (")[0] for part in name.split(" - "))
    return name.replace("/", ": ", 1)


def matched_tags(compare: dict[str, Any]) -> dict[int, str]:
    """What each compute-matched k of a comparison is: ``{5: "matched", 7: "tokens-matched,
    baseline"}``; the baseline is named only where the two differ (`compare_team_alone`)."""
    matched, tokens_k = compare["matched_k"], compare.get("tokens_k")
    tags: dict[int, list[str]] = {matched: ["matched"]}
    if tokens_k is not None:
        tags.setdefault(tokens_k, []).append("tokens-matched")
        baseline = compare.get("baseline_k", matched)
        if tokens_k != matched and baseline in tags:
            tags[baseline].append("baseline")
    return {k: ", ".join(v) for k, v in tags.items()}


def _k_of(name: str) -> int | None:
    """The k of a figure or difference named ``...@k``, else None."""
    k = name.rsplit("@", 1)[-1]
    return int(k) if k.isdigit() else None


def _tag(name: str, tags: dict[int, str]) -> str:
    """The compute-matched tag of a figure or difference named ``...@k`` (or "")."""
    k = _k_of(name)
    return "" if k is None else tags.get(k, "")


def _matching(c: dict[str, Any]) -> str:
    """How the comparison matches compute, as a sentence."""
    matched = c["matched_k"]
    text = f"Compute-matched: k = {matched} in generations" + (
        "" if matched == c["team_generations"] else " (the nearest k asked for)"
    )
    if "tokens_k" in c:
        per_sample = c.get("alone_tokens_per_sample", 0.0)
        team = c.get("tokens_per_episode", {}).get("team", 0.0)
        text += (
            f", k = {c['tokens_k']} in tokens (the team {team:.1f} tokens per episode, alone "
            f"{per_sample:.1f} per sample"
            + (
                f"; capped at the {c['alone_samples']} alone samples"
                if c["tokens_k_capped"]
                else ""
            )
            + f"); the baseline to beat: k = {c.get('baseline_k', matched)}, the stronger"
        )
    return text + "."


def comparison_report(results: dict[str, Any]) -> list[str]:
    """The team against the same model alone: the paired differences first (compute-matched in
    generations and in tokens on top), then the figures with tokens per episode, each with
    per-level columns on procedural tasks."""
    c = results.get("compare")
    if not c:
        return []
    levels = list(c.get("levels", {}))
    level_head = "".join(f" level {lv} |" for lv in levels)
    level_rule = "---|" * len(levels)
    tags = matched_tags(c)
    intro = (
        f"Same model, same problems: the team ({results['env']}, at most "
        f"{c['team_generations']} generations per episode, {c['team_generations_mean']:.2f} "
        f"used) against the model alone with k independent samples (prompt: {c['alone_prompt']}; "
        f"{c['alone_samples']} samples per problem), same temperature and token cap. "
        + _matching(c)
        + " 95% intervals: bootstrap over problems, differences paired by problem."
    )
    lines = [
        intro,
        "",
        f"| team - alone (paired by problem) | all |{level_head}",
        f"|---|---|{level_rule}",
    ]
    names = list(c["paired"])  # by k, the vote before the final answer
    rank = {k: i for i, k in enumerate(tags)}  # the compute-matched ks first
    ordered = sorted(names, key=lambda n: (rank.get(_k_of(n), len(rank)), names.index(n)))
    for name in ordered:
        d = c["paired"][name]
        tag = f" ({_tag(name, tags)})" if _tag(name, tags) else ""
        row = f"| {label(name)}{tag} | {_ci(d['diff'], d['ci95'], signed=True)} |"
        for lv in levels:
            cell = c["levels"][lv].get(name)
            row += f" {_ci(cell['diff'], cell['ci95'], signed=True)} |" if cell else " |"
        lines.append(row)
    tokens = c.get("tokens_per_episode", {})
    lines += [
        "",
        f"| figure | all |{level_head} tokens/episode |",
        f"|---|---|{level_rule}---|",
    ]
    for name, value in c["figures"].items():
        if name.startswith("alone/pass@") and name != "alone/pass@1":
            continue  # in the verification table, as the headroom over maj@k
        row = f"| {label(name)} | {_ci(value, c['ci95'].get(name))} |"
        for lv in levels:
            cell = c["levels"][lv].get(name)
            row += f" {cell:.3f} |" if cell is not None else " |"
        if name.startswith("team/"):  # the first answer spent the turns up to it
            tok = c.get("spent", {}).get(name, {}).get("tokens", tokens.get("team"))
        elif name.startswith("alone/maj@"):
            tok = tokens.get(f"alone@{name.rsplit('@', 1)[1]}")
        else:
            tok = tokens.get("alone@1")
        lines.append(row + (f" {tok:.1f} |" if tok is not None else " |"))
    if levels:
        counts = ", ".join(f"level {lv}: {c['levels'][lv]['problems']}" for lv in levels)
        lines += ["", f"Problems per level: {counts}."]
    return [*lines, ""]


def markdown_report(results: dict[str, Any]) -> str:
    """The team against the same model alone (compute-matched, paired) first, then the
    verification gap per level (`trainers.evaluation.report.verification_report`), then the
    team's metrics, flips and per-agent table."""
    m = results["metrics"]
    lines = [f"## {results['env']}: {m['problems']} problems, {m['episodes']} episodes", ""]
    lines += comparison_report(results)
    lines += verification_report(results)
    sizes = split_size_report(results.get("split_sizes", {}))
    lines += sizes + ([""] if sizes else [])
    # the review figures are in the verification table; the rest of the team's metrics here
    keys = [k for k in m if k in HEADLINE or k.startswith(("pass@", "flip/"))]
    names = {"accuracy": "final answer (accuracy)"}
    lines += ["| metric | value |", "|---|---|"]
    lines += [f"| {names.get(k, k)} | {m[k]:.3f} |" for k in keys]
    if m.get("levels") and not results.get("compare"):
        levels = m["levels"]
        lines += [
            "",
            "| metric |" + "".join(f" level {lv} |" for lv in levels),
            "|---|" + "---|" * len(levels),
        ]
        for key in ("maj1@turnK", "accuracy", "pass1@turn1"):
            row = f"| {names.get(key, key)} |"
            lines.append(row + "".join(f" {levels[lv].get(key, 0.0):.3f} |" for lv in levels))
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
    return "\n".join(lines)
