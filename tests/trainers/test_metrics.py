from __future__ import annotations

import pytest

from trainers.evaluation.metrics import compute_metrics, majority_correct, pass_at_k
from trainers.rollout.records import Episode, Turn


def turn(agent, extracted, correct, index, round_=0, **info):
    return Turn(
        agent,
        {},
        "",
        [],
        [1, 2],
        [0.0, 0.0],
        float(correct),
        {"extracted": extracted, "correct": correct, "role": agent.split("_")[0], **info},
        index,
        round_,
    )


def reflection(group, answers):
    """answers: [(extracted, correct)] for solver then each refiner turn."""
    turns = [turn("solver_0", *answers[0], 0)]
    for ans, ok in answers[1:]:
        turns.append(turn("critic_0", None, True, len(turns)))
        turns.append(turn("refiner_0", ans, ok, len(turns)))
    return Episode("math/reflection-v0", f"p{group}", group, 0, turns)


def test_reflection_metrics():
    episodes = [
        reflection(0, [("5", True), ("5", True), ("6", False)]),  # right -> right -> wrong
        reflection(1, [("4", False), ("5", True), ("5", True)]),  # wrong -> right -> right
        reflection(2, [("4", False), ("3", False), ("4", False)]),
        reflection(3, [("6", False), ("5", True), ("7", False)]),  # three different answers
    ]
    m = compute_metrics(episodes)
    assert m["accuracy"] == 0.25 and m["pass1@turn1"] == 0.25 and m["pass1@turnK"] == 0.75
    # majority: 5 (right), 5 (right), 4 (wrong), tie -> first answer 6 (wrong)
    assert m["maj1@turnK"] == 0.5
    assert m["flip/wrong->right@1"] == pytest.approx(2 / 3) and m["flip/right->wrong@1"] == 0.0
    assert m["flip/wrong->right@2"] == 0.0 and m["flip/right->wrong@2"] == pytest.approx(2 / 3)
    assert m["agents"]["critic_0"]["turns"] == 8 and m["agents"]["solver_0"]["accuracy"] == 0.25


def test_agent_metrics_report_false_arithmetic_where_the_env_audits_it():
    from trainers.evaluation.report.tables import markdown_report

    played = reflection(0, [("4", False), ("5", True)])
    m = compute_metrics([played])
    assert all("false_arithmetic" not in a for a in m["agents"].values())
    assert "false arithmetic" not in markdown_report({"env": "e", "metrics": m})
    for t, n in zip(played.turns, (0, 2, 0), strict=True):
        t.info["false_equations"] = n
    played.turns.append(turn("critic_0", None, True, 3))  # a turn that does not record it
    m = compute_metrics([played])
    assert m["agents"]["critic_0"]["false_arithmetic"] == 1.0  # of the turns that record it
    assert m["agents"]["solver_0"]["false_arithmetic"] == 0.0
    report = markdown_report({"env": "e", "metrics": m})
    assert "| false arithmetic |" in report and "| 1.000 |" in report


def test_metrics_read_the_answer_roles_the_episode_recorded():
    """An episode's recorded answering roles decide its answer turns; one saved before episodes
    recorded them falls back to what the registered env declares (solver and refiner here)."""
    played = reflection(0, [("4", False), ("5", True)])
    assert compute_metrics([played])["accuracy"] == 1.0  # no record: the refiner answers last
    played.answer_roles = ("solver",)  # as an env declaring only the solver would record it
    m = compute_metrics([played])
    assert m["accuracy"] == 0.0 and m["answer_turns"] == 1


def test_parallel_metrics_use_team_answers():
    def debate(group, team):
        turns = [
            turn(f"debater_{i}", None, False, len(range(i)), r, team_answer=a, team_correct=ok)
            for r, (a, ok) in enumerate(team)
            for i in range(2)
        ]
        return Episode("math/debate-v0", "p", group, 0, turns)

    m = compute_metrics(
        [debate(0, [("4", False), ("5", True)]), debate(1, [("5", True), ("5", True)])]
    )
    assert m["pass1@turn1"] == 0.5 and m["accuracy"] == 1.0 and m["answer_turns"] == 2


