"""What a rollout records: `Episode`s of `Turn`s (each reply with its exact prompt and completion
token ids, sampled log-probabilities, reward and info), and their JSONL files.

A turn's reward is what the env paid its agent for it: after every env step, the rollout engine
(`trainers.rollout.engine`) adds each agent's reward from that step to that agent's latest turn.
Rewards and infos come from the env's trainer record (`envs.core.TaskEnvMixin.turn_results`):
each reward on the step it is for and each turn's full graded info (``correct``, ``score``, the
verifier's ``reason``), which the env withholds from the agents themselves until they act no more.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from envs.registry import list_envs, spec
from envs.roles import answer_roles, review_roles, role_of


@dataclass
class Turn:
    """One agent reply: what it saw (as text and as token ids), what it said, what it earned."""

    agent: str
    observation: dict[str, str]
    text: str
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    reward: float
    info: dict[str, Any]
    index: int  # position of the turn in the episode (0-based, in acting order)
    round: int  # the round (Parallel) or the info's round (AEC), else the index
    finish_reason: str = "stop"


@dataclass
class Episode:
    """All turns of one episode, with the problem, its group and the agents' returns."""

    env_id: str
    problem_id: str
    group: int  # samples of the same problem share a group (GRPO's baseline)
    sample: int  # index of the sample within its group
    turns: list[Turn] = field(default_factory=list)
    # Branched rollout: turn k is the `sample`-th of the group's replies to the trunk's first k
    # turns, so the turns answer a shared history, not each other (`trainers.rollout.engine`).
    branched: bool = False
    # The roles whose turns state an answer, as the env that played the episode declares them
    # (`envs.roles`); None in episodes saved before episodes recorded them (`answer_roles_of`).
    answer_roles: tuple[str, ...] | None = None

    @property
    def returns(self) -> dict[str, float]:
        totals: dict[str, float] = {}
        for turn in self.turns:
            totals[turn.agent] = totals.get(turn.agent, 0.0) + turn.reward
        return totals

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Episode:
        turns = [Turn(**t) for t in data.get("turns", [])]
        return cls(
            data["env_id"],
            data["problem_id"],
            data["group"],
            data["sample"],
            turns,
            bool(data.get("branched", False)),
            None if data.get("answer_roles") is None else tuple(data["answer_roles"]),
        )


def answer_roles_of(episode: Episode | Mapping[str, Any]) -> tuple[str, ...]:
    """The roles whose turns state an answer in `episode` (or its dict): those its env declared
    when it was played, or, for an episode saved before episodes recorded them, those the
    registered env declares with its default kwargs (`envs.roles.answer_roles`)."""
    data = episode if isinstance(episode, Mapping) else vars(episode)
    recorded = data.get("answer_roles")
    return answer_roles(data["env_id"]) if recorded is None else tuple(recorded)


def review_roles_for(env_id: str | None) -> tuple[str, ...]:
    """The roles whose turns review another's answer with a verdict in `env_id`'s episodes: the
    env's facts (`envs.options.EnvFacts.review_roles`); with no env known (None, an id not
    registered here, or one registered without an options class), every reviewing role the
    registered envs state (`envs.roles.review_roles`)."""
    if env_id not in list_envs() or spec(env_id).options is None:
        return review_roles()
    return review_roles(env_id)


def review_roles_of(episode: Episode | Mapping[str, Any]) -> tuple[str, ...]:
    """The roles whose turns review another's answer in `episode` (or its dict): its env's
    (`review_roles_for`). A turn is a review when its agent plays one (`is_review`)."""
    data = episode if isinstance(episode, Mapping) else vars(episode)
    return review_roles_for(data["env_id"])


def is_review(turn: Turn, reviewing: Collection[str]) -> bool:
    """Whether `turn` reviews another's answer: its agent's role is one of `reviewing` (an
    episode's `review_roles_of`)."""
    return role_of(turn.agent) in reviewing


def save_episodes(path: str | Path, episodes: Iterable[Episode]) -> Path:
    """Write episodes as JSONL (one episode per line)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for episode in episodes:
            handle.write(json.dumps(episode.to_dict(), ensure_ascii=False) + "\n")
    return path


def load_episodes(path: str | Path) -> list[Episode]:
    """Read episodes written by `save_episodes`; a bad line raises naming the file and line."""
    episodes = []
    with Path(path).open(encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                episodes.append(Episode.from_dict(json.loads(line)))
            except (json.JSONDecodeError, KeyError, TypeError) as err:
                raise ValueError(f"{path}:{line_no} is not a saved episode: {err}") from None
    return episodes
