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

The team against the same model alone, problem by problem: `trainers.evaluation.compare`.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from envs.roles import role_of
from envs.tasks.mixed import task_of
from rewards import canonical_answer, majority_vote
from trainers.rollout.records import Episode, Turn, answer_roles_of, is_review, review_roles_of


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


@dataclass
class _ReviewTally:
    """The outcomes `review_metrics` rates, gathered episode by episode (`add`): each review's
    hit (its verdict matches the truth) under the truth of the answer reviewed (`hits`), whether
    the next answer turn fixed a rejected wrong answer or broke a right one, and the first
    answers' correctness, all of them and those the first review accepted."""

    hits: dict[bool, list[bool]] = field(default_factory=lambda: {True: [], False: []})
    fixed: list[bool] = field(default_factory=list)
    broke: list[bool] = field(default_factory=list)
    first: list[bool] = field(default_factory=list)
    accepted: list[bool] = field(default_factory=list)
    named_real: list[bool] = field(default_factory=list)

    def add(self, episode: Episode) -> None:
        turns, answering = episode.turns, answer_roles_of(episode)
        reviewing = review_roles_of(episode)
        answers = answer_sequence(episode)
        # a review whose info holds no truth of the answer under review cannot be rated
        reviews = [
            i
            for i, t in enumerate(turns)
            if is_review(t, reviewing) and "reviewed_correct" in t.info
        ]
        if answers:
            self.first.append(answers[0][1])
            if reviews and turns[reviews[0]].info.get("verdict") is True:
                self.accepted.append(answers[0][1])
        for i in reviews:
            info = turns[i].info
            truth, verdict = bool(info["reviewed_correct"]), info.get("verdict")
            self.hits[truth].append(verdict is truth)
            if "fault_real" in info:  # a rejection of a wrong answer, on a task with named faults
                self.named_real.append(bool(info["fault_real"]))
            nxt = next((t for t in turns[i + 1 :] if role_of(t.agent) in answering), None)
            if nxt is None:
                continue
            if truth:
                self.broke.append(not nxt.info.get("correct"))
            elif verdict is False:
                self.fixed.append(bool(nxt.info.get("correct")))


def review_metrics(episodes: Sequence[Episode]) -> dict[str, float | None]:
    """How reviews (critic, program verifier) judge, what the model's own check adds, and what
    the revision after a review does. Reviews are the turns of the env's review roles (its
    facts' ``review_roles``, `trainers.rollout.records.review_roles_of`), whose info has
    ``reviewed_correct`` (the truth of the answer under review) and ``verdict`` (True, False, or
    None: no verdict, which is a miss either way and never an acceptance).

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
    - ``review/fault_real``, on a task with named faults (`envs.tasks.faults`): among the rejections
      of wrong answers, the share whose named fault is a real one (by the env's ``fault_rule``;
      naming none is a miss). Left out on other tasks.

    Empty when no episode has a review turn.
    """
    tally = _ReviewTally()
    for episode in episodes:
        tally.add(episode)
    if not tally.hits[True] and not tally.hits[False]:
        return {}

    def mean(xs: list[bool]) -> float | None:
        return sum(xs) / len(xs) if xs else None

    tpr, tnr = mean(tally.hits[True]), mean(tally.hits[False])
    classes = [r for r in (tpr, tnr) if r is not None]
    accuracy, kept = mean(tally.first), mean(tally.accepted)
    fixed, broke = mean(tally.fixed), mean(tally.broke)
    named = {"review/fault_real": mean(tally.named_real)} if tally.named_real else {}
    return {
        **named,
        "review/tpr": tpr,
        "review/tnr": tnr,
        "review/balanced_accuracy": sum(classes) / len(classes),
        "review/gap": None if kept is None or accuracy is None else kept - accuracy,
        "review/accepted": None if not tally.first else len(tally.accepted) / len(tally.first),
        "review/fixed": fixed,
        "review/broke": broke,
        "review/fixed_when_flagged": fixed or 0.0,
        "review/broke_right": broke or 0.0,
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


# Problem levels (procedural tasks: ``d<level>`` in the problem id).
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
    "review/fault_real",
)


def level_metrics(
    episodes: Sequence[Episode], keys: Sequence[str] = LEVEL_KEYS, by_member: bool = False
) -> dict[str, dict[str, float | None]]:
    """`keys` of `compute_metrics` per problem level (``{"1": {...}, "2": {...}}``, with
    ``problems`` and ``episodes`` counts); empty when the problems have no levels. A key the
    level's episodes lack (no reviews) is left out; one they have as None stays None. A mixed
    task's levels are its members' (``"reach 2"``); `by_member`: per member task instead."""
    mixed = len({task_of(e.problem_id) for e in episodes}) > 1
    by_level: dict[tuple[str, int], list[Episode]] = defaultdict(list)
    for episode in episodes:
        member, level = task_of(episode.problem_id), level_of(episode.problem_id)
        if by_member:
            by_level[(member, 0)].append(episode)
            continue
        if level is None:
            return {}
        by_level[(member if mixed else "", level)].append(episode)
    out = {}
    for (member, level), subset in sorted(by_level.items()):
        name = member if by_member else f"{member} {level}".strip()
        metrics = compute_metrics(subset)
        out[name] = {k: metrics[k] for k in keys if k in metrics}
        problems = len({e.problem_id for e in subset})
        out[name].update(problems=problems, episodes=metrics["episodes"])
    return out
