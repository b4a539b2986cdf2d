"""The team against the same model alone, problem by problem: per-problem figures
(`team_problem_scores`, `alone_problem_scores` with `maj_at_k`), what the team spent
(`team_spend`), the compute-matched baselines (`tokens_matched_k`, `alone_curve`), paired
intervals (`paired_interval`) and the comparison with its per-level splits
(`compare_team_alone`).

Each figure is first reduced to one number per problem (the mean over that problem's
episodes or samples); means, per-level means and bootstrap intervals are then taken over
problems, and a difference between two evaluations of the same problems (team - alone, after -
before) is resampled problem by problem, both sides together (`paired_interval`).
"""

from __future__ import annotations

import itertools
import math
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from envs.roles import role_of
from envs.tasks.mixed import task_of
from rewards import canonical_answer
from trainers.evaluation.metrics import (
    answer_sequence,
    level_of,
    majority_correct,
    pass_at_k,
)
from trainers.rollout.records import Episode, Turn, answer_roles_of

TEAM_FIGURES = ("team/vote", "team/final", "team/first")


def episode_tokens(episode: Episode) -> int:
    """Tokens generated in the episode (every turn's completion)."""
    return sum(len(t.completion_ids) for t in episode.turns)


def team_problem_scores(episodes: Sequence[Episode]) -> dict[str, dict[str, float]]:
    """Per problem id: the team's vote (``team/vote``: `majority_correct` over its answer turns,
    maj1@turnK), final answer (``team/final``: the last answer turn, `accuracy`) and first answer
    (``team/first``: pass1@turn1), each averaged over the problem's episodes; ``tokens`` and
    ``generations`` per episode. An episode without answer turns counts as wrong."""
    groups: dict[str, list[Episode]] = defaultdict(list)
    for episode in episodes:
        groups[episode.problem_id].append(episode)
    out = {}
    for pid, group in groups.items():
        seqs = [answer_sequence(e) for e in group]
        n = len(group)
        out[pid] = {
            "team/vote": sum(bool(s) and majority_correct(s) for s in seqs) / n,
            "team/final": sum(bool(s) and s[-1][1] for s in seqs) / n,
            "team/first": sum(bool(s) and s[0][1] for s in seqs) / n,
            "tokens": sum(episode_tokens(e) for e in group) / n,
            "generations": sum(len(e.turns) for e in group) / n,
        }
    return out


def first_answer_turns(episode: Episode) -> list[Turn]:
    """The turns an episode spends up to and including its first answer: every turn up to the
    first answer turn (AEC envs), or the whole first round (Parallel envs, whose first answer is
    the team's answer of round 0); empty when no turn states an answer."""
    turns = episode.turns
    if turns and "team_answer" in turns[0].info:
        first_round = min(t.round for t in turns)
        return [t for t in turns if t.round == first_round]
    answering = answer_roles_of(episode)
    for i, turn in enumerate(turns):
        if role_of(turn.agent) in answering:
            return list(turns[: i + 1])
    return []


def team_spend(episodes: Sequence[Episode]) -> dict[str, dict[str, float]]:
    """What the team's figures cost per episode, as generations and tokens: ``team/first`` the
    turns up to its first answer (`first_answer_turns`), ``team/final`` and ``team/vote`` the
    whole episode; ``answer_tokens``: the mean tokens of one answering turn of the first answer
    (what one sample of the model alone costs, about)."""
    if not episodes:
        raise ValueError("team_spend needs at least one episode")
    n = len(episodes)
    firsts = [first_answer_turns(e) for e in episodes]
    whole = {
        "generations": sum(len(e.turns) for e in episodes) / n,
        "tokens": sum(episode_tokens(e) for e in episodes) / n,
    }
    # one answering turn: AEC, the first answer turn; Parallel, any agent's turn of round 0
    answering = [
        t
        for e, turns in zip(episodes, firsts, strict=True)
        for t in (turns if turns and "team_answer" in turns[0].info else turns[-1:])
    ]
    return {
        "team/first": {
            "generations": sum(map(len, firsts)) / n,
            "tokens": sum(len(t.completion_ids) for ts in firsts for t in ts) / n,
        },
        "team/final": dict(whole),
        "team/vote": dict(whole),
        "answer_tokens": {
            "tokens": sum(len(t.completion_ids) for t in answering) / max(len(answering), 1)
        },
    }


