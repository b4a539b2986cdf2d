"""Agent names and the roles they play: the one home of the rule.

An agent is named ``<role>_<index>`` (``critic_0``, ``debater_2``, ``lead_critic_1``); `role_of`
maps a name to its role by stripping a trailing ``_<digits>``, so a role name may itself hold
underscores. Every env, the rollout engine and the trainers read roles through this module; it
imports no env module (the envs import it).

Each env class declares ``answer_roles``: the roles whose turns state an answer to the problem (a
solver's or refiner's reply, a debater's, an executor's program output), as opposed to roles
that review, plan or judge (critic, analyzer, verifier). The rollout engine records them on every
episode it plays (`trainers.rollout.records.Episode.answer_roles`), where metrics (which answers
a team gave, in order), DPO's refiner pairs and verifier data read them; instruction ensembles
ask `answer_roles` before playing. An env without a declaration is read with the built-in envs'
answering roles, found through the registry (`builtin_answer_roles`).

A registered id is answered from its options' facts (`envs.registry.EnvSpec.facts`), with no env
built; an id registered without an options class is made once to ask it. `review_roles` names
the roles that judge another's answer with a verdict (reflection's critic, the tool env's
verifier), whose accuracy is that of their verdicts.
"""

from __future__ import annotations

from typing import Any

from envs.registry import EnvSpec, make, registered_specs, spec


def role_of(agent: str) -> str:
    """``"critic_0"`` -> ``"critic"``, ``"lead_critic_1"`` -> ``"lead_critic"``; a name without a
    numeric suffix is its own role."""
    head, _, tail = agent.rpartition("_")
    return head if head and tail.isdigit() else agent


def env_roles(env: Any, **options: Any) -> list[str]:
    """The roles of `env`'s agents in turn order, each once (``solver_0`` -> ``solver``): an env
    instance's, or a registered id's for `options` (its options' facts; an id registered
    without an options class is made with them once to ask it)."""
    if isinstance(env, str):
        current = spec(env)
        if current.options is not None:
            return list(current.facts(**options).roles)
        made = make(env, **options)
        try:
            return env_roles(made)
        finally:
            made.close()
    return list(dict.fromkeys(role_of(agent) for agent in env.unwrapped.possible_agents))


# env id -> (the spec it was read from, its answer roles): a re-registered id is read afresh.
_DECLARED: dict[str, tuple[EnvSpec, tuple[str, ...]]] = {}


def _registered_answer_roles(env_id: str) -> tuple[str, ...]:
    current = spec(env_id)
    if current.options is not None:  # stated by its options, no env built
        return tuple(current.facts().answer_roles)
    cached = _DECLARED.get(env_id)
    if cached is not None and cached[0] is current:
        return cached[1]
    env = make(env_id)
    try:
        roles = answer_roles(env)
    finally:
        env.close()
    _DECLARED[env_id] = (current, roles)
    return roles


def builtin_answer_roles() -> tuple[str, ...]:
    """Every answering role the built-in envs declare (those whose entry point is in this
    package), in registration order; each env is made once, through the registry."""
    builtin = [
        s.id
        for s in registered_specs()
        if isinstance(s.entry_point, str) and s.entry_point.startswith("envs.")
    ]
    return tuple(dict.fromkeys(r for env_id in builtin for r in _registered_answer_roles(env_id)))


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


def review_roles(env: Any = None) -> tuple[str, ...]:
    """The roles that judge another's answer with a verdict: an env instance's (its options'
    facts, else its ``review_roles`` attribute), a registered env id's (its options' facts), or,
    with no env, every reviewing role of the registered envs that state theirs."""
    if env is None:
        specs = [s for s in registered_specs() if s.options is not None]
        return tuple(dict.fromkeys(r for s in specs for r in s.facts().review_roles))
    if isinstance(env, str):
        current = spec(env)
        return tuple(current.facts().review_roles) if current.options is not None else ()
    raw = getattr(env, "unwrapped", env)
    options = getattr(raw, "options", None)
    if options is not None and hasattr(options, "facts"):
        return tuple(options.facts().review_roles)
    return tuple(getattr(raw, "review_roles", ()))
