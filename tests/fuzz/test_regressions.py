"""Regression tests for what the fuzzing found: each input here once crashed or took seconds to
hours; each now returns a normal answer in milliseconds.

The inputs that were slow live in `envs.testing.fuzz.KNOWN_SLOW`, each with the time a call on
it may take now. Here their durations are reported (the ``report_time`` fixture: the suite runs on
shared, busy machines), not asserted; ``scripts/fuzz.py`` asserts them (its ``known_slow``
target). What the calls return is asserted here.
"""

from __future__ import annotations

import time

import pytest

import envs
from envs.reflection import parse_verdict
from envs.testing.fuzz import KNOWN_SLOW, build_verifier
from envs.testing.fuzz.generators import references_for
from envs.testing.fuzz.properties import check_verdict
from rewards import canonical_answer, extract_answer, get_verifier, list_verifiers
from rewards.extract import find_boxed, prepare_reference

VERDICT_GAPS = [
    "verdict then spaces",
    "verdict then mixed whitespace",
    "verdict, colon, spaces, stars",
]
SLOW_VERIFY = [  # quadratic regular expressions over the 4000-character extraction tail
    "phrase then spaces",
    "fraction then spaces",
    "boxed fraction then spaces",
    "gsm8k marker then spaces",
    "backslashes",
    "backslashes in answer tags",
]


def test_partial_numeric_huge_relative_error_scores_zero() -> None:
    """float(Fraction) overflowed: a tiny reference and a huge answer raised OverflowError."""
    reference = "0." + "0" * 150 + "1"
    verdict = get_verifier("partial_numeric").verify("#### " + "9" * 190, reference)
    assert verdict.score == 0.0
    assert verdict.reason == "relative error inf"
    assert get_verifier("partial_numeric").verify("#### 2e-151", reference).score == 0.0


@pytest.mark.parametrize("key", VERDICT_GAPS)
def test_critic_verdict_after_long_whitespace_is_fast(key, report_time) -> None:
    """``verdict`` then a few hundred spaces backtracked cubically (a 1000-space reply: 36 s)."""
    text, bound = KNOWN_SLOW[key]
    started = time.perf_counter()
    assert parse_verdict(text) is None
    report_time(f"parse_verdict on {key!r}", time.perf_counter() - started, bound)


def test_critic_verdicts_still_parse() -> None:
    assert parse_verdict("Verdict:   **correct**") is True
    assert parse_verdict("verdict - `incorrect`") is False
    assert parse_verdict("Verdict = wrong. Verdict:right") is True


def test_reflection_env_steps_a_long_whitespace_critic_reply_quickly(report_time) -> None:
    text, bound = KNOWN_SLOW["verdict then spaces"]
    env = envs.make("math/reflection-v0", rounds=1)
    env.reset(seed=0)
    env.step("\\boxed{3}")
    started = time.perf_counter()
    env.step(text)
    report_time(
        "reflection critic step on a long-whitespace verdict", time.perf_counter() - started, bound
    )
    assert env.unwrapped.infos["critic_0"]["parse_error"] is True


@pytest.mark.parametrize("name", list_verifiers())
@pytest.mark.parametrize("key", SLOW_VERIFY)
def test_quadratic_inputs_verify_quickly(name: str, key: str, report_time) -> None:
    text, bound = KNOWN_SLOW[key]
    verifier = build_verifier(name)
    reference = references_for(name)[0]  # "e", "18", a reach chain or a colouring
    verifier.verify("\\boxed{x+1}", "1+x" if name.startswith("math") else reference)  # warm up
    started = time.perf_counter()
    verdict = verifier.verify(text, reference)
    report_time(f"{name}.verify on {key!r}", time.perf_counter() - started, bound)
    check_verdict(verdict, f"{name}.verify on {key!r}")  # a finite score in [0, 1], a reason


def test_canonical_answer_of_many_backslashes_is_fast(report_time) -> None:
    text, bound = KNOWN_SLOW["40k backslashes"]
    started = time.perf_counter()
    assert canonical_answer(text) == text  # took 39 s
    report_time("canonical_answer of 40k backslashes", time.perf_counter() - started, bound)


def test_extraction_unchanged_by_the_fixes() -> None:
    assert extract_answer("The answer is 5, because 2 + 3 = 5") == "5"
    assert extract_answer("The answer is 5 , since it is") == "5"
    assert extract_answer("Final answer: 7,, because") == "7,"
    assert extract_answer("#### 18   \nthanks") == "18"
    assert extract_answer("#### 5 #### 6") == "6"
    assert extract_answer("so \\\\boxed{4}") == "4"
    assert canonical_answer("\\text{ Paris }") == "paris"
    assert canonical_answer("\\left( 1 \\right)") == "(1)"


def test_find_boxed_on_many_unbraced_boxes_is_linear(report_time) -> None:
    """Each ``\\fbox 1`` sliced the rest of the text: 1.2 MB of them took 7 s."""
    text, bound = KNOWN_SLOW["unbraced fboxes"]
    started = time.perf_counter()
    assert len(find_boxed(text)) == 150_000
    assert prepare_reference(text) == "1"
    report_time(
        "find_boxed + prepare_reference of 1.2 MB of fboxes", time.perf_counter() - started, bound
    )


def test_every_known_slow_input_is_checked_here() -> None:
    """A new `KNOWN_SLOW` input gets a test here of what the calls on it return."""
    checked = {*VERDICT_GAPS, *SLOW_VERIFY, "40k backslashes", "unbraced fboxes"}
    assert set(KNOWN_SLOW) == checked
