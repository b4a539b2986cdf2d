"""One env copy of a rollout: its env, the episode it records, and whose turn it is.

The rollout engine (`trainers.rollout.engine`) plays many copies at once; the continuous and
branched ways of batching their turns (`trainers.rollout.continuous`, `trainers.rollout.branched`)
share what is here: `EnvCopy` (which agents act next, rewards credited to their latest turns),
the pre-step hook each env class may offer (`prepare_steps`, the engine's module docstring), and
the signature of the engine's step of replies (`ApplyReplies`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from agents.base import Generation
from envs.core import TeamEnv
from trainers.rollout.records import Episode

Request = tuple[str, dict[str, str]]  # (agent, observation)
Owner = tuple["EnvCopy", str]  # (the copy a reply steps, its agent)
ApplyReplies = Callable[[list[Owner], list[Request], list[Generation]], None]
"""Steps each owner's copy with its reply to its request and records the turns
(`RolloutEngine._apply`)."""


@dataclass
class EnvCopy:
    """One env of the engine and the episode it is playing.

    Args:
        env: the env (AEC or Parallel, wrapped or not).
        episode (`Episode`): the record its turns go to.
        pending (`dict[str, float]`): rewards reaching an agent before its first turn.
        parallel (`bool`): a Parallel env.
        observations (`dict`): Parallel envs only: the last observations, by agent.
        steps (`int`): Parallel env steps since reset (a round number when infos give none).
        slot (`int`): which of the engine's envs this is.
        job (`int`): which of the run's episodes this is.
    """

    env: TeamEnv
    episode: Episode
    pending: dict[str, float] = field(default_factory=dict)
    parallel: bool = False
    observations: dict[str, dict[str, str]] = field(default_factory=dict)
    steps: int = 0
    slot: int = 0
    job: int = 0

    def credit(self, rewards: Mapping[str, float]) -> None:
        """Adds each agent's reward to its latest turn (to `pending` before its first)."""
        latest = {t.agent: t for t in self.episode.turns}
        for agent, reward in rewards.items():
            if not reward:
                continue
            if agent in latest:
                latest[agent].reward += float(reward)
            else:
                self.pending[agent] = self.pending.get(agent, 0.0) + float(reward)

    def acting_agents(self) -> list[Request]:
        """The agents whose turn it is, with their observations (AEC: one, after stepping past
        finished agents; Parallel: every live one); none once the episode is over."""
        env = self.env
        if self.parallel:
            return [(a, self.observations[a]) for a in env.agents]
        while env.agents:
            agent = env.agent_selection
            if env.terminations[agent] or env.truncations[agent]:
                env.step(None)
                continue
            return [(agent, env.observe(agent))]
        return []


def prepare_steps(steps: Iterable[tuple[Any, str]]) -> None:
    """Call each env class's pre-step hook (``prepare_steps``, the engine's module docstring)
    once, with the `(env, action)` steps of its copies that are about to be taken; envs without
    one are skipped."""
    by_class: dict[type, list[tuple[Any, str]]] = {}
    for env, action in steps:
        cls = type(env.unwrapped)
        if callable(getattr(cls, "prepare_steps", None)):
            by_class.setdefault(cls, []).append((env, action))
    for cls, pairs in by_class.items():
        cls.prepare_steps(pairs)  # type: ignore[attr-defined]


def env_name(env: Any) -> str:
    """A made env's name for its records: its ``metadata["name"]``, else its class name."""
    raw = env.unwrapped
    name = getattr(raw, "metadata", {}).get("name")
    return name if isinstance(name, str) and name else type(raw).__name__
