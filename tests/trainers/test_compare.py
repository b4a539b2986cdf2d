"""The team against the same model alone: maj@k, paired intervals, per-level figures, reports."""

from __future__ import annotations

import pytest

from trainers.evaluation.metrics import (
    alone_problem_scores,
    compare_team_alone,
    level_metrics,
    level_of,
    maj_at_k,
    mean_interval,
    paired_interval,
    team_problem_scores,
)
from trainers.rollout.records import Episode, Turn


def turn(agent, extracted, correct, index, tokens=2):
    info = {"extracted": extracted, "correct": correct, "role": agent.split("_")[0]}
    return Turn(agent, {}, "", [], [1] * tokens, [0.0] * tokens, 0.0, info, index, 0)


def solo(pid, sample, answer, correct, tokens=3):
    return Episode("math/solve-v0", pid, 0, sample, [turn("solver_0", answer, correct, 0, tokens)])


def team(pid, answers, sample=0):
    """Reflection: the solver's answer, then (critic, refiner) per further answer."""
    turns = [turn("solver_0", *answers[0], 0)]
    for ans, ok in answers[1:]:
        turns.append(turn("critic_0", None, True, len(turns)))
        turns.append(turn("refiner_0", ans, ok, len(turns)))
    return Episode("math/reflection-v0", pid, 0, sample, turns)


def test_maj_at_k_on_hand_built_samples():
    right, wrong, other = ("5", True), ("4", False), ("7", False)
    samples = [right, wrong, right]
    assert maj_at_k(samples, 1) == pytest.approx(2 / 3)
    assert maj_at_k(samples, 3) == 1.0  # 5, 4, 5 -> 5
    # pairs (in sample order): (5,4) tie -> 5 right; (5,5) right; (4,5) tie -> 4 wrong
    assert maj_at_k(samples, 2) == pytest.approx(2 / 3)
    # a wrong answer repeated beats a right one said once: maj@3 of 4, 4, 5 is wrong
    assert maj_at_k([wrong, wrong, right], 3) == 0.0
    # one right answer against two different wrong ones wins on the tie (the earliest)
    assert maj_at_k([right, wrong, other], 3) == 1.0
    # five samples, every 3-subset: right wins where it holds 2 of 3: C(3,2)*2 + C(3,3) = 7 of 10
    five = [right, right, right, wrong, wrong]
    assert maj_at_k(five, 3) == pytest.approx(7 / 10)
    # sampled subsets when there are too many: close to the exact figure, reproducible
    many = [right] * 6 + [wrong] * 6
    exact = maj_at_k(many, 5, max_subsets=1000)  # all 792 subsets
    approx = maj_at_k(many, 5, max_subsets=200, seed=1)
    assert approx == maj_at_k(many, 5, max_subsets=200, seed=1) and abs(approx - exact) < 0.1
    with pytest.raises(ValueError, match="maj@4"):
        maj_at_k(samples, 4)


def test_alone_scores_per_problem_from_its_samples():
    episodes = [
        solo("p0", 0, "5", True),
        solo("p0", 1, "4", False),
        solo("p0", 2, "4", False),
        solo("p1", 0, "1", True, tokens=5),
        solo("p1", 1, "1", True, tokens=5),
        solo("p1", 2, None, False, tokens=5),
    ]
    scores = alone_problem_scores(episodes, ks=(1, 3, 5))
    assert scores["p0"]["alone/pass@1"] == pytest.approx(1 / 3)
    assert scores["p0"]["alone/maj@3"] == 0.0 and scores["p1"]["alone/maj@3"] == 1.0
    assert scores["p0"]["alone/maj@1"] == scores["p0"]["alone/pass@1"]
    assert "alone/maj@5" not in scores["p0"]  # 3 samples cannot vote 5
    assert scores["p0"]["tokens"] == 3 and scores["p1"]["tokens"] == 5


def test_team_scores_vote_final_and_first_answer():
    scores = team_problem_scores(
        [
            team("p0", [("5", True), ("4", False), ("4", False)]),  # vote 4, final 4: wrong
            team("p1", [("4", False), ("5", True), ("5", True)]),  # vote 5, final 5: right
            team("p2", [("5", True), ("5", True), ("4", False)]),  # vote right, final wrong
        ]
    )
    assert scores["p0"] == {
        "team/vote": 0.0,
        "team/final": 0.0,
        "team/first": 1.0,
        "tokens": 10.0,
        "generations": 5.0,
    }
    assert scores["p1"]["team/vote"] == 1.0 and scores["p1"]["team/first"] == 0.0
    assert scores["p2"]["team/vote"] == 1.0 and scores["p2"]["team/final"] == 0.0


