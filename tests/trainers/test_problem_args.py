"""Which problems on a command line (`trainers.run.problem_args`): one group derived from
`ProblemSet`'s fields, used for training, the run's evaluation and ``mathteams evaluate``, with
the flags users type today."""

from __future__ import annotations

import dataclasses

import pytest

from envs.tasks.problems import ProblemSet
from trainers.run.args import EnvArguments, EvalArguments, Job
from trainers.run.problem_args import FIELDS, add_problem_flags, problem_arguments


def test_the_group_takes_type_and_help_from_the_set_and_names_a_wrong_field():
    group = problem_arguments("G", {"levels": "lv", "count": "n", "offset": "at"}, group="g")
    fields = {f.name: f for f in dataclasses.fields(group)}
    assert list(fields) == ["lv", "n", "at"] and group._argument_group_name == "g"
    assert fields["at"].metadata["help"] == FIELDS["offset"].metadata["help"]
    assert fields["lv"].type == list[int] | None and fields["n"].type == int | None
    parsed = group(lv=[2], n=5, at=1)
    assert ProblemSet("unknown", **parsed.problem_values()) == ProblemSet(
        "unknown", levels=(2,), count=5, offset=1
    )
    with pytest.raises(ValueError, match=r"\['size'\] are no fields of ProblemSet"):
        problem_arguments("G", {"size": "n"}, group="g")


def test_training_and_its_evaluation_keep_todays_flags():
    train = {f.name for f in dataclasses.fields(EnvArguments)}
    assert {"task", "data_path", "split", "difficulty", "train_problems", "verifier"} <= train
    evaluation = {f.name for f in dataclasses.fields(EvalArguments)}
    assert {"eval_problems", "eval_split", "eval_difficulty", "eval_data_path"} <= evaluation
    assert EnvArguments.PROBLEM_FLAGS["levels"] == "difficulty"
    assert EvalArguments.PROBLEM_FLAGS["count"] == "eval_problems"


def test_the_parsed_groups_give_the_runs_two_sets():
    from trainers.run.cli import make_parser

    parser, _ = make_parser("grpo", "math/reflection-v0")
    argv = ["--task", "reach", "--difficulty", "1", "2", "--train_problems", "30"]
    argv += ["--eval_problems", "12", "--eval_split", "validation", "--eval_difficulty", "2"]
    job, _ = parser.parse_args_and_config(argv)
    assert job.train_set() == ProblemSet("reach", levels=(1, 2), count=10_000, repeat=True)
    assert job.eval_protocol().problems == ProblemSet(
        "reach", split="validation", levels=(2,), count=12
    )
    assert (
        Job.of(env_id="math/solve-v0", task="reach", eval_problems=12)
        .eval_protocol()
        .problems.count
        == 12
    )


def test_mathteams_evaluate_adds_the_group_with_its_own_flags():
    import argparse

    from trainers.run.evaluate_args import make_parser
    from trainers.run.evaluate_cli import resolve

    parser = make_parser()
    args = parser.parse_args(["--task", "reach", "--difficulty", "2", "--num_problems", "7"])
    assert (args.task, args.difficulty, args.num_problems, args.offset) == ("reach", [2], 7, None)
    chosen = resolve(args, parser.error).problems  # not given: the evaluation's own defaults
    assert chosen == ProblemSet("reach", split="test", levels=(2,), count=7, offset=0)
    with pytest.raises(SystemExit):
        parser.parse_args(["--task", "no_such_task"])  # the registered tasks are its choices
    plain = argparse.ArgumentParser()
    group = problem_arguments("G", {"task": "task", "levels": "difficulty"}, group="g")
    assert add_problem_flags(plain, group) == ["task", "difficulty"]
    assert plain.parse_args(["--difficulty", "1", "3"]).difficulty == [1, 3]
