"""A generated task a user registers in one line (`envs.register_generated`) gets, with no other
edit: declared levels and their defaults in runs and evaluations, hash splits, the overlap guard
and the command line (training's and ``mathteams evaluate``'s)."""

from __future__ import annotations

import random

import pytest

import envs
from envs import Levels, make_problem
from trainers.run.args import Job
from trainers.run.bridge import eval_config

CONFIG = type("Config", (), {"seed": 0, "temperature": 1.0, "max_completion_length": 8})()


def make_parity(index: int, *, difficulty: int, seed: int):
    """Problem `index` of level `difficulty`: is a sum of `difficulty + 1` numbers even?"""
    rng = random.Random(f"parity-{difficulty}-{seed}-{index}")
    numbers = [rng.randint(1, 999) for _ in range(difficulty + 1)]
    total = sum(numbers)
    question = f"Is {' + '.join(map(str, numbers))} even? Answer yes or no."
    return make_problem(f"parity/{index}", question, "yes" if total % 2 == 0 else "no")


@pytest.fixture
def parity():
    envs.register_generated("parity", make_parity, Levels((1, 2, 3), default=(2, 3)))
    yield "parity"
    envs.deregister_task("parity")


def test_a_users_generated_task_has_levels_and_hash_splits(parity):
    assert envs.tasks.is_procedural(parity) and parity in envs.procedural_tasks()
    assert envs.default_levels(parity) == [2, 3]
    test = list(envs.make_task(parity, split="test", size=40, difficulty=[2, 3]).source)
    train = list(envs.make_task(parity, split="train", size=400, difficulty=[2, 3]).source)
    assert len(test) == 40 and {p["id"].split("/")[1] for p in test} == {"test"}
    assert envs.overlap(test, train) == []  # held out by construction
    with pytest.raises(ValueError, match=r"1\.\.3"):
        envs.make_task(parity, difficulty=[4])


def test_runs_and_evaluations_default_to_its_levels_and_pass_the_overlap_guard(parity):
    from trainers.evaluation.held_out import check_held_out

    job = Job.of(env_id="math/solve-v0", task=parity, eval_problems=20, train_problems=50)
    assert job.env.difficulty == [2, 3]
    evaluation = eval_config(job, "model", CONFIG)
    assert evaluation.levels() == [2, 3] and evaluation.task == parity
    assert check_held_out(job, evaluation)["shared"] == 0


def test_the_command_lines_take_it(parity):
    from trainers.run.cli import make_parser
    from trainers.run.evaluate_cli import make_parser as evaluate_parser

    parser, _ = make_parser("grpo", "math/solve-v0")
    job, _ = parser.parse_args_and_config(["--task", parity, "--use_cpu", "true"])
    assert job.env.task == parity and job.env.difficulty == [2, 3]
    assert evaluate_parser().parse_args(["--task", parity]).task == parity


def test_levels_are_checked_where_they_are_declared():
    with pytest.raises(ValueError, match="ints >= 1"):
        Levels((0, 1))
    with pytest.raises(ValueError, match=r"holds \[4\], not among all=\(1, 2, 3\)"):
        Levels((1, 2, 3), default=(4,))
    assert Levels((1, 2)).default == (1, 2)
    with pytest.raises(ValueError, match="not generated"):
        envs.default_levels("gsm8k")