def test_paired_interval_pairs_the_same_problems():
    values = {f"p{i}": float(i % 2) for i in range(40)}
    # the same figures on both sides: paired, every resample's difference is 0
    same = paired_interval(values, dict(values), resamples=300)
    assert same["diff"] == 0.0 and same["ci95"] == [0.0, 0.0] and same["problems"] == 40
    # unpaired, the two sides' intervals are wide: pairing is what makes the above exact
    lo, hi = mean_interval(list(values.values()), resamples=300)
    assert hi - lo > 0.2
    # a shift applied to one side moves the difference and its interval by the shift
    noisy = {p: v + (0.3 if i % 3 else -0.2) for i, (p, v) in enumerate(values.items())}
    base = paired_interval(noisy, values, resamples=300, seed=3)
    shifted = paired_interval({p: v + 0.25 for p, v in noisy.items()}, values, 300, seed=3)
    assert shifted["diff"] == pytest.approx(base["diff"] + 0.25)
    assert shifted["ci95"] == pytest.approx([c + 0.25 for c in base["ci95"]])
    assert base["ci95"][0] < base["diff"] < base["ci95"][1]
    # problems only one side has are left out
    extra = paired_interval({**values, "q": 100.0}, values, resamples=50)
    assert extra["problems"] == 40 and extra["diff"] == 0.0
    # pairs are matched by id, not by position
    flipped = {p: 1.0 - v for p, v in values.items()}
    reordered = dict(sorted(flipped.items(), reverse=True))
    assert paired_interval(reordered, flipped, resamples=50)["ci95"] == [0.0, 0.0]
    with pytest.raises(ValueError, match="both sides"):
        paired_interval({"a": 1.0}, {"b": 1.0})


def test_levels_come_from_procedural_problem_ids():
    assert level_of("unknown/test/d3/s0/17") == 3 and level_of("arithmetic/train/d12/s4/0") == 12
    assert level_of("gsm8k/test/17") is None and level_of("p0") is None
    episodes = [
        team("arithmetic/test/d1/s0/0", [("5", True)]),
        team("arithmetic/test/d1/s0/1", [("5", True)]),
        team("arithmetic/test/d2/s0/2", [("4", False)]),
    ]
    levels = level_metrics(episodes)
    assert levels["1"]["accuracy"] == 1.0 and levels["2"]["accuracy"] == 0.0
    assert levels["1"]["problems"] == 2 and levels["2"]["problems"] == 1
    assert level_metrics([team("p", [("5", True)])]) == {}


def _compared(shift_level2=False):
    """Team and alone scores on 4 level-1 problems (team right, alone wrong) and 4 level-2
    problems (team wrong, alone right unless `shift_level2`)."""
    ids = [f"unknown/test/d{1 + i // 4}/s0/{i}" for i in range(8)]
    team_eps = [team(p, [("5", i < 4)] * 3) for i, p in enumerate(ids)]
    alone_eps = [
        solo(p, s, "5", (i >= 4) and not shift_level2) for i, p in enumerate(ids) for s in range(5)
    ]
    return compare_team_alone(
        team_problem_scores(team_eps), alone_problem_scores(alone_eps, (1, 3, 5)), (1, 3, 5), 5
    )


def test_compare_splits_every_figure_by_level():
    c = _compared()
    assert c["figures"]["team/vote"] == 0.5 and c["figures"]["alone/maj@5"] == 0.5
    assert c["paired"]["team/vote - alone/maj@5"]["diff"] == 0.0  # the mean hides the levels
    one, two = c["levels"]["1"], c["levels"]["2"]
    assert one["team/vote"] == 1.0 and one["alone/maj@5"] == 0.0 and one["problems"] == 4
    assert two["team/final"] == 0.0 and two["alone/pass@1"] == 1.0
    assert one["team/vote - alone/maj@5"]["diff"] == 1.0
    assert two["team/final - alone/maj@5"]["ci95"] == [-1.0, -1.0]
    assert set(c["paired"]) == {
        f"team/{t} - alone/maj@{k}" for t in ("vote", "final") for k in (1, 3, 5)
    }
    shifted = _compared(shift_level2=True)
    assert shifted["paired"]["team/vote - alone/maj@5"]["diff"] == 0.5
    assert shifted["levels"]["1"]["team/vote - alone/maj@5"]["diff"] == 1.0


