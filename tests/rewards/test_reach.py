"""The ``reach`` verifier: sound, not gameable, bounded on hostile text."""

from __future__ import annotations

import time

import pytest

from rewards import canonical_answer, get_verifier, majority_vote
from rewards.reach import parse_chain

REF = "3 * 4 = 12, 12 + 8 = 20"


@pytest.fixture
def verify():
    return get_verifier("reach").verify


@pytest.mark.parametrize(
    "response",
    [
        "\\boxed{3 * 4 = 12, 12 + 8 = 20}",
        "So \\boxed{3*4=12; 12+8=20}.",
        "\\boxed{3 \\times 4 = 12, 12 + 8 = 20}",
        "\\boxed{$3 × 4 = 12$, $12 + 8 = 20$}",
        "\\boxed{3 * 4 = 12\n12 + 8 = 20.}",
    ],
)
def test_the_right_chain_in_any_spelling_scores_1(verify, response):
    verdict = verify(response, REF)
    assert verdict.score == 1.0 and verdict.extracted == REF


@pytest.mark.parametrize(
    ("response", "reason"),
    [
        ("\\boxed{20}", "not a chain of steps"),  # the target itself
        ("The answer is 20.", "no \\boxed{}"),
        ("\\boxed{4 * 3 = 12, 12 + 8 = 20}", "not the first number 3"),  # order is the puzzle
        ("\\boxed{3 * 4 = 12, 12 + 9 = 21}", "not the next number 8"),  # a number made up
        ("\\boxed{3 * 4 = 12, 12 + 8 = 21}", "12 + 8 is 20, not 21"),  # the end fudged
        ("\\boxed{3 * 4 = 13, 13 + 7 = 20}", "3 * 4 is 12, not 13"),
        ("\\boxed{3 * 4 = 12}", "1 steps; 3 numbers need 2"),  # a number left out
        ("\\boxed{3 * 4 = 12, 12 + 8 = 20, 20 * 1 = 20}", "3 steps"),  # one added
        ("\\boxed{3 * 4 = 12, 10 + 8 = 18}", "not the previous result 12"),
        ("\\boxed{3 + 4 = 7, 7 + 8 = 15}", "ends at 15, not the target 20"),
        ("\\boxed{3 * 4 = 12, 12 + 8 = 20} or \\boxed{3 + 4 = 7, 7 + 8 = 15}", "hedges"),
        ("\\boxed{3 / 4 = 0, 0 + 20 = 20}", "not a chain"),
        ("\\boxed{(3 * 4) + 8 = 20}", "not a chain"),
        ("\\boxed{3 * 4 + 8 = 20}", "not a chain"),
        ("\\boxed{__import__('os').system('true')}", "not a chain"),
    ],
)
def test_wrong_or_gamed_chains_score_0_with_the_reason(verify, response, reason):
    verdict = verify(response, REF)
    assert verdict.score == 0.0
    assert reason in verdict.reason


def test_reasoning_gyms_gamed_answers_are_refused(verify):
    # reasoning-gym's 24-game accepts 4*6*1*1 for any puzzle: here the numbers are checked.
    assert not verify(
        "\\boxed{4 * 6 = 24, 24 * 1 = 24, 24 * 1 = 24}", "4 + 6 = 10, 10 + 1 = 11, 11 + 2 = 13"
    ).correct
    # its factorisation pays 0.5 for answering N itself: here there is no partial credit.
    assert verify("\\boxed{20 = 20}", REF).score == 0.0
    assert verify("\\boxed{20 + 0 = 20}", REF).score == 0.0


def test_votes_count_the_same_steps_together():
    verify = get_verifier("reach").verify
    spelled = [
        verify(r, REF).extracted
        for r in ("\\boxed{3*4=12,12+8=20}", "\\boxed{3 × 4 = 12; 12+8 = 20}")
    ]
    wrong = verify("\\boxed{3 + 4 = 7, 7 + 8 = 15}", REF).extracted
    assert canonical_answer(spelled[0]) == canonical_answer(spelled[1]) != canonical_answer(wrong)
    assert majority_vote([wrong, *spelled]) == (spelled[0], 2)


@pytest.mark.parametrize(
    "reference", ["", "20", "3 * 4 = 13, 13 + 8 = 21", "3 * 4 = 12, 11 + 8 = 19", 7, None]
)
def test_a_bad_reference_raises_value_error_naming_it(verify, reference):
    with pytest.raises(ValueError, match="reach verifier"):
        verify("\\boxed{3 * 4 = 12, 12 + 8 = 20}", reference)


@pytest.mark.parametrize(
    "response",
    [
        "\\boxed{" + "9" * 5000 + " * " + "9" * 5000 + " = 1}",
        "\\boxed{" + ", ".join(["99999999 * 99999999 = 1"] * 11) + "}",
        "\\boxed{" * 20000,
        "{" * 50000 + "\\boxed{3*4=12,12+8=20}",
        "\\boxed{3 * 4 = 12, 12 + 8 = 20}" * 5000,
        ("1 * 1 = 1, " * 10000),
    ],
)
def test_hostile_text_is_answered_fast(verify, response):
    start = time.perf_counter()
    verdict = verify(response, REF)
    assert 0.0 <= verdict.score <= 1.0
    assert time.perf_counter() - start < 1.0  # generous: each of these takes milliseconds


def test_parse_chain_bounds_numbers_and_steps():
    assert parse_chain("1 + 1 = 2") is not None
    assert parse_chain("1" * 10 + " + 1 = 2") is None  # more than MAX_DIGITS digits
    assert parse_chain(", ".join(["1 + 1 = 2"] * 13)) is None  # more than MAX_STEPS
    assert parse_chain(5) is None
