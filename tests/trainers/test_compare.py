"""The team against the same model alone: maj@k, paired intervals, per-level figures, reports."""

from __future__ import annotations

import pytest

from envs.tasks.problems import ProblemSet
from tests.trainers.helpers import Counted
from trainers.evaluation.compare import (
    alone_problem_scores,
    compare_team_alone,
    maj_at_k,
    mean_interval,
    paired_interval,
    team_problem_scores,
)
from trainers.evaluation.metrics import level_metrics, level_of
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
    # pass@k beside maj@k: p0 has one right sample of 3, so some sample of 3 is right, but
    # the vote of 3 is wrong (4, 4, 5): a headroom of 1
    assert scores["p0"]["alone/pass@3"] == 1.0 and scores["p0"]["alone/maj@3"] == 0.0
    two = alone_problem_scores(episodes, ks=(2,))
    assert two["p0"]["alone/pass@2"] == pytest.approx(2 / 3)  # 1 - C(2,2)/C(3,2)
    assert two["p1"]["alone/pass@2"] == 1.0


def test_maj_at_k_votes_exactly_as_majority_correct():
    """maj_at_k keys each answer once; every subset's vote must still be `majority_correct`'s
    (equivalent spellings vote together, None abstains, ties go to the earliest)."""
    import itertools
    import random

    from trainers.evaluation.metrics import majority_correct

    rng = random.Random(0)
    pool = [("5", True), ("5.0", True), ("10/2", True), ("4", False), ("7", False), (None, False)]
    for _ in range(40):
        answers = [rng.choice(pool) for _ in range(rng.randint(1, 7))]
        for k in range(1, len(answers) + 1):
            subsets = list(itertools.combinations(range(len(answers)), k))
            want = sum(majority_correct([answers[i] for i in c]) for c in subsets) / len(subsets)
            assert maj_at_k(answers, k) == pytest.approx(want), (answers, k)


def test_tokens_matched_k_is_the_first_k_that_spends_the_team_tokens():
    from trainers.evaluation.compare import tokens_matched_k

    assert tokens_matched_k(100.0, 20.0, 10) == (5, False)  # 5 x 20 = 100 reaches it
    assert tokens_matched_k(101.0, 20.0, 10) == (6, False)
    assert tokens_matched_k(10.0, 20.0, 10) == (1, False)
    assert tokens_matched_k(1.1, 0.1, 20) == (11, False)  # 1.1 / 0.1 is 11.000000000000002
    assert tokens_matched_k(100.0, 20.0, 4) == (4, True)  # the alone samples run out first
    assert tokens_matched_k(0.0, 20.0, 4) == (1, False)
    assert tokens_matched_k(50.0, 0.0, 4) == (4, True)
    with pytest.raises(ValueError, match="at least one alone sample"):
        tokens_matched_k(10.0, 1.0, 0)


def test_team_spend_counts_what_each_answer_cost():
    from trainers.evaluation.compare import first_answer_turns, team_spend

    played = [
        team("p0", [("5", True), ("4", False)]),  # solver, critic, refiner: 2 tokens each
        team("p1", [("5", True), ("4", False), ("4", False)]),
    ]
    spend = team_spend(played)
    assert spend["team/first"] == {"generations": 1.0, "tokens": 2.0}
    assert spend["team/vote"] == spend["team/final"] == {"generations": 4.0, "tokens": 8.0}
    assert spend["answer_tokens"]["tokens"] == 2.0
    # an env whose first answer comes on its third turn (the refiner's): its first answer
    # spent three turns, and one answer turn costs what the refiner's did
    late = team("p2", [("5", True), ("4", False)])
    late.turns[2].completion_ids = [1] * 6
    late.answer_roles = ("refiner",)
    assert len(first_answer_turns(late)) == 3
    assert team_spend([late])["team/first"] == {"generations": 3.0, "tokens": 10.0}
    assert team_spend([late])["answer_tokens"]["tokens"] == 6.0
    # Parallel envs: the first answer is round 0's team answer, every agent's turn of it
    debaters = [
        Turn(f"debater_{i}", {}, "", [], [1] * (3 + i), [0.0] * (3 + i), 0.0,
             {"team_answer": "5", "team_correct": True}, 2 * r + i, r)
        for r in range(2) for i in range(2)
    ]  # fmt: skip
    debate = Episode("math/debate-v0", "p3", 0, 0, debaters)
    assert [t.agent for t in first_answer_turns(debate)] == ["debater_0", "debater_1"]
    assert team_spend([debate])["team/first"] == {"generations": 2.0, "tokens": 7.0}
    assert team_spend([debate])["answer_tokens"]["tokens"] == 3.5
    assert first_answer_turns(Episode("math/reflection-v0", "p", 0, 0, [])) == []