def test_report_leads_with_the_comparison_and_names_the_final_answer():
    from trainers.evaluation.evaluate import markdown_report
    from trainers.evaluation.metrics import compute_metrics

    c = _compared()
    c.update(
        ks=[1, 3, 5],
        matched_k=5,
        team_generations=5,
        team_generations_mean=5.0,
        alone_samples=5,
        alone_prompt="math/solve-v0",
        tokens_per_episode={"team": 10.0, "alone@1": 3.0, "alone@3": 9.0, "alone@5": 15.0},
    )
    metrics = compute_metrics([team("p", [("5", True)])])
    report = markdown_report({"env": "math/reflection-v0", "metrics": metrics, "compare": c})
    lines = report.splitlines()
    tables = [i for i, line in enumerate(lines) if line.startswith("| ")]
    assert lines[tables[0]].startswith("| team - alone (paired by problem) | all | level 1 |")
    first_row = lines[tables[0] + 2]
    assert first_row.startswith("| team: majority vote - alone: maj@5 (matched) | +0.000 [")
    assert first_row.endswith("| +1.000 [+1.000, +1.000] | -1.000 [-1.000, -1.000] |")
    assert "| team: final answer | 0.500 [" in report
    assert "| alone: maj@5 | 0.500 [" in report and "| 0.000 | 1.000 | 15.0 |" in report
    assert "| final answer (accuracy) | 1.000 |" in report
    assert report.index("team - alone") < report.index("| metric | value |")


def test_evaluate_runs_the_alone_baseline_compute_matched():
    """A right solver, a critic that accepts, a refiner that breaks the answer: the team's first
    answer is right, its vote and final answer wrong; the same model alone (the solver's policy)
    is right with every sample. The alone baseline plays k = 5 samples per problem in one run."""
    import envs
    from agents import OraclePolicy, RoleMap, ScriptedPolicy
    from trainers.evaluation.evaluate import EvalConfig, env_kwargs_for, evaluate, markdown_report

    config = EvalConfig(
        env_id="math/reflection-v0",
        task="arithmetic",
        difficulty=[1, 2],
        num_problems=4,
        rounds=2,
        intervals=False,
        num_envs=8,
    )
    source = envs.make(
        "math/solve-v0", **env_kwargs_for(config, "math/solve-v0")
    ).unwrapped.task.source
    answers = {p["question"]: p["answer"] for p in source}
    policies = RoleMap(
        {
            "solver": OraclePolicy.from_answers(answers),
            "critic": ScriptedPolicy(["Verdict: correct"]),
            "refiner": ScriptedPolicy(["\\boxed{-1}"]),
        }
    )
    results = evaluate(config, policies)
    c = results["compare"]
    assert c["ks"] == [1, 3, 5] and c["matched_k"] == 5 and c["team_generations"] == 5
    assert c["alone_samples"] == 5 and c["alone_prompt"] == "math/solve-v0"
    assert results["single_agent"]["episodes"] == 20 and results["single_agent"]["accuracy"] == 1
    assert c["figures"] == {
        "team/vote": 0.0,
        "team/final": 0.0,
        "team/first": 1.0,
        "alone/pass@1": 1.0,
        "alone/maj@1": 1.0,
        "alone/maj@3": 1.0,
        "alone/maj@5": 1.0,
    }
    assert c["paired"]["team/final - alone/maj@5"] == {
        "diff": -1.0,
        "ci95": [-1.0, -1.0],
        "problems": 4,
    }
    assert set(c["levels"]) == {"1", "2"} and c["levels"]["2"]["team/first"] == 1.0
    assert set(results["metrics"]["levels"]) == {"1", "2"}
    some = next(iter(results["per_problem"].values()))
    assert some["team/first"] == 1.0 and some["alone/maj@5"] == 1.0 and some["level"] in (1, 2)
    assert "tokens_per_episode" in results["metrics"] and set(c["tokens_per_episode"]) == {
        "team",
        "alone@1",
        "alone@3",
        "alone@5",
    }
    report = markdown_report(results)
    assert report.index("(matched)") < report.index("| metric | value |")


def test_alone_plays_the_team_first_prompt_where_solve_differs():
    """Debate's first prompt is not solve-v0's: the alone baseline asks the debater's."""
    from agents import RoleMap, ScriptedPolicy
    from trainers.evaluation.evaluate import EvalConfig, evaluate

    seen = ScriptedPolicy(["\\boxed{1}"])
    config = EvalConfig(
        env_id="math/debate-v0",
        task="arithmetic",
        difficulty=[1],
        num_problems=2,
        rounds=1,
        num_agents=2,
        alone_ks=(1, 2),
        intervals=False,
    )
    results = evaluate(config, RoleMap({"*": seen}))
    c = results["compare"]
    assert c["alone_prompt"].startswith("the first turn of math/debate-v0")
    assert c["team_generations"] == 2 and c["matched_k"] == 2 and c["alone_samples"] == 2
    assert results["single_agent"]["episodes"] == 4
    debater_first = [o for o in seen.history if o["role"] == "debater"]
    assert len(debater_first) == 4 + 4  # 2 problems x 2 debaters, then 2 x 2 alone samples
    assert debater_first[-1]["instruction"] == debater_first[0]["instruction"]
