"""Agent names and the roles they play: the one home for both.

An agent is named ``<role>_<index>`` (``critic_0``, ``debater_2``); `role_of` maps a name to its
role. Each env class declares ``answer_roles``: the roles whose turns state an answer to the
problem (a solver's or refiner's reply, a debater's, an executor's program output), as opposed
to roles that review, plan or judge (critic, analyzer, verifier). The rollout engine records
them on every episode it plays (`trainers.rollout.records.Episode.answer_roles`), where metrics
(which answers a team gave, in order), DPO's refiner pairs and verifier data read them;
instruction ensembles ask `answer_roles` before playing.
"""

from __future__ import annotations

import functools
from typing import Any


def role_of(agent: str) -> str:
    """``"critic_0"`` -> ``"critic"``; a name without a numeric suffix is its own role."""
    head, _, tail = agent.rpartition("_")
    return head if head and tail.isdigit() else agent


def env_roles(env: Any) -> list[str]:
    """The roles of `env`'s agents in turn order, each once (``solver_0`` -> ``solver``)."""
    return list(dict.fromkeys(role_of(agent) for agent in env.unwrapped.possible_agents))


def builtin_answer_roles() -> tuple[str, ...]:
    """Every answering role the built-in envs declare."""
    from envs.debate import DebateEnv
    from envs.ensemble import EnsembleEnv
    from envs.reflection import ReflectionEnv
    from envs.solve import SolveEnv
    from envs.tool import ToolEnv

    classes = (SolveEnv, ReflectionEnv, DebateEnv, EnsembleEnv, ToolEnv)
    return tuple(dict.fromkeys(role for cls in classes for role in cls.answer_roles))


@functools.lru_cache(maxsize=64)
def _registered_answer_roles(env_id: str) -> tuple[str, ...]:
    from envs.registry import make

    env = make(env_id)
    try:
        return answer_roles(env)
    finally:
        env.close()


def answer_roles(env: Any = None) -> tuple[str, ...]:
    """The roles whose turns state an answer: an env instance's, a registered env id's, or, with
    no env (or one that declares none), every answering role of the built-in envs."""
    if env is None:
        return builtin_answer_roles()
    if isinstance(env, str):
        return _registered_answer_roles(env)
    declared = getattr(getattr(env, "unwrapped", env), "answer_roles", None)
    if declared is None:
        return builtin_answer_roles()
    return tuple(declared)
