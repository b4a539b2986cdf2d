"""Evaluation metrics over episodes, the way multi-agent reasoning results are reported.

An episode's *answer turns* are the turns that state an answer: the turns of the roles its env
declares as answering, recorded on the episode (`trainers.rollout.records.answer_roles_of`):
solver and refiner turns of ``reflection``, the one answer of ``solve``; for Parallel envs the
team's answer of each round (``debate``'s majority, ``ensemble``'s vote). Critic turns are judged
separately (per-agent metrics).

- ``accuracy``: the final answer turn is correct (mean over episodes).
- ``pass@k``: unbiased estimator over the G samples of each problem (Chen et al., 2021), on the
  final answer.
- ``pass1@turn1``: the first answer turn is correct.
- ``maj1@turnK``: the majority vote over the K answer turns is correct (ties: the earliest).
- ``pass1@turnK``: any of the K answer turns is correct.
- ``flip/wrong->right@r``, ``flip/right->wrong@r``: among episodes wrong (right) at answer turn r,
  the fraction right (wrong) at turn r + 1.
- ``solver/accuracy``: the first answer turn is correct (pass1@turn1, under the solver's name).
- ``review/...``: how reviews judge (true-positive and true-negative rates, balanced accuracy),
  the verification gap, and what the revision after a review does (`review_metrics`).
- per agent: mean reward, accuracy (the fraction of its turns with ``info["correct"]``), parse
  errors and completion length in tokens.
"""

from __future__ import annotations

import itertools
import math
import random
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from envs.roles import role_of
from rewards import canonical_answer, majority_vote
from trainers.rollout.records import Episode, Turn, answer_roles_of


def answer_sequence(episode: Episode) -> list[tuple[str | None, bool]]:
    """(extracted answer, correct) for each answer turn of the episode, in order."""
    turns = episode.turns
    if turns and "team_answer" in turns[0].info:  # Parallel envs: one team answer per round
        by_round: dict[int, Turn] = {}
        for turn in turns:
            by_round.setdefault(turn.round, turn)
        return [
            (t.info.get("team_answer"), bool(t.info.get("team_correct")))
            for _, t in sorted(by_round.items())
        ]
    answering = answer_roles_of(episode)
    return [
        (t.info.get("extracted"), bool(t.info.get("correct")))
        for t in turns
        if role_of(t.agent) in answering
    ]