def tokens_matched_k(team_tokens: float, alone_tokens: float, samples: int) -> tuple[int, bool]:
    """The smallest k whose k alone samples (`alone_tokens` each) spend at least the team's
    `team_tokens` per episode, and whether it was capped at the `samples` the model alone has:
    ``(k, capped)``. A team that spends nothing matches k = 1; alone samples that spend nothing
    never reach a team that spends some (capped)."""
    if samples < 1:
        raise ValueError(f"tokens_matched_k needs at least one alone sample, got {samples}")
    if team_tokens <= 0:
        return 1, False
    if alone_tokens <= 0:
        return samples, True
    k = max(1, math.ceil(team_tokens / alone_tokens))
    if (k - 1) * alone_tokens >= team_tokens:  # a float ratio just above a whole number
        k -= 1
    return (samples, True) if k > samples else (max(k, 1), False)


def maj_at_k(
    answers: Sequence[tuple[str | None, bool]], k: int, max_subsets: int = 500, seed: int = 0
) -> float:
    """The chance that the majority vote (`majority_correct`) of k of the n independent samples
    `answers` is right: the mean over every k-subset (in sample order), or over `max_subsets`
    random ones when there are more. Both estimate maj@k without bias."""
    n = len(answers)
    if not 1 <= k <= n:
        raise ValueError(f"maj@{k} needs at least {k} samples, got {n}")
    if k == 1:
        return sum(ok for _, ok in answers) / n
    if math.comb(n, k) <= max_subsets:
        subsets: Iterable[tuple[int, ...]] = itertools.combinations(range(n), k)
    else:
        rng = random.Random(seed)
        subsets = (tuple(sorted(rng.sample(range(n), k))) for _ in range(max_subsets))
    # `majority_correct` on each subset, with each answer's key computed once, not per subset
    keys = [canonical_answer(a) if a is not None else "" for a, _ in answers]
    votes = [_subset_vote(keys, answers, subset) for subset in subsets]
    return sum(votes) / len(votes)


def _subset_vote(
    keys: Sequence[str], answers: Sequence[tuple[str | None, bool]], subset: Sequence[int]
) -> bool:
    """`majority_correct` of the answers at `subset`, from their canonical `keys` ("" for none):
    the most common key wins, ties go to the key seen first, and the first answer giving it says
    whether it is right."""
    counts: dict[str, int] = {}
    first: dict[str, int] = {}
    for i in subset:
        if keys[i]:
            counts[keys[i]] = counts.get(keys[i], 0) + 1
            first.setdefault(keys[i], i)
    if not counts:
        return False
    best = max(counts, key=lambda key: counts[key])  # max keeps the first key among equals
    return answers[first[best]][1]


def alone_problem_scores(
    episodes: Sequence[Episode], ks: Sequence[int], seed: int = 0
) -> dict[str, dict[str, float]]:
    """Per problem id, from n independent single-answer samples of the same model alone:
    ``alone/pass@1`` (the mean correctness of a sample), ``alone/maj@k`` for each k in `ks`
    (`maj_at_k`) and ``alone/pass@k`` beside it (unbiased, `pass_at_k`: some sample of k is
    right; pass@k - maj@k is the headroom a better vote could reach), and ``tokens`` (per
    sample)."""
    groups: dict[str, list[Episode]] = defaultdict(list)
    for episode in episodes:
        groups[episode.problem_id].append(episode)
    out = {}
    for pid, group in groups.items():
        answers = [(s[-1] if s else (None, False)) for s in map(answer_sequence, group)]
        right = sum(ok for _, ok in answers)
        row = {"alone/pass@1": right / len(answers)}
        for k in ks:
            if k <= len(answers):
                row[f"alone/maj@{k}"] = maj_at_k(answers, k, seed=seed)
                row.setdefault(f"alone/pass@{k}", pass_at_k(len(answers), right, k))
        row["tokens"] = sum(episode_tokens(e) for e in group) / len(group)
        out[pid] = row
    return out


