"""Mixed tasks (`envs.tasks.mixed`, ``make_task("unknown+arithmetic+reach")``): interleaved
problems, each scored by its own member's verifier and shown its member's instructions."""

from __future__ import annotations

import pytest

import envs
from envs.errors import UnknownTaskError
from envs.tasks import MixedTask
from envs.tasks.mixed import MixedSource
from envs.tasks.sources import ListSource, make_problem


def listed(name: str, count: int) -> ListSource:
    return ListSource([make_problem(f"{name}/{i}", f"q{i}", str(i)) for i in range(count)], name)


def test_the_source_interleaves_members_while_each_lasts():
    source = MixedSource([listed("a", 3), listed("b", 1), listed("c", 2)], ["a", "b", "c"])
    ids = [source[i]["id"] for i in range(len(source))]
    assert ids == ["a/0", "b/0", "c/0", "a/1", "c/1", "a/2"]
    assert source[-1]["id"] == "a/2"
    assert source.get("c/1")["question"] == "q1"
    with pytest.raises(IndexError):
        source[6]
    with pytest.raises(KeyError, match="in any member of 'a\\+b\\+c'"):
        source.get("d/0")


def test_a_mixed_task_builds_each_member_with_its_own_share_of_the_kwargs():
    task = envs.make_task(
        "unknown+arithmetic+reach", split="train", size=4, difficulty={"reach": [2]}
    )
    assert isinstance(task, MixedTask) and len(task.source) == 12
    first = [task.source[i]["id"] for i in range(3)]
    assert first == ["unknown/train/d1/s0/0", "arithmetic/train/d1/s0/0", "reach/train/d2/s0/0"]
    assert [task.member_of(pid).name for pid in first] == ["unknown", "arithmetic", "reach"]
    assert type(task.member_of(first[2]).verifier).__name__ == "ReachVerifier"
    overridden = envs.make_task("unknown+reach", size=2, verifier="math")
    assert {type(m.verifier).__name__ for m in overridden.members} == {"MathVerifier"}


@pytest.mark.parametrize(
    ("name", "kwargs", "error", "match"),
    [
        ("unknown+unknown", {}, ValueError, "each member once"),
        ("unknown+nope", {}, UnknownTaskError, "no task named 'nope'"),
        ("unknown+reach", {"difficulty": {"gsm8k": [1]}}, ValueError, "not members"),
    ],
)
def test_a_bad_mix_is_named(name, kwargs, error, match):
    with pytest.raises(error, match=match):
        envs.make_task(name, **kwargs)


@pytest.mark.parametrize(
    ("env_id", "formatted"),
    [
        ("math/reflection-v0", True),
        ("math/debate-v0", True),
        ("math/solve-v0", True),
        ("math/tool-v0", False),  # its roles' instructions name no answer format
    ],
)
def test_each_episode_plays_by_its_members_verifier_and_instructions(env_id, formatted):
    env = envs.make(env_id, task="unknown+reach", task_kwargs={"size": 3})
    seen = {}
    for pid in ["reach/train/d1/s0/0", "unknown/train/d1/s0/0", "reach/train/d1/s0/1"]:
        env.reset(options={"problem_id": pid})
        raw = env.unwrapped  # every agent's instruction, not only the first one to act
        shown = getattr(raw, "_instructions", None) or {"solver_0": raw._instruction}
        member = pid.split("/")[0]
        assert (
            type(env.unwrapped.verifier).__name__
            == {
                "reach": "ReachVerifier",
                "unknown": "MathVerifier",
            }[member]
        )
        seen.setdefault(member, set()).add(" | ".join(shown.values()))
    assert len(seen["reach"]) == 1
    if formatted:
        assert seen["reach"] != seen["unknown"]
        reach_format = envs.make_task("reach").answer_format
        assert any(reach_format in text for text in seen["reach"])


def test_a_mixed_episode_is_scored_by_its_member():
    env = envs.make("math/solve-v0", task="unknown+reach", task_kwargs={"size": 2})
    env.reset(options={"problem_id": "reach/train/d1/s0/0"})
    chain = env.unwrapped.problem["answer"]
    env.step(f"\\boxed{{{chain}}}")
    assert env.unwrapped.turn_results[-1]["rewards"]["solver_0"] == 1.0
    env.reset(options={"problem_id": "unknown/train/d1/s0/0"})
    env.step(f"\\boxed{{{env.unwrapped.problem['answer']}}}")
    assert env.unwrapped.turn_results[-1]["rewards"]["solver_0"] == 1.0


def test_a_callers_own_problem_plays_by_the_first_members_rules():
    env = envs.make("math/solve-v0", task="unknown+reach", task_kwargs={"size": 2})
    env.reset(options={"problem": {"id": "mine", "question": "1+1?", "answer": "2"}})
    assert type(env.unwrapped.verifier).__name__ == "MathVerifier"