def test_alone_curve_is_maj_and_pass_at_each_k_against_compute():
    from trainers.evaluation.compare import alone_curve

    episodes = [
        *(solo("p0", s, a, ok) for s, (a, ok) in enumerate([("5", True), ("4", False)] * 2)),
        *(solo("p1", s, "4", False) for s in range(4)),
    ]
    scores = alone_problem_scores(episodes, ks=(1, 2, 3, 4))
    curve = alone_curve(scores, 4, tokens_per_sample=3.0)
    assert curve["k"] == [1, 2, 3, 4] and curve["tokens"] == [3.0, 6.0, 9.0, 12.0]
    assert curve["generations"] == [1.0, 2.0, 3.0, 4.0]
    # p0: right, wrong, right, wrong; p1 always wrong. maj@2 of p0: the pairs' earliest wins
    assert curve["alone/maj"][0] == pytest.approx(0.25)
    assert curve["alone/maj"][1] == pytest.approx(scores["p0"]["alone/maj@2"] / 2)
    assert curve["alone/pass"][3] == pytest.approx(0.5)  # p0 has a right sample, p1 none
    assert all(p >= m for p, m in zip(curve["alone/pass"], curve["alone/maj"], strict=True))
    # a k some problem lacks ends the curve
    short = alone_problem_scores([*episodes, solo("p2", 0, "5", True)], ks=(1, 2, 3, 4))
    assert alone_curve(short, 4, 3.0)["k"] == [1]


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


def test_compare_matches_tokens_and_names_the_stronger_baseline():
    """Matched in generations at k = 3 and in tokens at k = 5: both get per-level paired
    differences, the headroom pass@k - maj@k is paired per level, and the baseline is the k
    whose alone maj@k is higher."""
    ids = [f"unknown/test/d{1 + i // 4}/s0/{i}" for i in range(8)]
    team_scores = {p: {"team/vote": 1.0, "team/final": 0.0, "team/first": 0.0} for p in ids}

    def alone(maj3, maj5):
        return {
            p: {
                "alone/pass@1": 0.5,
                "alone/maj@3": maj3,
                "alone/pass@3": 1.0,
                "alone/maj@5": float(maj5 and i % 2),  # half the problems
                "alone/pass@5": 1.0,
            }
            for i, p in enumerate(ids)
        }

    c = compare_team_alone(team_scores, alone(0.0, 1.0), (3, 5), 3, resamples=100, tokens_k=5)
    assert c["baseline_k"] == 5  # maj@5 0.5 > maj@3 0.0
    one = c["levels"]["1"]
    assert one["team/vote - alone/maj@3"]["diff"] == 1.0
    assert one["team/vote - alone/maj@5"]["diff"] == 0.5
    assert one["team/final - alone/maj@5"]["diff"] == -0.5
    assert c["headroom"]["alone/pass@3 - alone/maj@3"]["diff"] == 1.0
    assert c["headroom"]["alone/pass@5 - alone/maj@5"]["diff"] == 0.5
    assert (
        one["alone/pass@5 - alone/maj@5"]["ci95"][0]
        <= 0.5
        <= one["alone/pass@5 - alone/maj@5"]["ci95"][1]
    )
    assert c["figures"]["alone/pass@5"] == 1.0
    stronger3 = compare_team_alone(team_scores, alone(1.0, 1.0), (3, 5), 3, 100, tokens_k=5)
    assert stronger3["baseline_k"] == 3
    tie = compare_team_alone(team_scores, alone(0.5, 0.0), (3, 5), 5, 100, tokens_k=3)
    assert tie["baseline_k"] == 3  # 0.5 against 0.0: the tokens-matched one
    untokened = compare_team_alone(team_scores, alone(0.0, 1.0), (3, 5), 3, 100)
    assert untokened["baseline_k"] == 3  # without tokens_k, the generations-matched k
    assert "team/vote - alone/maj@5" not in untokened["levels"]["1"]