def alone_curve(
    scores: Mapping[str, Mapping[str, float]], samples: int, tokens_per_sample: float
) -> dict[str, list[float]]:
    """Accuracy against compute for the model alone, from `alone_problem_scores` computed for
    k = 1..`samples`: per k, the mean over problems of ``alone/maj@k`` and ``alone/pass@k``, and
    what k samples spend per problem (``generations`` k, ``tokens`` k x `tokens_per_sample`).
    A k that some problem lacks ends the curve."""
    out: dict[str, list[float]] = {
        "k": [],
        "alone/maj": [],
        "alone/pass": [],
        "generations": [],
        "tokens": [],
    }
    for k in range(1, samples + 1):
        maj = figure_of(scores, f"alone/maj@{k}")
        if not maj or len(maj) < len(scores):
            break
        pas = figure_of(scores, f"alone/pass@{k}")
        out["k"].append(k)
        out["alone/maj"].append(sum(maj.values()) / len(maj))
        out["alone/pass"].append(sum(pas.values()) / len(pas))
        out["generations"].append(float(k))
        out["tokens"].append(k * tokens_per_sample)
    return out


def _percentiles(draws: Any, level: float) -> list[float]:
    values = sorted(float(v) for v in draws)
    tail = (1 - level) / 2
    return [values[int(tail * (len(values) - 1))], values[round((1 - tail) * (len(values) - 1))]]


def mean_interval(
    values: Sequence[float], resamples: int = 1000, level: float = 0.95, seed: int = 0
) -> list[float]:
    """Percentile bootstrap interval of the mean of `values` (one per problem)."""
    import numpy as np

    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("mean_interval needs at least one value")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, data.size, size=(resamples, data.size))
    return _percentiles(data[idx].mean(axis=1), level)


