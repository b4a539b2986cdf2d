"""The ``reach`` family: put +, - or * between numbers to reach a target."""

from __future__ import annotations

import itertools
import re

import pytest

import envs
from envs.tasks.reach import (
    LIMIT,
    MAX_DIFFICULTY,
    OPERATORS,
    evaluate,
    generate_problem,
    reaches,
    solutions,
)
from rewards import get_verifier


@pytest.mark.parametrize("difficulty", range(1, MAX_DIFFICULTY + 1))
def test_every_problem_has_one_right_chain_and_its_answer_is_that_chain(difficulty):
    verifier = get_verifier("reach")
    for problem in envs.make_task("reach", size=200, difficulty=difficulty).source:
        meta = problem["metadata"]
        numbers, target = meta["numbers"], meta["target"]
        assert len(numbers) == difficulty + 2 and all(2 <= n <= 9 for n in numbers)
        # Brute force over every operator sequence, independent of `reaches`' early stop.
        hits = [
            ops
            for ops in itertools.product(OPERATORS, repeat=len(numbers) - 1)
            if evaluate(numbers, ops)[-1] == target
        ]
        assert hits == [tuple(meta["operators"])]
        assert all(1 <= v <= LIMIT for v in evaluate(numbers, meta["operators"]))
        assert verifier.verify(f"\\boxed{{{problem['answer']}}}", problem["answer"]).correct
        assert problem["question"].startswith(
            f"Reach {target} from {', '.join(map(str, numbers))} in this order"
        )


def test_reaches_counts_up_to_its_stop():
    assert reaches([2, 2], 4) == 2  # 2 + 2 and 2 * 2
    assert reaches([2, 2], 4, stop=1) == 1
    assert reaches([2, 3], 6) == 1
    assert reaches([2, 3], 7) == 0
    assert solutions([2, 2, 2], 6) == [("+", "+"), ("*", "+")]  # (2 + 2) + 2, (2 * 2) + 2
    assert reaches([2, 2, 2], 6, stop=99) == 2


def test_the_question_hides_the_operators():
    for problem in envs.make_task("reach", size=200, difficulty=[1, 2, 3]).source:
        assert re.fullmatch(
            r"Reach \d+ from \d(, \d){2,4} in this order with \+ - \* \(left to right\)\.",
            problem["question"],
        )


def test_reach_is_seeded_ids_round_trip_and_splits_are_disjoint():
    train = envs.make_task("reach", size=60, difficulty=[1, 2, 3]).source
    again = envs.make_task("reach", size=60, difficulty=[1, 2, 3]).source
    assert list(train) == list(again)
    for problem in train:
        assert train.get(problem["id"]) == problem
        assert problem == generate_problem(
            problem["metadata"]["candidate"], difficulty=problem["metadata"]["difficulty"]
        ) | {"id": problem["id"], "metadata": problem["metadata"]}
    test = envs.make_task("reach", split="test", size=60, difficulty=[1, 2, 3]).source
    assert not envs.overlap(test, train)
    with pytest.raises(KeyError, match="not a problem id of this reach source"):
        train.get("unknown/train/d1/s0/3")
    with pytest.raises(ValueError, match=r"reach difficulty must be an int in 1\.\.4"):
        envs.make_task("reach", difficulty=5)


def test_reach_plays_in_every_team_env():
    problem = envs.make_task("reach", difficulty=2).source[0]
    answer = f"The answer is \\boxed{{{problem['answer']}}}."
    env = envs.make("math/reflection-v0", task="reach", task_kwargs={"difficulty": 2}, rounds=1)
    env.reset(options={"problem_id": problem["id"]})
    assert "replay its operators" in env.observe("critic_0")["instruction"]
    for action in (answer, "Verdict: correct", answer):
        env.step(action)
    assert env.infos["solver_0"]["final_correct"]
    par = envs.make("math/debate-v0", task="reach")
    obs, _ = par.reset(options={"problem_id": problem["id"]})
    assert problem["question"] in next(iter(obs.values()))["prompt"]


@pytest.mark.parametrize("env_id", ["math/reflection-v0", "math/debate-v0", "math/solve-v0"])
def test_reach_passes_check_env(env_id):
    envs.check_env(envs.make(env_id, task="reach"))
