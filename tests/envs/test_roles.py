"""`envs.roles`: the one home of agent -> role names and of the roles that state answers."""

from __future__ import annotations

import subprocess
import sys

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


def test_role_names_may_hold_underscores():
    class Underscored(AECEnv):
        possible_agents = ["lead_critic_0", "lead_critic_1", "final_answer_bot_0", "judge"]
        answer_roles = ("final_answer_bot",)

    assert role_of("lead_critic_12") == "lead_critic"
    assert env_roles(Underscored()) == ["lead_critic", "final_answer_bot", "judge"]
    assert answer_roles(Underscored()) == ("final_answer_bot",)


def test_the_role_module_imports_no_env_module():
    # envs.roles is a leaf the envs import: reading roles, or listing the built-in envs' answer
    # roles, loads env modules only through the registry's entry points, when an env is made.
    code = (
        "import sys, envs.roles as r; r.role_of('critic_0'); r.env_roles; "
        "print(sorted(m for m in sys.modules if m in "
        "{'envs.solve', 'envs.reflection', 'envs.debate', 'envs.ensemble', 'envs.tool'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_builtin_answer_roles_keep_registration_order_and_ignore_user_envs():
    assert builtin_answer_roles() == ("solver", "refiner", "debater", "variant", "executor")

    class Judged(AECEnv):
        possible_agents = ["judge_0"]
        answer_roles = ("judge",)

    envs.register("test/judged-v0", lambda **_: Judged())
    try:
        assert answer_roles("test/judged-v0") == ("judge",)
        assert "judge" not in builtin_answer_roles()  # not a built-in env
    finally:
        envs.deregister("test/judged-v0")
