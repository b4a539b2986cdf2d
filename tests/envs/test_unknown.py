"""The ``unknown`` family: find the start of a chain of additions and subtractions."""

from __future__ import annotations

import re

import pytest

import envs
from envs.tasks.unknown import LIMIT, MAX_DIFFICULTY, generate_problem, replay, undo_steps


@pytest.mark.parametrize("difficulty", range(1, MAX_DIFFICULTY + 1))
def test_replaying_the_start_reaches_the_stated_end(difficulty):
    source = envs.make_task("unknown", size=300, difficulty=difficulty).source
    for problem in source:
        meta = problem["metadata"]
        assert problem["answer"] == str(meta["start"])
        assert len(meta["steps"]) == difficulty
        lines, end = replay(meta, meta["start"])
        assert end == meta["end"] and len(lines) == difficulty
        assert problem["question"].endswith(f" = {end}.")
        value = meta["start"]
        for op, k in meta["steps"]:
            value = value + k if op == "+" else value - k
            assert 1 <= value <= LIMIT
        chain = " ".join(f"{op} {k}" for op, k in meta["steps"])
        assert problem["question"] == f"Find x: x {chain} = {end}."


@pytest.mark.parametrize("difficulty", range(1, MAX_DIFFICULTY + 1))
def test_undoing_the_steps_from_the_end_reaches_the_start(difficulty):
    for problem in envs.make_task("unknown", size=100, difficulty=difficulty).source:
        meta = problem["metadata"]
        undo = undo_steps(meta)
        assert [k for _, k in undo] == [k for _, k in reversed(meta["steps"])]
        assert all(u != op for (u, _), (op, _) in zip(undo, reversed(meta["steps"]), strict=True))
        value = meta["end"]
        for op, k in undo:
            value = value + k if op == "+" else value - k
        assert value == meta["start"]


def test_a_wrong_start_misses_the_end_by_its_own_error():
    problem = generate_problem(7, difficulty=3)
    meta = problem["metadata"]
    for error in (-5, -1, 2, 13):
        _, end = replay(meta, meta["start"] + error)
        assert end - meta["end"] == error


def test_the_question_hides_the_start():
    for problem in envs.make_task("unknown", size=200, difficulty=[1, 2, 3]).source:
        assert re.fullmatch(r"Find x: x( [+-] \d){1,3} = \d+\.", problem["question"])


def test_unknown_is_seeded_ids_round_trip_and_splits_are_disjoint():
    train = envs.make_task("unknown", size=50, difficulty=[1, 2]).source
    again = envs.make_task("unknown", size=50, difficulty=[1, 2]).source
    assert list(train) == list(again)
    for problem in train:
        assert train.get(problem["id"]) == problem
    test = envs.make_task("unknown", split="test", size=50, difficulty=[1, 2]).source
    assert not envs.overlap(test, train)
    with pytest.raises(KeyError, match="not a problem id of this unknown source"):
        train.get("arithmetic/3")
    with pytest.raises(ValueError, match=r"unknown difficulty must be an int in 1\.\.4"):
        envs.make_task("unknown", difficulty=5)


def test_unknown_plays_in_every_team_env():
    problem = envs.make_task("unknown", difficulty=2).source[0]
    answer = f"The answer is \\boxed{{{problem['answer']}}}."
    env = envs.make("math/reflection-v0", task="unknown", task_kwargs={"difficulty": 2}, rounds=1)
    env.reset(options={"problem_id": problem["id"]})
    assert "replay the steps" in env.observe("critic_0")["instruction"]
    for action in (answer, "Verdict: correct", answer):
        env.step(action)
    assert env.infos["solver_0"]["final_correct"]
    par = envs.make("math/debate-v0", task="unknown")
    obs, _ = par.reset(options={"problem_id": problem["id"]})
    assert problem["question"] in next(iter(obs.values()))["prompt"]