def test_pass_at_k():
    assert pass_at_k(4, 0, 1) == 0.0 and pass_at_k(4, 4, 2) == 1.0
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)  # 1 - C(3,2)/C(4,2)
    episodes = [reflection(0, [("5", True)]), reflection(0, [("4", False)])]
    m = compute_metrics(episodes, ks=[1, 2, 3])
    assert m["pass@1"] == 0.5 and m["pass@2"] == 1.0 and "pass@3" not in m


def test_majority_correct_and_empty():
    assert majority_correct([("5", True), ("5.0", True), ("4", False)])
    assert not majority_correct([(None, False)])
    with pytest.raises(ValueError):
        compute_metrics([])


def reviewed(group, solver_ok, verdict, refiner_ok):
    """One round: the solver's answer, the critic's verdict on it, the refiner's revision."""
    turns = [
        turn("solver_0", "1" if solver_ok else "2", solver_ok, 0),
        turn(
            "critic_0", None, verdict is solver_ok, 1, verdict=verdict, reviewed_correct=solver_ok
        ),
        turn("refiner_0", "1" if refiner_ok else "3", refiner_ok, 2),
    ]
    return Episode("math/reflection-v0", f"p{group}", group, 0, turns)


def test_review_metrics_balance_the_verdicts_and_follow_the_revision():
    from trainers.evaluation.metrics import review_metrics

    episodes = [
        reviewed(0, True, True, True),  # right, accepted, kept
        reviewed(1, True, False, False),  # right, rejected, broken
        reviewed(2, True, True, True),
        reviewed(3, True, True, True),
        reviewed(4, False, False, True),  # wrong, flagged, fixed
        reviewed(5, False, False, False),  # wrong, flagged, not fixed
        reviewed(6, False, True, False),  # wrong, missed
        reviewed(7, False, None, False),  # wrong, no verdict: a miss
    ]
    m = compute_metrics(episodes)
    # right answers: 3/4 accepted; wrong ones: 2/4 flagged -> (0.75 + 0.5) / 2
    assert m["review/tpr"] == pytest.approx(0.75) and m["review/tnr"] == pytest.approx(0.5)
    assert m["review/balanced_accuracy"] == pytest.approx(0.625)
    assert m["review/fixed_when_flagged"] == pytest.approx(0.5)
    assert m["review/broke_right"] == pytest.approx(0.25)
    assert m["review/fixed"] == pytest.approx(0.5) and m["review/broke"] == pytest.approx(0.25)
    # the gap: 3 of the 4 accepted first answers are right (0, 2, 3; 6 is wrong), 4 of all 8
    assert m["solver/accuracy"] == m["pass1@turn1"] == 0.5
    assert m["review/gap"] == pytest.approx(0.75 - 0.5)
    assert m["review/accepted"] == pytest.approx(0.5)
    only_right = review_metrics([reviewed(0, True, True, True), reviewed(1, True, False, True)])
    assert only_right["review/balanced_accuracy"] == 0.5  # the empty class is left out
    assert only_right["review/tnr"] is None and only_right["review/fixed"] is None
    assert only_right["review/fixed_when_flagged"] == 0.0  # its first name keeps 0.0
    assert only_right["review/gap"] == pytest.approx(0.0)  # 1 of 1 accepted right, 2 of 2 all
    assert review_metrics([reflection(0, [("5", True)])]) == {}


