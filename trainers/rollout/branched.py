"""Branched rollouts: every turn of a problem sampled ``group_size`` times from one shared history.

`RolloutEngine.run(..., branch=True)` (its module docstring says what and why) plays the
problems in waves of `Tree`s. `BranchedRollout.grow` adds one level of replies to every live
tree at a time: it forks each tree's trunk into ``group_size`` env copies (`BranchedRollout.fork`:
reset with the problem's seed and replayed through the trunk's actions), asks the role map for
one reply in each copy (one call for the whole wave), steps them, and extends each trunk with
one of its replies whose copy goes on, drawn with the tree's own RNG.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.roles import RoleMap
from envs.roles import role_of
from trainers.rollout.copies import ApplyReplies, EnvCopy, Owner, Request
from trainers.rollout.records import Episode


@dataclass
class Tree:
    """A branched rollout of one problem: the trunk's actions and the group's records."""

    problem_id: str
    group: int
    seed: int
    group_size: int
    env_id: str
    answer_roles: tuple[str, ...]
    actions: list[list[str]] = field(default_factory=list)  # the trunk's replies, turn by turn
    episodes: list[Episode] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.episodes = [
            Episode(
                self.env_id,
                self.problem_id,
                self.group,
                s,
                branched=True,
                answer_roles=self.answer_roles,
            )
            for s in range(self.group_size)
        ]


class BranchedRollout:
    """Grows the trees of one env's branched rollouts (module docstring).

    Args:
        env_id (`str`): the env's name (records, errors).
        parallel (`bool`): a Parallel env (else AEC).
        policies (`RoleMap`): who plays which agent.
        apply (`ApplyReplies`): steps copies with their replies and records the turns.
    """

    def __init__(self, env_id: str, parallel: bool, policies: RoleMap, apply: ApplyReplies):
        self.env_id, self.parallel, self.policies, self.apply = env_id, parallel, policies, apply

    def grow(self, trees: list[Tree], envs: Sequence[Any], group_size: int) -> None:
        """Adds one level of replies to every live tree until all trunks have ended; tree ``k``
        plays on ``envs[k * group_size : (k + 1) * group_size]``."""
        live = list(trees)
        level = 0
        while live:
            forks: list[tuple[Tree, list[EnvCopy]]] = []
            for k, tree in enumerate(live):
                copies = envs[k * group_size : (k + 1) * group_size]
                forks.append((tree, [self.fork(tree, env) for env in copies]))
            owners: list[Owner] = []
            requests: list[Request] = []
            for tree, copies in forks:
                acting = [env_copy.acting_agents() for env_copy in copies]
                if any(a != acting[0] for a in acting[1:]):
                    raise RuntimeError(
                        f"{self.env_id} is not deterministic under replay: copies reset with the "
                        f"same seed and stepped with the same actions differ on problem "
                        f"{tree.problem_id!r} at turn {level}; use branch=False"
                    )
                for env_copy, agents in zip(copies, acting, strict=True):
                    for agent, obs in agents:
                        requests.append((agent, obs))
                        owners.append((env_copy, agent))
            generations = self.policies.generate(requests, [role_of(a) for a, _ in requests])
            self.apply(owners, requests, generations)
            live = [tree for tree, copies in forks if self._extend(tree, copies)]
            level += 1

    def _extend(self, tree: Tree, copies: list[EnvCopy]) -> bool:
        """Appends each copy's new turns to its episode of `tree` (numbered along the trunk's
        path) and extends the trunk with the replies of one copy that goes on; whether any does."""
        for episode, env_copy in zip(tree.episodes, copies, strict=True):
            for turn in env_copy.episode.turns:
                turn.index = len(episode.turns)
                episode.turns.append(turn)
        going = [s for s, env_copy in enumerate(copies) if env_copy.acting_agents()]
        if not going:
            return False
        chosen = copies[tree.rng.choice(going)]
        tree.actions.append([t.text for t in chosen.episode.turns])
        return True

    def fork(self, tree: Tree, env: Any) -> EnvCopy:
        """`env` reset to the tree's problem and replayed through its trunk; a fresh record."""
        first = env.reset(seed=tree.seed, options={"problem_id": tree.problem_id})
        env_copy = EnvCopy(env, Episode(self.env_id, tree.problem_id, 0, 0), parallel=self.parallel)
        if self.parallel:
            env_copy.observations = first[0]
        for texts in tree.actions:  # one reply per acting agent, as the trunk took them
            agents = env_copy.acting_agents()  # (AEC: this also steps past finished agents)
            if self.parallel:
                actions = {agent: text for (agent, _), text in zip(agents, texts, strict=True)}
                env_copy.observations = env.step(actions)[0]
                env_copy.steps += 1
            else:
                (text,) = texts  # AEC: one agent acts per turn
                env.step(text)
        return env_copy