def majority_correct(answers: Sequence[tuple[str | None, bool]]) -> bool:
    """Whether the majority answer of the sequence is correct (ties: the earliest)."""
    winner, _ = majority_vote([a for a, _ in answers])
    if winner is None:
        return False
    key = canonical_answer(winner)
    return next(ok for a, ok in answers if a is not None and canonical_answer(a) == key)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct."""
    if n - c < k:
        return 1.0
    return 1.0 - math.prod((n - c - i) / (n - i) for i in range(k))


def compute_metrics(episodes: Sequence[Episode], ks: Sequence[int] = (1,)) -> dict[str, Any]:
    """All metrics of the module docstring, as a flat dict of floats plus ``agents`` and counts."""
    if not episodes:
        raise ValueError("compute_metrics needs at least one episode")
    seqs = [answer_sequence(e) for e in episodes]
    scored = [s for s in seqs if s]
    n = max(len(scored), 1)
    out: dict[str, Any] = {"episodes": len(episodes), "problems": len({e.group for e in episodes})}
    out["accuracy"] = sum(s[-1][1] for s in scored) / n
    out["pass1@turn1"] = sum(s[0][1] for s in scored) / n
    out["solver/accuracy"] = out["pass1@turn1"]
    out["maj1@turnK"] = sum(majority_correct(s) for s in scored) / n
    out["pass1@turnK"] = sum(any(ok for _, ok in s) for s in scored) / n
    out["answer_turns"] = max((len(s) for s in scored), default=0)
    for r in range(out["answer_turns"] - 1):
        pairs = [(s[r][1], s[r + 1][1]) for s in scored if len(s) > r + 1]
        wrong = [b for a, b in pairs if not a]
        right = [b for a, b in pairs if a]
        out[f"flip/wrong->right@{r + 1}"] = sum(wrong) / len(wrong) if wrong else 0.0
        out[f"flip/right->wrong@{r + 1}"] = (len(right) - sum(right)) / len(right) if right else 0.0
    groups: dict[int, list[bool]] = defaultdict(list)
    for episode, seq in zip(episodes, seqs, strict=True):
        groups[episode.group].append(bool(seq) and seq[-1][1])
    for k in ks:
        if all(len(g) >= k for g in groups.values()):
            out[f"pass@{k}"] = sum(pass_at_k(len(g), sum(g), k) for g in groups.values()) / len(
                groups
            )
    out.update(review_metrics(episodes))
    out["agents"] = agent_metrics(episodes)
    return out


def review_metrics(episodes: Sequence[Episode]) -> dict[str, float | None]:
    """How reviews (critic, program verifier) judge, what the model's own check adds, and what
    the revision after a review does. Reviews are the turns whose info has ``reviewed_correct``
    (the truth of the answer under review) and ``verdict`` (True, False, or None: no verdict,
    which is a miss either way and never an acceptance).

    - ``review/tpr``: among right answers under review, the share the review says correct;
      ``review/tnr``: among wrong ones, the share it says incorrect (None without such answers).
    - ``review/balanced_accuracy``: the mean of the two (a class with no answers is left out).
    - ``review/gap``, the verification gap: the accuracy of the first answers that the first
      review accepted minus the accuracy of all first answers (``solver/accuracy``), what
      filtering by the model's own check adds; None when the first review accepted none.
      ``review/accepted``: the share of first answers it accepted.
    - ``review/fixed``: among wrong answers the review rejected, the share the next answer turn
      makes right; ``review/broke``: among right answers under review, the share the next answer
      turn makes wrong (None without such answers). ``review/fixed_when_flagged`` and
      ``review/broke_right`` are the same rates under their first names, 0.0 without answers.

    Empty when no episode has a review turn.
    """
    hits: dict[bool, list[bool]] = {True: [], False: []}
    fixed, broke, first, accepted = [], [], [], []
    for episode in episodes:
        turns, answering = episode.turns, answer_roles_of(episode)
        answers = answer_sequence(episode)
        reviews = [i for i, t in enumerate(turns) if "reviewed_correct" in t.info]
        if answers:
            first.append(answers[0][1])
            if reviews and turns[reviews[0]].info.get("verdict") is True:
                accepted.append(answers[0][1])
        for i in reviews:
            info = turns[i].info
            truth, verdict = bool(info["reviewed_correct"]), info.get("verdict")
            hits[truth].append(verdict is truth)
            nxt = next((t for t in turns[i + 1 :] if role_of(t.agent) in answering), None)
            if nxt is None:
                continue
            if truth:
                broke.append(not nxt.info.get("correct"))
            elif verdict is False:
                fixed.append(bool(nxt.info.get("correct")))
    if not hits[True] and not hits[False]:
        return {}

    def mean(xs: list[bool]) -> float | None:
        return sum(xs) / len(xs) if xs else None

    tpr, tnr = mean(hits[True]), mean(hits[False])
    classes = [r for r in (tpr, tnr) if r is not None]
    accuracy, kept = mean(first), mean(accepted)
    return {
        "review/tpr": tpr,
        "review/tnr": tnr,
        "review/balanced_accuracy": sum(classes) / len(classes),
        "review/gap": None if kept is None or accuracy is None else kept - accuracy,
        "review/accepted": None if not first else len(accepted) / len(first),
        "review/fixed": mean(fixed),
        "review/broke": mean(broke),
        "review/fixed_when_flagged": mean(fixed) or 0.0,
        "review/broke_right": mean(broke) or 0.0,
    }


def agent_metrics(episodes: Sequence[Episode]) -> dict[str, dict[str, float]]:
    """Mean reward, accuracy, parse-error rate and completion tokens per agent, and, where the env
    audits arithmetic (``info["false_equations"]``, `envs.reflection`), ``false_arithmetic``: the
    share of its turns that state an equation that does not hold."""
    rows: dict[str, list[Turn]] = defaultdict(list)
    for episode in episodes:
        for turn in episode.turns:
            rows[turn.agent].append(turn)
    out: dict[str, dict[str, float]] = {}
    for agent, turns in sorted(rows.items()):
        out[agent] = {
            "turns": len(turns),
            "reward": sum(t.reward for t in turns) / len(turns),
            "accuracy": sum(bool(t.info.get("correct")) for t in turns) / len(turns),
            "parse_error": sum(bool(t.info.get("parse_error")) for t in turns) / len(turns),
            "completion_tokens": sum(len(t.completion_ids) for t in turns) / len(turns),
        }
        audited = [t.info["false_equations"] for t in turns if "false_equations" in t.info]
        if audited:
            out[agent]["false_arithmetic"] = sum(n > 0 for n in audited) / len(audited)
    return out


INTERVAL_KEYS = (
    "pass1@turn1",
    "maj1@turnK",
    "pass1@turnK",
    "accuracy",
    "flip/wrong->right@1",
    "flip/right->wrong@1",
    "review/balanced_accuracy",
)


def bootstrap_intervals(
    episodes: Sequence[Episode],
    keys: Sequence[str] = INTERVAL_KEYS,
    resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> dict[str, list[float]]:
    """Percentile bootstrap intervals of `keys`, resampling problems (all samples of a problem
    move together, since they are not independent). Keys the episodes lack are left out."""
    import random

    groups: dict[int, list[Episode]] = defaultdict(list)
    for episode in episodes:
        groups[episode.group].append(episode)
    ids = sorted(groups)
    if not ids:
        raise ValueError("bootstrap_intervals needs at least one episode")
    rng = random.Random(seed)
    draws: dict[str, list[float]] = defaultdict(list)
    for _ in range(resamples):
        sample = [e for g in rng.choices(ids, k=len(ids)) for e in groups[g]]
        metrics = compute_metrics(sample)
        for key in keys:
            if key in metrics:
                draws[key].append(metrics[key])
    tail = (1 - level) / 2
    out = {}
    for key, values in draws.items():
        values.sort()
        lo = values[int(tail * (len(values) - 1))]
        hi = values[round((1 - tail) * (len(values) - 1))]
        out[key] = [lo, hi]
    return out


# ---------------------------------------------------------------------------------------------
# Per-problem figures, compute-matched baselines, paired intervals and per-level splits.
#
# Each figure is first reduced to one number per problem (the mean over that problem's
# episodes or samples); means, per-level means and bootstrap intervals are then taken over
# problems, and a difference between two evaluations of the same problems (team - alone, after -
# before) is resampled problem by problem, both sides together (`paired_interval`).

TEAM_FIGURES = ("team/vote", "team/final", "team/first")
_LEVEL_RE = re.compile(r"(?:^|/)d(\d+)(?:/|$)")


def level_of(problem_id: str) -> int | None:
    """The level of a procedural problem from its id (``unknown/test/d3/s0/17`` -> 3), else None."""
    match = _LEVEL_RE.search(problem_id)
    return int(match.group(1)) if match else None


# What every evaluation shows per level: the team's answers, the solver's first answer, how the
# reviews judge it, the verification gap and what revisions do (`review_metrics`).
LEVEL_KEYS = (
    "accuracy",
    "pass1@turn1",
    "maj1@turnK",
    "solver/accuracy",
    "review/tpr",
    "review/tnr",
    "review/balanced_accuracy",
    "review/gap",
    "review/accepted",
    "review/fixed",
    "review/broke",
)


def level_metrics(
    episodes: Sequence[Episode], keys: Sequence[str] = LEVEL_KEYS
) -> dict[str, dict[str, float | None]]:
    """`keys` of `compute_metrics` per problem level (``{"1": {...}, "2": {...}}``, with
    ``problems`` and ``episodes`` counts); empty when the problems have no levels. A key the
    level's episodes lack (no reviews) is left out; one they have as None stays None."""
    by_level: dict[int, list[Episode]] = defaultdict(list)
    for episode in episodes:
        level = level_of(episode.problem_id)
        if level is None:
            return {}
        by_level[level].append(episode)
    out = {}
    for level, subset in sorted(by_level.items()):
        metrics = compute_metrics(subset)
        out[str(level)] = {k: metrics[k] for k in keys if k in metrics}
        problems = len({e.problem_id for e in subset})
        out[str(level)].update(problems=problems, episodes=metrics["episodes"])
    return out


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

    paired, headroom = {}, {}
    for k in ks:
        other = f"alone/maj@{k}"
        if not scores.get(other):
            continue
        for mine in ("team/vote", "team/final"):
            paired[f"{mine} - {other}"] = pair(mine, other)
        if scores.get(f"alone/pass@{k}"):
            headroom[f"alone/pass@{k} - {other}"] = pair(f"alone/pass@{k}", other)
    matched = [k for k in dict.fromkeys((matched_k, tokens_k)) if k is not None]
    matched = [k for k in matched if scores.get(f"alone/maj@{k}")]
    baseline = max(matched, key=lambda k: figures[f"alone/maj@{k}"], default=matched_k)
    levels: dict[str, dict[str, Any]] = {}
    ids = sorted(set(team) & set(alone))
    by_level: dict[int, list[str]] = defaultdict(list)
    for pid in ids:
        level = level_of(pid)
        if level is not None:
            by_level[level].append(pid)
    if by_level and sum(map(len, by_level.values())) == len(ids):
        for level, pids in sorted(by_level.items()):
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
            levels[str(level)] = row
    return {
        "figures": figures,
        "ci95": ci95,
        "paired": paired,
        "headroom": headroom,
        "levels": levels,
        "baseline_k": baseline,
    }