def test_the_gap_reads_the_first_review_only_and_is_absent_when_nothing_was_accepted():
    """A later review accepting a revised answer does not make the first answer accepted; a
    critic that accepts nothing has no gap (None), not a gap of 0."""
    from trainers.evaluation.metrics import review_metrics

    def two_rounds(group, verdicts, answers):
        """solver, then (critic, refiner) twice; `answers`: correct per answer turn."""
        turns = [turn("solver_0", "1" if answers[0] else "2", answers[0], 0)]
        for r, verdict in enumerate(verdicts):
            truth = answers[r]
            info = {"verdict": verdict, "reviewed_correct": truth}
            turns.append(turn("critic_0", None, verdict is truth, len(turns), **info))
            ok = answers[r + 1]
            turns.append(turn("refiner_0", "1" if ok else "3", ok, len(turns)))
        return Episode("math/reflection-v0", f"p{group}", group, 0, turns)

    episodes = [
        two_rounds(0, [False, True], [False, True, True]),  # wrong, rejected, fixed, accepted
        two_rounds(1, [True, True], [True, True, True]),  # right, accepted twice
        two_rounds(2, [False, False], [False, False, False]),
    ]
    m = review_metrics(episodes)
    # only episode 1's first answer was accepted by the first review: 1.0 - 1/3
    assert m["review/gap"] == pytest.approx(2 / 3) and m["review/accepted"] == pytest.approx(1 / 3)
    # every review counts for the rates: right answers 3 (all accepted), wrong ones 3 (rejected)
    assert m["review/tpr"] == 1.0 and m["review/tnr"] == 1.0
    assert m["review/fixed"] == pytest.approx(1 / 3)  # of 3 rejected wrong answers, one fixed
    assert m["review/broke"] == 0.0
    rejecting = review_metrics([two_rounds(0, [False, False], [True, True, True])])
    assert rejecting["review/gap"] is None and rejecting["review/tpr"] == 0.0
    none_said = review_metrics([two_rounds(0, [None, None], [False, False, False])])
    assert none_said["review/gap"] is None and none_said["review/tnr"] == 0.0  # a miss


def test_levels_show_the_solver_the_reviews_and_the_gap():
    from trainers.evaluation.metrics import level_metrics

    def at(level, group, *args):
        episode = reviewed(group, *args)
        episode.problem_id = f"unknown/test/d{level}/s0/{group}"
        return episode

    episodes = [
        at(1, 0, True, True, True),
        at(1, 1, False, False, True),  # level 1: a perfect critic, a fix
        at(2, 2, True, False, False),  # level 2: right rejected and broken,
        at(2, 3, False, True, False),  # wrong accepted
    ]
    levels = level_metrics(episodes)
    one, two = levels["1"], levels["2"]
    assert one["solver/accuracy"] == 0.5 and one["review/tpr"] == 1.0 and one["review/tnr"] == 1.0
    assert one["review/gap"] == pytest.approx(0.5) and one["review/fixed"] == 1.0
    assert two["review/tpr"] == 0.0 and two["review/tnr"] == 0.0
    assert two["review/balanced_accuracy"] == 0.0 and two["review/broke"] == 1.0
    assert two["review/gap"] == pytest.approx(-0.5)  # it accepted only the wrong answer
    assert two["review/fixed"] is None  # no wrong answer was rejected


def test_bootstrap_intervals_resample_problems():
    from trainers.evaluation.metrics import bootstrap_intervals

    episodes = [reflection(g, [("5", g % 2 == 0)]) for g in range(40)]
    ci = bootstrap_intervals(episodes, resamples=300, seed=0)
    lo, hi = ci["pass1@turn1"]
    assert lo < 0.5 < hi and 0.2 < hi - lo < 0.45  # about +-1.96 * sqrt(0.25 / 40)
    assert bootstrap_intervals(episodes, resamples=300, seed=0) == ci
    same = [reflection(0, [("5", True)])] * 5
    assert bootstrap_intervals(same, resamples=50)["pass1@turn1"] == [1.0, 1.0]
    with pytest.raises(ValueError, match="at least one episode"):
        bootstrap_intervals([])


def test_named_faults_count_among_rejections_of_wrong_answers_only():
    from trainers.evaluation.metrics import review_metrics

    def named(group, real):
        episode = reviewed(group, False, False, False)
        if real is not None:
            episode.turns[1].info["fault_real"] = real
        return episode

    m = review_metrics([named(0, True), named(1, True), named(2, False), named(3, None)])
    assert m["review/fault_real"] == pytest.approx(2 / 3)
    assert "review/fault_real" not in review_metrics([reviewed(0, False, False, False)])
