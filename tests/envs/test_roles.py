"""`envs.roles`: the one home of agent -> role names and of the roles that state answers."""

from __future__ import annotations

import pytest
from pettingzoo import AECEnv

import envs
from envs.roles import answer_roles, builtin_answer_roles, env_roles, role_of


@pytest.mark.parametrize(
    ("agent", "role"),
    [
        ("critic_0", "critic"),
        ("debater_12", "debater"),
        ("solver", "solver"),
        ("my_agent", "my_agent"),
        ("_3", "_3"),
        ("a_b_1", "a_b"),
    ],
)
def test_role_of_strips_a_numeric_suffix_only(agent, role):
    assert role_of(agent) == role


@pytest.mark.parametrize("env_id", envs.list_envs())
def test_every_env_declares_answer_roles_among_its_own_roles(env_id):
    env = envs.make(env_id)
    declared = answer_roles(env)
    assert declared and set(declared) <= set(env_roles(env))
    assert answer_roles(env_id) == declared
    env.close()


def test_each_env_answers_with_the_roles_that_state_answers():
    assert answer_roles("math/reflection-v0") == ("solver", "refiner")
    assert answer_roles("math/tool-v0") == ("executor",)  # not the analyzer or the verifier
    assert "critic" not in builtin_answer_roles() and "verifier" not in builtin_answer_roles()
    assert set(builtin_answer_roles()) == {"solver", "refiner", "debater", "variant", "executor"}


def test_an_env_without_a_declaration_is_read_with_the_builtin_roles():
    class Bare(AECEnv):
        possible_agents = ["solver_0", "judge_0"]

    assert answer_roles(Bare()) == builtin_answer_roles()
    assert env_roles(Bare()) == ["solver", "judge"]