def test_report_leads_with_the_comparison_and_names_the_final_answer():
    from trainers.evaluation.metrics import compute_metrics
    from trainers.evaluation.report.tables import markdown_report

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
    from tests.trainers.helpers import oracle_solver_team
    from trainers.evaluation.evaluate import EvalConfig, evaluate
    from trainers.evaluation.report.tables import markdown_report

    config = EvalConfig.of(
        env_id="math/reflection-v0",
        problems=ProblemSet("arithmetic", levels=[1, 2], count=4),
        env_options={"rounds": 2},
        intervals=False,
        num_envs=8,
    )
    policies = oracle_solver_team(config)
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
        "alone/pass@3": 1.0,
        "alone/maj@5": 1.0,
        "alone/pass@5": 1.0,
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
    assert report.index("(matched, baseline)") < report.index("| metric | value |")


def test_alone_plays_the_team_first_prompt_where_solve_differs():
    """Debate's first prompt is not solve-v0's: the alone baseline asks the debater's."""
    from agents import RoleMap, ScriptedPolicy
    from trainers.evaluation.evaluate import EvalConfig, evaluate

    seen = ScriptedPolicy(["\\boxed{1}"])
    config = EvalConfig.of(
        env_id="math/debate-v0",
        problems=ProblemSet("arithmetic", levels=[1], count=2),
        env_options={"rounds": 1, "num_agents": 2},
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


def _tokened_team(critic_tokens, num_problems=4, alone_ks=None):
    """Reflection over 2 rounds: a right solver (4 tokens), a critic that accepts everything
    (`critic_tokens`), a refiner that breaks the answer (4 tokens); evaluated with the model
    alone (the solver's policy: 4 tokens a sample)."""
    import envs
    from agents import OraclePolicy, RoleMap, ScriptedPolicy
    from trainers.evaluation.evaluate import EvalConfig, evaluate

    config = EvalConfig.of(
        env_id="math/reflection-v0",
        problems=ProblemSet("arithmetic", levels=[1, 2], count=num_problems),
        env_options={"rounds": 2},
        intervals=False,
        num_envs=8,
        alone_ks=alone_ks,
    )
    source = envs.make(
        "math/solve-v0", **config.protocol.env_kwargs("math/solve-v0")
    ).unwrapped.task.source
    answers = {p["question"]: p["answer"] for p in source}
    policies = RoleMap(
        {
            "solver": Counted(OraclePolicy.from_answers(answers), 4),
            "critic": Counted(ScriptedPolicy(["Verdict: correct"]), critic_tokens),
            "refiner": Counted(ScriptedPolicy(["\\boxed{-1}"]), 4),
        }
    )
    return evaluate(config, policies)


def test_evaluate_matches_the_alone_baseline_in_tokens_too(tmp_path):
    """The team spends 4 + 2 x (10 + 4) = 32 tokens an episode; the model alone 4 a sample:
    matched in tokens at k = 8, so the alone side draws 8 samples (more than the 5 the
    generations ask), votes maj@8 and draws its curve for k = 1..8. The verification gap table
    shows the critic that accepts everything: TPR 1, TNR 0, no gap, every right answer broken."""
    from trainers.evaluation.report.plots import plot_compute
    from trainers.evaluation.report.tables import markdown_report

    results = _tokened_team(critic_tokens=10)
    c = results["compare"]
    assert c["tokens_per_episode"]["team"] == 32.0 and c["alone_tokens_per_sample"] == 4.0
    assert c["matched_k"] == 5 and c["tokens_k"] == 8 and not c["tokens_k_capped"]
    assert c["alone_samples"] == 8 and results["single_agent"]["episodes"] == 4 * 8
    assert c["ks"] == [1, 3, 5, 8] and c["figures"]["alone/maj@8"] == 1.0
    assert c["paired"]["team/vote - alone/maj@8"]["diff"] == -1.0
    assert c["levels"]["1"]["team/final - alone/maj@8"]["diff"] == -1.0
    assert c["baseline_k"] == 5  # both baselines are right everywhere: the tie goes to k = 5
    assert c["curve"]["k"] == list(range(1, 9)) and c["curve"]["tokens"][-1] == 32.0
    assert c["spent"]["team/first"] == {"generations": 1.0, "tokens": 4.0}
    assert c["spent"]["team/vote"] == {"generations": 5.0, "tokens": 32.0}
    assert c["headroom"]["alone/pass@8 - alone/maj@8"]["diff"] == 0.0
    m = results["metrics"]
    assert m["review/tpr"] == 1.0 and m["review/tnr"] == 0.0 and m["review/gap"] == 0.0
    assert m["review/broke"] == 1.0 and m["review/fixed"] is None
    assert m["levels"]["2"]["review/tpr"] == 1.0 and m["levels"]["2"]["review/broke"] == 1.0
    report = markdown_report(results)
    assert "k = 8 in tokens (the team 32.0 tokens per episode, alone 4.0 per sample)" in report
    lines = report.splitlines()
    tokened = next(line for line in lines if "(tokens-matched)" in line)
    assert tokened.startswith("| team: majority vote - alone: maj@8 (tokens-matched) | -1.000 [")
    assert tokened.count("-1.000 [-1.000, -1.000]") == 3  # all, level 1, level 2
    assert "| per level | all | level 1 | level 2 |" in report
    assert "| critic TPR (right answers accepted) | 1.000 | 1.000 | 1.000 |" in report
    assert "| critic TNR (wrong answers rejected) | 0.000 | 0.000 | 0.000 |" in report
    assert "| fixed (rejected wrong -> right) | n/a | n/a | n/a |" in report
    assert "| alone pass@5 - maj@5 (headroom) | +0.000 [+0.000, +0.000] |" in report
    assert "| alone: pass@5 |" not in report  # the headroom stands for it
    assert (
        "| team: first answer (pass1@turn1) | 1.000 [1.000, 1.000] | 1.000 | 1.000 | 4.0 |"
        in report
    )
    assert report.index("| per level |") < report.index("| metric | value |")
    plot_compute({"": results}, tmp_path / "compute.png", "test")
    assert (tmp_path / "compute.png").read_bytes()[:4] == b"\x89PNG"


def test_evaluate_caps_the_tokens_matched_k_at_the_alone_samples(caplog):
    """A critic of 40 tokens: the team spends 92 tokens, 23 alone samples' worth; the alone
    side draws at most 10 and says the tokens-matched k is capped there. The generations-matched
    k stays the nearest of the ks asked for (3), not the tokens-matched one."""
    from trainers.evaluation.report.tables import markdown_report

    with caplog.at_level("WARNING", logger="trainers.evaluation.alone"):
        results = _tokened_team(critic_tokens=40, num_problems=2, alone_ks=(1, 3))
    c = results["compare"]
    assert c["alone_samples"] == 10 and c["tokens_k"] == 10 and c["tokens_k_capped"]
    assert c["matched_k"] == 3 and c["ks"] == [1, 3, 10]
    assert "tokens-matched k capped at 10" in caplog.text
    assert "capped at the 10 alone samples" in markdown_report(results)
    assert c["curve"]["k"] == list(range(1, 11))
