from __future__ import annotations

import pytest

from trainers.metrics import compute_metrics, majority_correct, pass_at_k
from trainers.rollout import Episode, Turn


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
