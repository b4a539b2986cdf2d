"""Labelled rows for the learned verifier (`trainers.verifier.model`), without torch.

Rows are ``{problem_id, response, reference, correct}`` (plus ``level`` where known):

- `rows_from_episodes`: the answer turns of recorded rollout episodes, labelled by the env's
  rule verifier;
- `scripted_rows`: worked arithmetic solutions written without any model, some with a slip,
  more slips on harder problems, like a real policy;
- `balance_rows`: within each difficulty bin (the arithmetic level of the problem id, or the
  problem's accuracy over the rollouts), as many right as wrong answers, so that a classifier
  cannot learn "hard problem -> wrong"; it reports the correlation of correctness with
  difficulty before and after (`problem_difficulty`, `correlation`).
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from envs.roles import role_of
from trainers.rollout.records import answer_roles_of

__all__ = [
    "balance_rows",
    "correlation",
    "default_p_correct",
    "problem_difficulty",
    "rows_from_episodes",
    "scripted_rows",
]

_LEVEL = re.compile(r"/d(\d+)/")


def rows_from_episodes(
    episodes: Iterable[Any],
    references: Mapping[str, str] | Callable[[str], str] | Any,
    roles: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """Verifier rows from recorded episodes (`trainers.rollout.records.Episode`, or their dicts).

    Args:
        episodes: episodes of any env; every turn whose info has ``correct`` and whose role is
            in `roles` gives a row (critic turns are left out: their ``correct`` is the verdict's).
        references: the reference answer of a problem id: a mapping, a callable, or a task /
            problem source with ``get(problem_id)`` (episodes never hold the reference).
        roles: the roles whose turns give rows (default: each episode's answering roles, as
            its env declared them: `trainers.rollout.records.answer_roles_of`).

    Returns:
        Rows ``{problem_id, question, response, reference, correct, role}``.
    """
    if isinstance(references, Mapping):
        lookup: Callable[[str], str] = references.__getitem__
    elif callable(references):
        lookup = references
    else:
        source = getattr(references, "source", references)
        lookup = lambda pid: source.get(pid)["answer"]
    rows = []
    for episode in episodes:
        data = episode if isinstance(episode, Mapping) else episode.to_dict()
        keep = answer_roles_of(data) if roles is None else tuple(roles)
        for turn in data["turns"]:
            info = turn.get("info") or {}
            role = role_of(turn["agent"])
            if role not in keep or not isinstance(info.get("correct"), bool):
                continue
            rows.append(
                {
                    "problem_id": data["problem_id"],
                    "question": (turn.get("observation") or {}).get("question", ""),
                    "response": turn["text"],
                    "reference": str(lookup(data["problem_id"])),
                    "correct": info["correct"],
                    "role": role,
                }
            )
    return rows


def default_p_correct(level: int) -> float:
    """A policy's accuracy by arithmetic level: 0.95 at level 1 down to 0.27 at level 5."""
    return max(0.05, 0.95 - 0.17 * (level - 1))


def scripted_rows(
    num_problems: int,
    levels: Sequence[int] = (1, 2, 3, 4, 5),
    split: str = "train",
    seed: int = 0,
    p_correct: Callable[[int], float] = default_p_correct,
) -> list[dict[str, Any]]:
    """Rows without any model: worked arithmetic solutions, right or with a slip.

    Each problem gets one response, correct with probability ``p_correct(level)`` (by default
    harder problems are answered wrong more often, as by a real policy, so correctness starts
    out correlated with difficulty); a wrong one carries a slip of -2, -1, +1, +2 or +10 at a
    random step, propagated to the final answer.
    """
    import envs
    from envs.tasks.arithmetic import worked_solution

    rng = random.Random(f"verifier-rows|{seed}|{split}")
    source = envs.make_task(
        "arithmetic", split=split, size=num_problems, difficulty=list(levels), seed=seed
    ).source
    rows = []
    for problem in source:
        level = problem["metadata"]["difficulty"]
        steps = len(problem["metadata"]["steps"])
        good, truth = worked_solution(problem)
        text, correct = good, rng.random() < p_correct(level)
        if not correct:
            slip = rng.choice([-2, -1, 1, 2, 10])
            text, value = worked_solution(problem, rng.randrange(steps), slip)
            if value == truth:  # a slip before a division can round away: slip the last step
                text, value = worked_solution(problem, steps - 1, slip)
            correct = value == truth
        rows.append(
            {
                "problem_id": problem["id"],
                "question": problem["question"],
                "response": text,
                "reference": problem["answer"],
                "correct": correct,
                "role": "solver",
            }
        )
    return rows


def problem_difficulty(rows: Sequence[Mapping[str, Any]], by: str = "auto") -> dict[str, float]:
    """Each problem's difficulty: its arithmetic level (``by="level"``, from the id), or its
    failure rate over the rows (``by="accuracy"``: 1 - the share of right answers); ``"auto"``
    uses levels when every id has one."""
    if by not in ("auto", "level", "accuracy"):
        raise ValueError(f"difficulty by={by!r}; expected 'auto', 'level' or 'accuracy'")
    ids = {row["problem_id"] for row in rows}
    levels = {pid: _LEVEL.search(pid) for pid in ids}
    if by == "level" or (by == "auto" and all(levels.values())):
        missing = sorted(pid for pid, match in levels.items() if match is None)
        if missing:
            raise ValueError(f"no '/d<level>/' in problem ids {missing[:3]}; use by='accuracy'")
        return {pid: float(match.group(1)) for pid, match in levels.items()}  # type: ignore[union-attr]
    right, total = Counter(), Counter()
    for row in rows:
        total[row["problem_id"]] += 1
        right[row["problem_id"]] += bool(row["correct"])
    return {pid: 1.0 - right[pid] / total[pid] for pid in total}


def correlation(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson's r (point-biserial for a 0/1 variable); None when either side is constant."""
    n = len(xs)
    if n < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sxx, syy = sum((x - mx) ** 2 for x in xs), sum((y - my) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def _summary(rows: Sequence[Mapping[str, Any]], difficulty: Mapping[str, float]) -> dict:
    right = sum(bool(r["correct"]) for r in rows)
    corr = correlation(
        [float(bool(r["correct"])) for r in rows], [difficulty[r["problem_id"]] for r in rows]
    )
    return {"rows": len(rows), "right": right, "wrong": len(rows) - right, "corr": corr}


def balance_rows(
    rows: Sequence[Mapping[str, Any]], by: str = "auto", bins: int = 5, seed: int = 0
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Equal right and wrong answers within every difficulty bin.

    Problems are binned by difficulty (`problem_difficulty`: a level is its own bin; a failure
    rate falls in one of `bins` equal-width bins over [0, 1]); each bin keeps
    ``min(right, wrong)`` of each, drawn at random, so every bin is 50/50 and correctness no
    longer correlates with difficulty. Bins with only right or only wrong answers drop out.

    Returns:
        The kept rows (shuffled) and a report: ``by``, ``before`` / ``after`` (rows, right, wrong,
        ``corr`` = Pearson r of correct with difficulty) and the counts per bin.
    """
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    rows = [dict(r) for r in rows]
    difficulty = problem_difficulty(rows, by)
    by_level = by == "level" or (by == "auto" and all(_LEVEL.search(r["problem_id"]) for r in rows))

    def bin_of(value: float) -> str:
        return f"level {value:g}" if by_level else f"fail {min(int(value * bins), bins - 1)}"

    groups: dict[str, dict[bool, list[dict]]] = defaultdict(lambda: {True: [], False: []})
    for row in rows:
        groups[bin_of(difficulty[row["problem_id"]])][bool(row["correct"])].append(row)
    rng = random.Random(seed)
    kept, per_bin = [], {}
    for key in sorted(groups):
        right, wrong = groups[key][True], groups[key][False]
        keep = min(len(right), len(wrong))
        kept += rng.sample(right, keep) + rng.sample(wrong, keep)
        per_bin[key] = {"right": len(right), "wrong": len(wrong), "kept_each": keep}
    rng.shuffle(kept)
    report = {
        "by": "level" if by_level else "accuracy",
        "before": _summary(rows, difficulty),
        "after": _summary(kept, difficulty),
        "bins": per_bin,
    }
    return kept, report


# ---------------------------------------------------------------------------- training
