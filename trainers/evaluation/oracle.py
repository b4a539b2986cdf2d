"""The oracle row of a reflection team on a task whose faults are named and patched by a script
(a task family's faults, `envs.tasks.family`): the learned solver's own first answers (sampled
afresh, on the same problems), then a sound critic (the verifier, naming every fault: the env's
``oracle_critic``) and the scripted patch of the fault it names first (its fault model's
``repair``; graph colouring's is min-conflicts). It is what a check and a local
repair add to the same first answers: the ceiling a learned critic and refiner are set against,
reported beside the learned team in every such evaluation (`oracle_side`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from agents.base import Observation
from agents.roles import RoleMap
from envs.tasks import make_task
from trainers.evaluation.compare import figure_of, paired_interval, team_problem_scores
from trainers.evaluation.config import EvalConfig
from trainers.evaluation.play import run_env

FEEDBACK = "Reviewer feedback:"  # where a refiner's prompt turns from the answer to the review
ORACLE_ENV = "math/reflection-v0"


class ScriptedPatcher:
    """A refiner with no model: the scripted patch (`repair`) of the first fault the review in
    its prompt names, in the latest answer its prompt shows; ``Keep.`` when none is named.

    Args:
        faults: the task's fault model, with a ``repair(answer, fault, reference)`` method.
        references: question text -> reference answer of every problem it may be shown (the
            patch reads the graph from it, never the solution).
    """

    def __init__(self, faults: Any, references: Mapping[str, str]) -> None:
        self.faults = faults
        self.references = dict(references)

    def act(self, observations: Sequence[Observation]) -> list[str]:
        replies = []
        for observation in observations:
            reference = self.references.get(observation.get("question", ""))
            answer, _, review = observation.get("prompt", "").rpartition(FEEDBACK)
            named = self.faults.named(review)
            if reference is None or not named:
                replies.append("Keep.")
                continue
            replies.append(self.faults.repair(answer, named[0], reference))
        return replies


def scripted_repair(config: EvalConfig) -> Any | None:
    """The task's fault model when it has a scripted repair and the env is reflection (an
    oracle row applies), else None."""
    if config.env_id != ORACLE_ENV:
        return None
    faults = make_task(config.task).faults
    return faults if callable(getattr(faults, "repair", None)) else None


def oracle_side(
    config: EvalConfig,
    policies: RoleMap,
    team: Mapping[str, Mapping[str, float]],
    faults: Any,
) -> tuple[dict[str, Any], dict[str, dict[str, float]]]:
    """Play the oracle row on the config's problems (the learned solver from `policies`, the
    verifier as critic, the scripted patch of `faults`, `scripted_repair`'s, as refiner) and set the learned team's per-problem
    figures (`team`) against it, paired by problem. Returns its summary (``metrics``, and
    ``team_minus_oracle``: the learned team's final answer and vote minus the oracle's final
    answer, each `paired_interval`'s ``{"diff", "ci95", "problems"}``) and per problem ``oracle/final``, ``oracle/vote``."""
    references = {p["question"]: p["answer"] for p in config.problems.problems()}
    options = {**config.protocol.options, "oracle_critic": True}
    oracle_config = replace(config, protocol=replace(config.protocol, options=options))
    roles = RoleMap(
        {
            "*": policies.policy_for("solver_0"),
            "critic": _Unread(),
            "refiner": ScriptedPatcher(faults, references),
        }
    )
    metrics, episodes = run_env(oracle_config, ORACLE_ENV, roles)
    scores = team_problem_scores(episodes)
    per_problem = {
        pid: {"oracle/final": row["team/final"], "oracle/vote": row["team/vote"]}
        for pid, row in scores.items()
    }
    oracle = figure_of(per_problem, "oracle/final")
    summary: dict[str, Any] = {
        "metrics": metrics,
        "team_minus_oracle": {
            figure: paired_interval(figure_of(team, figure), oracle, seed=config.seed)
            for figure in ("team/final", "team/vote")
        },
    }
    return summary, per_problem


class _Unread:
    """The critic's seat in the oracle row: the env puts the verifier's review in place of
    whatever it writes, so it writes nothing."""

    def act(self, observations: Sequence[Observation]) -> list[str]:
        return [""] * len(observations)
