"""Every registered env passes PettingZoo's API tests and `envs.check_env`, with no edit here."""

from __future__ import annotations

import dataclasses
import warnings

import pytest

import envs
from envs.reflection import ReflectionEnv
from envs.solve import SolveEnv


@pytest.mark.parametrize("env_id", envs.list_envs(), ids=str)
def test_check_env(env_id):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any warning not on check_env's allow-list fails
        envs.check_env(env_id)


FACT_OPTIONS = [{}, {"team_reward": True}, {"critic_reward": "outcome"}, {"rounds": 1}]


@pytest.mark.parametrize("env_id", envs.list_envs(), ids=str)
def test_an_envs_facts_are_what_the_env_does(env_id):
    """The facts the trainers read without building an env (agents, roles, whether rewards are
    immediate) are the built env's own, under several option sets."""
    spec = envs.spec(env_id)
    fields = {f.name for f in dataclasses.fields(spec.options)} if spec.options else set()
    for options in FACT_OPTIONS:
        if not set(options) <= fields:
            continue
        facts = spec.facts(**options)
        env = envs.make(env_id, **options)
        try:
            raw = env.unwrapped
            assert tuple(raw.possible_agents) == facts.agents
            assert bool(raw.immediate_rewards) == facts.immediate_rewards, options
            assert tuple(raw.answer_roles) == facts.answer_roles
        finally:
            env.close()


def test_check_env_accepts_instances_and_factories():
    env = envs.make("math/reflection-v0", rounds=1)
    envs.check_env(env)
    envs.check_env(lambda: envs.make("math/debate-v0", num_agents=2, rounds=1))


class LeakyEnv(SolveEnv):
    def observe(self, agent):
        obs = super().observe(agent)
        return {**obs, "prompt": obs["prompt"] + f" (psst: {self.problem['answer']})"}


class FragileEnv(SolveEnv):
    def step(self, action):
        if action is not None and len(action) > 100_000:
            raise MemoryError("too long")
        super().step(action)


class SloppyTypesEnv(SolveEnv):
    def _check_action(self, agent, action):
        return str(action), False


class ReasonEnv(SolveEnv):
    """Shows the verifier's reason ("wrong answer: 7 != 97531") in the info."""

    def _show(self, acting, rewards, graded, to_come):
        super()._show(acting, rewards, graded, to_come)
        return dict(rewards), dict(graded)


class PeekingEnv(ReflectionEnv):
    """Pays each reward, and shows each grade (less the reason), on the step it is for: the
    envs before the no-peeking rule, whose round-2 refiner was handed whether its round-1 answer was right."""

    def __init__(self):
        super().__init__(rounds=2)

    def _show(self, acting, rewards, graded, to_come):
        super()._show(acting, rewards, graded, to_come)
        return dict(rewards), {a: {**i, "reason": ""} for a, i in graded.items()}


@pytest.mark.parametrize(
    ("env_cls", "rule"),
    [
        (LeakyEnv, "never contain the reference answer"),
        (FragileEnv, "too long"),
        (SloppyTypesEnv, "non-string action raises TypeError"),
        (ReasonEnv, "no info contains the reference answer"),
        (PeekingEnv, "nothing handed to an agent before its turn depends on whether an answer"),
    ],
)
def test_check_env_catches_broken_envs(env_cls, rule):
    with pytest.raises((AssertionError, MemoryError), match=rule):
        envs.check_env(lambda: env_cls())


def test_check_env_skips_no_peeking_for_the_trainers_view():
    with pytest.warns(UserWarning, match="per_step_rewards=True.*no-peeking check is skipped"):
        envs.check_env(lambda: envs.make("math/solve-v0", per_step_rewards=True), num_cycles=2)
