"""`envs.tasks.problems.ProblemSet`: which problems, as an env takes them (`problems=`) and as
its keywords give them, with the same episodes."""

from __future__ import annotations

import pytest

import envs
from envs.tasks.problems import ProblemSet


def _first_prompts(env, seeds=range(4)):
    out = []
    for seed in seeds:
        env.reset(seed=seed)
        out.append(env.observe(env.agent_selection)["prompt"])
    return out


@pytest.mark.parametrize(
    "problems",
    [
        ProblemSet("unknown", split="test", levels=(2, 3), count=6),
        ProblemSet("reach", split="validation", levels=(1,), count=3, offset=2),
        ProblemSet("unknown+reach", split="test", count=4),
        ProblemSet("arithmetic", levels=(1, 2), verifier="math"),
    ],
)
def test_an_env_given_a_set_plays_what_its_keywords_play(problems):
    by_set = envs.make("math/reflection-v0", problems=problems, rounds=1)
    by_keywords = envs.make("math/reflection-v0", **problems.env_kwargs(), rounds=1)
    assert by_set.unwrapped.options == by_keywords.unwrapped.options
    assert _first_prompts(by_set) == _first_prompts(by_keywords)
    assert len(by_set.unwrapped.task.source) == len(by_keywords.unwrapped.task.source)


def test_keywords_override_the_sets_fields_and_a_wrong_set_is_named():
    problems = ProblemSet("unknown", split="test", levels=(2,), count=5)
    env = envs.make("math/solve-v0", problems=problems, split="validation")
    assert env.unwrapped.options.split == "validation"
    assert env.unwrapped.options.task_kwargs == {"difficulty": [2], "size": 5}
    assert envs.spec("math/solve-v0").options_for(problems=problems).split == "test"
    with pytest.raises(TypeError, match=r"problems must be an envs\.tasks\.problems\.ProblemSet"):
        envs.make("math/solve-v0", problems={"task": "unknown"})


def test_a_set_checks_its_counts_and_freezes_its_levels():
    with pytest.raises(ValueError, match="count must be >= 0"):
        ProblemSet("unknown", count=-1)
    with pytest.raises(ValueError, match="offset must be >= 0"):
        ProblemSet("unknown", offset=-2)
    assert ProblemSet("unknown", levels=[2, 3]).levels == (2, 3)
    mixed = ProblemSet("unknown+reach", levels={"unknown": [2], "reach": [1, 2]})
    assert mixed.level_list() == {"unknown": [2], "reach": [1, 2]}
    assert hash(mixed) == hash(
        ProblemSet("unknown+reach", levels={"unknown": (2,), "reach": (1, 2)})
    )
    assert ProblemSet("unknown").level_list() == envs.default_levels("unknown")


def test_a_test_set_shares_no_problem_with_the_train_set_and_counts_from_its_offset():
    test = ProblemSet("unknown", split="test", levels=(2, 3), count=10, offset=3)
    train = ProblemSet("unknown", split="train", levels=(2, 3), count=200)
    assert test.overlap(train) == []
    whole = ProblemSet("unknown", split="test", levels=(2, 3), count=13).problems()
    assert [p["id"] for p in test.problems()] == [p["id"] for p in whole[3:]]
