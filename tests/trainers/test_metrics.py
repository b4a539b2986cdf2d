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
    from trainers.evaluation.evaluate import markdown_report

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
    assert m["review/balanced_accuracy"] == pytest.approx(0.625)
    assert m["review/fixed_when_flagged"] == pytest.approx(0.5)
    assert m["review/broke_right"] == pytest.approx(0.25)
    only_right = review_metrics([reviewed(0, True, True, True), reviewed(1, True, False, True)])
    assert only_right["review/balanced_accuracy"] == 0.5  # the empty class is left out
    assert review_metrics([reflection(0, [("5", True)])]) == {}


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