def paired_interval(
    a: Mapping[str, float],
    b: Mapping[str, float],
    resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """``a - b`` over the problems both map (problem id -> figure), with a paired percentile
    bootstrap interval: each resample draws problems, and a drawn problem brings both its values.
    Returns ``{"diff": mean difference, "ci95": [lo, hi], "problems": n}``."""
    common = sorted(set(a) & set(b))
    if not common:
        raise ValueError("paired_interval needs problems that both sides evaluated")
    diffs = [a[p] - b[p] for p in common]
    return {
        "diff": sum(diffs) / len(diffs),
        "ci95": mean_interval(diffs, resamples, level, seed),
        "problems": len(common),
    }


def figure_of(scores: Mapping[str, Mapping[str, float]], name: str) -> dict[str, float]:
    """Problem id -> figure `name`, for the problems that have it."""
    return {pid: row[name] for pid, row in scores.items() if name in row}


def compare_team_alone(
    team: Mapping[str, Mapping[str, float]],
    alone: Mapping[str, Mapping[str, float]],
    ks: Sequence[int],
    matched_k: int,
    resamples: int = 1000,
    seed: int = 0,
    tokens_k: int | None = None,
) -> dict[str, Any]:
    """The team against the same model alone on the same problems (`team_problem_scores`,
    `alone_problem_scores`):

    - ``figures``: the mean over problems of ``team/vote``, ``team/final``, ``team/first``,
      ``alone/pass@1`` and, for each k in `ks`, ``alone/maj@k`` and ``alone/pass@k`` (k > 1);
      ``ci95``: their bootstrap intervals;
    - ``paired``: ``"team/vote - alone/maj@k"`` and ``"team/final - alone/maj@k"`` for each k,
      each ``{"diff", "ci95", "problems"}`` (`paired_interval`);
    - ``headroom``: ``"alone/pass@k - alone/maj@k"`` for each k > 1, paired the same way: what
      a perfect vote over the same k samples would add;
    - ``levels``: per problem level (procedural tasks), the figures, the headroom and the two
      matched differences (``... - alone/maj@<matched_k>``, and ``@<tokens_k>`` when given) with
      their paired intervals, and ``problems``;
    - ``baseline_k``: the stronger compute-matched baseline, the k of `matched_k` (generations)
      and `tokens_k` (tokens) whose ``alone/maj@k`` is higher (ties: `matched_k`), which a team
      has to beat.
    """
    names = [*TEAM_FIGURES, "alone/pass@1"]
    for k in ks:
        names += [f"alone/maj@{k}"] + ([f"alone/pass@{k}"] if k > 1 else [])
    scores = {n: figure_of(team if n.startswith("team/") else alone, n) for n in names}
    names = [n for n in names if scores[n]]
    figures = {n: sum(scores[n].values()) / len(scores[n]) for n in names}
    ci95 = {n: mean_interval(list(scores[n].values()), resamples, seed=seed) for n in names}

    def pair(mine: str, other: str, pids: Iterable[str] | None = None) -> dict[str, Any]:
        keep = set(scores[mine]) & set(scores[other]) if pids is None else set(pids)
        a = {p: scores[mine][p] for p in keep if p in scores[mine]}
        b = {p: scores[other][p] for p in keep if p in scores[other]}
        return paired_interval(a, b, resamples, seed=seed)

    paired, headroom = _paired_rows(ks, scores, pair)
    matched = [k for k in dict.fromkeys((matched_k, tokens_k)) if k is not None]
    matched = [k for k in matched if scores.get(f"alone/maj@{k}")]
    baseline = max(matched, key=lambda k: figures[f"alone/maj@{k}"], default=matched_k)
    ids = sorted(set(team) & set(alone))
    mixed = len({task_of(pid) for pid in ids}) > 1  # a mixed task's problems (envs.tasks.mixed)
    levels = _level_rows(ids, scores, names, matched, headroom, pair, mixed)
    out = {
        "figures": figures,
        "ci95": ci95,
        "paired": paired,
        "headroom": headroom,
        "levels": levels,
        "baseline_k": baseline,
    }
    if mixed:  # per member task, the same rows as per level
        out["members"] = _level_rows(ids, scores, names, matched, headroom, pair, by_member=True)
    return out


def _paired_rows(
    ks: Sequence[int],
    scores: Mapping[str, Mapping[str, float]],
    pair: Callable[..., dict[str, Any]],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """`compare_team_alone`'s ``paired`` (the team's vote and final answer against
    ``alone/maj@k``) and ``headroom`` (``alone/pass@k`` against ``alone/maj@k``) for each k of
    `ks` the model alone has, each `pair`ed over the problems both sides have."""
    paired, headroom = {}, {}
    for k in ks:
        other = f"alone/maj@{k}"
        if not scores.get(other):
            continue
        for mine in ("team/vote", "team/final"):
            paired[f"{mine} - {other}"] = pair(mine, other)
        if scores.get(f"alone/pass@{k}"):
            headroom[f"alone/pass@{k} - {other}"] = pair(f"alone/pass@{k}", other)
    return paired, headroom


def _level_rows(
    ids: Sequence[str],
    scores: Mapping[str, Mapping[str, float]],
    names: Sequence[str],
    matched: Sequence[int],
    headroom: Mapping[str, Any],
    pair: Callable[..., dict[str, Any]],
    mixed: bool = False,
    by_member: bool = False,
) -> dict[str, dict[str, Any]]:
    """`compare_team_alone`'s ``levels``: per level of the problems `ids`, the figures `names`
    (their means over the level's problems), the matched differences and the headroom, each
    `pair`ed over the level's problems; empty when a problem has no level. A `mixed` task's
    levels are its members' (``"reach 2"``); `by_member`: per member task instead."""
    levels: dict[str, dict[str, Any]] = {}
    by_level: dict[tuple[str, int], list[str]] = defaultdict(list)
    for pid in ids:
        level = level_of(pid)
        if by_member:
            by_level[(task_of(pid), 0)].append(pid)
        elif level is not None:
            by_level[(task_of(pid) if mixed else "", level)].append(pid)
    if by_level and sum(map(len, by_level.values())) == len(ids):
        for (member, level), pids in sorted(by_level.items()):
            row: dict[str, Any] = {"problems": len(pids)}
            for n in names:
                have = [scores[n][p] for p in pids if p in scores[n]]
                if have:
                    row[n] = sum(have) / len(have)
            for k in matched:
                for mine in ("team/vote", "team/final"):
                    row[f"{mine} - alone/maj@{k}"] = pair(mine, f"alone/maj@{k}", pids)
            for name in headroom:
                row[name] = pair(*name.split(" - "), pids)
            levels[member if by_member else f"{member} {level}".strip()] = row
    return levels
