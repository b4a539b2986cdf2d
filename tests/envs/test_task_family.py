"""A task family is one folder plus one registration line (`envs.tasks.family`): the toy family
(`tests/envs/toy_family/`) plays, is scored by its own verifier, and its run defaults are the
env's; the embedded recipe's and the probe's lookups see it (tests/trainers/test_task_family.py)."""

from __future__ import annotations

import doctest

import pytest

import envs
from envs.tasks.coloring import FAMILY as COLORING
from rewards import get_verifier, list_verifiers
from tests.envs import toy_family
from tests.envs.toy_family import generate


@pytest.fixture
def toy():
    envs.register_family(toy_family.FAMILY)  # the one line that adds the family
    yield toy_family.FAMILY
    if "toy" in envs.list_tasks():
        envs.deregister_task("toy")


def test_a_registered_family_plays_an_episode_scored_by_its_verifier(toy) -> None:
    assert "toy" in envs.list_tasks() and envs.get_family("toy") is toy
    assert envs.procedural_tasks().count("toy") == 1 and envs.default_levels("toy") == [1, 2]
    env = envs.make("math/reflection-v0", task="toy", rounds=1)
    env.reset(seed=3)
    problem = env.unwrapped.problem
    assert problem["id"].startswith("toy/train/") and "last digit" in problem["question"]
    assert (
        env.observe("solver_0")["instruction"] == "Add the digits; end with the digit in \\boxed{}."
    )
    replies = {
        "solver_0": f"\\boxed{{{problem['answer']}}}",
        "critic_0": "Verdict: correct",
        "refiner_0": f"\\boxed{{{problem['answer']}}}",
    }
    infos = {}
    for agent in env.agent_iter():
        _, _, terminated, truncated, info = env.last()
        infos[agent] = info
        env.step(None if terminated or truncated else replies[agent])
    assert infos["solver_0"]["correct"] is True and infos["solver_0"]["score"] == 1.0
    assert infos["solver_0"]["final_correct"] is True
    verdict = get_verifier("toy_last_digit").verify("\\boxed{0}", problem["answer"])
    assert verdict.score == float(problem["answer"] == "0")


def test_its_run_defaults_are_the_envs(toy) -> None:
    reflection = envs.spec("math/reflection-v0")
    assert reflection.run_defaults("toy") == {"audit": "", "max_completion_length": 8}
    assert reflection.run_defaults("toy+unknown") == reflection.run_defaults("unknown")
    assert envs.spec("math/debate-v0").run_defaults("toy") == {}


def test_deregistering_forgets_the_family(toy) -> None:
    with pytest.raises(envs.DuplicateTaskError):
        envs.register_family(toy_family.FAMILY)
    envs.deregister_task("toy")
    assert envs.get_family("toy") is None and "toy" not in envs.list_tasks()
    assert "toy_last_digit" not in list_verifiers()
    envs.register_family(toy_family.FAMILY)  # again, as at first
    assert get_verifier("toy_last_digit").name == "toy_last_digit"


def test_its_scorer_documents_a_pass_and_a_fail() -> None:
    assert doctest.testmod(generate).failed == 0


def test_the_built_in_family_is_declared_once() -> None:
    assert [family.name for family in envs.families()] == ["coloring"]
    assert envs.get_family("coloring") is COLORING
    assert envs.spec("math/reflection-v0").run_defaults("coloring") == {
        "audit": "",
        "refiner_mode": "patch",
        "feedback": "fault",
        "max_completion_length": 160,
    }
    assert get_verifier("coloring").name == "coloring"
