"""A run on a mixed task (``--task unknown+arithmetic+reach``, `envs.tasks.mixed`): the training log
and the evaluation report each member; the held-out guard reads every member's problems."""

from __future__ import annotations

import pytest

from envs.tasks.problems import ProblemSet
from tests.trainers.helpers import grpo_config
from trainers.algorithms.grpo import build_grpo_trainer

MIX = "unknown+arithmetic+reach"


def test_a_grpo_step_on_a_mixed_task_logs_each_task(tiny_model, tmp_path):
    trainer = build_grpo_trainer(
        tiny_model,
        "math/reflection-v0",
        {"rounds": 1, "task": MIX, "task_kwargs": {"size": 4}},
        # one step of 3 problems (3 turn slots x 2 generations each): one of each member
        grpo_config(tmp_path, max_steps=1, per_device_train_batch_size=18),
        train_problems=3,
        num_envs=8,
    )
    trainer.train()
    logs = {k for entry in trainer.state.log_history for k in entry}
    for member in MIX.split("+"):
        assert f"tasks/{member}/reward" in logs and f"tasks/{member}/accuracy" in logs


def test_a_mixed_evaluation_reports_each_member():
    """Scripted solvers right on every problem: each member's column and its verifier's
    verdict (reach's chains are scored by the reach verifier)."""
    from tests.trainers.helpers import oracle_solver_team
    from trainers.evaluation.evaluate import EvalConfig, evaluate
    from trainers.evaluation.report.tables import markdown_report

    config = EvalConfig.of(
        env_id="math/reflection-v0",
        problems=ProblemSet(MIX, levels={"unknown": [2], "arithmetic": [1], "reach": [1]}, count=6),
        env_options={"rounds": 1},
        intervals=False,
        num_envs=8,
        alone_ks=(1,),
    )
    policies = oracle_solver_team(config)
    results = evaluate(config, policies)
    members = results["metrics"]["members"]
    assert set(members) == {"unknown", "arithmetic", "reach"}
    assert all(row["problems"] == 2 and row["pass1@turn1"] == 1.0 for row in members.values())
    assert set(results["metrics"]["levels"]) == {"unknown 2", "arithmetic 1", "reach 1"}
    compare = results["compare"]
    assert set(compare["members"]) == {"unknown", "arithmetic", "reach"}
    assert compare["members"]["reach"]["alone/pass@1"] == 1.0
    report = markdown_report(results)
    assert "task reach" in report and "level reach 1" in report
    assert set(results["split_sizes"]) == {"unknown", "arithmetic", "reach"}


def test_the_held_out_guard_reads_every_member(monkeypatch):
    """A mixed run's guard compares its training problems with its evaluation problems across
    all members: a reach test problem planted among the training problems is refused."""
    from envs.tasks.problems import ProblemSet
    from trainers.evaluation.held_out import OverlapError, check_held_out
    from trainers.run.bridge import eval_config
    from trainers.run.cli import make_parser

    parser, _ = make_parser("grpo", "math/reflection-v0")
    job, config = parser.parse_args_and_config(
        ["--task", MIX, "--train_problems", "30", "--eval_problems", "9"]
    )
    evaluation = eval_config(job, "model", config)
    held = evaluation.problems.problems()
    assert {p["id"].split("/")[0] for p in held} == {"unknown", "arithmetic", "reach"}
    figures = check_held_out(job, evaluation)
    assert figures["shared"] == 0 and figures["train_problems"] == 30

    real = ProblemSet.problems

    def planted(problems):
        out = real(problems)
        if problems.split == "train":
            reach = next(p for p in held if p["id"].startswith("reach/"))
            out = [*out[:-1], reach]
        return out

    monkeypatch.setattr(ProblemSet, "problems", planted)
    with pytest.raises(OverlapError, match="1 of the 9 evaluation problems"):
        check_held_out(job, evaluation)
