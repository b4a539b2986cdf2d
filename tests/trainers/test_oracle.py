"""The oracle row of a ``coloring`` evaluation (`trainers.evaluation.oracle`): the learned
solver's own first answers (sampled afresh), the verifier as critic, the scripted min-conflicts patch as refiner,
set against the learned team problem by problem."""

from __future__ import annotations

import random

from agents import RoleMap, ScriptedPolicy
from envs.tasks.coloring import ColoringFaults
from envs.tasks.coloring.rows import min_conflicts, slip, solution, solve_reply
from envs.tasks.problems import ProblemSet
from trainers.evaluation.config import EvalConfig
from trainers.evaluation.evaluate import evaluate
from trainers.evaluation.oracle import ScriptedPatcher, scripted_repair
from trainers.evaluation.report.tables import markdown_report

PROTOCOL = {"rounds": 2, "refiner_mode": "patch", "feedback": "fault"}


def _config(task: str = "coloring", env_id: str = "math/reflection-v0") -> EvalConfig:
    return EvalConfig.of(
        env_id=env_id,
        problems=ProblemSet(task, split="validation", levels=[2, 3], count=6),
        env_options=dict(PROTOCOL) if env_id == "math/reflection-v0" else {},
        alone_ks=(1,),
        intervals=False,
        num_envs=4,
    )


def _after_scripted_rounds(problem: dict, colours: list[str], rounds: int) -> bool:
    """Whether `rounds` rounds of a sound check and the min-conflicts patch of the first clash
    leave `colours` right."""
    colours = list(colours)
    for _ in range(rounds):
        patch = min_conflicts(problem, colours)
        if patch is None:
            break
        colours[patch[0]] = patch[1]
    return colours == solution(problem)


def test_the_oracle_row_patches_the_solvers_own_answers_and_is_paired_with_the_team():
    config = _config()
    problems = config.problems.problems()
    rng = random.Random(0)
    slipped = {p["question"]: slip(p, rng) for p in problems}
    solver = ScriptedPolicy(lambda obs: solve_reply({"metadata": {}}, slipped[obs["question"]]))
    team = RoleMap(
        {
            "solver": solver,
            "critic": ScriptedPolicy(["OK. Verdict: correct"]),  # accepts every wrong answer
            "refiner": ScriptedPolicy(["Keep."]),
        }
    )
    results = evaluate(config, team)
    expected = {
        p["id"]: float(_after_scripted_rounds(p, slipped[p["question"]], 2)) for p in problems
    }
    per_problem = results["per_problem"]
    assert {pid: per_problem[pid]["oracle/final"] for pid in expected} == expected
    assert all(per_problem[pid]["team/final"] == 0.0 for pid in expected)
    assert sum(expected.values()) > 0  # the patch fixes some slips within two rounds
    diff = results["oracle"]["team_minus_oracle"]["team/final"]
    assert diff["problems"] == len(problems)
    assert abs(diff["diff"] + sum(expected.values()) / len(expected)) < 1e-9
    report = markdown_report(results)
    assert "| oracle: sound critic, scripted patch |" in report
    assert report.index("oracle:") < report.index("| metric | value |")


def test_the_scripted_patcher_reads_the_latest_answer_and_the_named_clash():
    import envs

    config = _config()
    problem = config.problems.problems()[0]
    wrong = slip(problem, random.Random(3))
    env = envs.make("math/reflection-v0", task="coloring", **PROTOCOL).unwrapped
    env.reset(options={"problem": problem})
    env.step(solve_reply(problem, wrong))
    faults = ColoringFaults()
    first = faults.faults(solve_reply(problem, wrong), problem["answer"])[0]
    env.step(f"BAD {first}. Verdict: incorrect")
    patcher = ScriptedPatcher(faults, {problem["question"]: problem["answer"]})
    vertex, colour = min_conflicts(problem, wrong)
    assert patcher.act([env.observe("refiner_0")]) == [f"\\boxed{{{vertex} {colour}}}"]
    env.reset(options={"problem": problem})
    env.step(solve_reply(problem))
    env.step("OK. Verdict: correct")
    assert patcher.act([env.observe("refiner_0")]) == ["Keep."]  # nothing named
    unknown = {**env.observe("refiner_0"), "question": "another problem"}
    assert patcher.act([unknown]) == ["Keep."]


def test_only_a_reflection_team_on_a_task_with_a_scripted_repair_gets_an_oracle_row():
    assert scripted_repair(_config()) is not None
    assert scripted_repair(_config("arithmetic")) is None
    assert scripted_repair(_config(env_id="math/debate-v0")) is None
