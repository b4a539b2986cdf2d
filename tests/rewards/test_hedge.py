"""Hack resistance: hedged responses never score as correct; committed ones still do."""

from __future__ import annotations

import pytest

from rewards import get_verifier
from rewards.hedge import count_candidates

ANSWER_VERIFIERS = ["math", "gsm8k", "exact", "partial_numeric"]

HEDGED = [
    ("\\boxed{5} or \\boxed{6}", "5"),  # two boxes, different values
    ("\\boxed{6} ... no: \\boxed{5}", "5"),  # a later box does not cancel the first
    ("The answer is 5 or 6.", "5"),  # hedge inside a phrase
    ("The answer is 6 or 5.", "5"),  # order does not matter
    ("#### 1 #### 2", "2"),  # two GSM8K markers on one line
    ("#### 5\n#### 6", "5"),  # two GSM8K markers on two lines
    ("\\boxed{3, 4, 5}", "5"),  # a list in the box against a single-number reference
    ("\\boxed{5, 6}", "6"),  # two values in the box
    ("\\boxed{x = 5 \\text{ or } x = 6}", "5"),  # two equations
    (" ".join(str(i) for i in range(1, 101)), "57"),  # spray every number on the last line
    ("1, 2, 3, 4, 5, 6, 7, 8, 9, 10", "7"),  # comma list on the last line
    ("3 ... 100", "3"),  # ellipsis range
    ("<answer>5</answer> \\boxed{6}", "6"),  # tags and box disagree
    ("\\boxed{18} and #### 19", "18"),  # box and GSM8K marker disagree
    ("<answer>4; 5; 6</answer>", "5"),  # semicolon list in tags
    ("Answer: 2 and 3", "3"),  # "and" list
    # LaTeX that math-verify would otherwise read as its last value:
    ("\\boxed{5 \\\\ 6}", "6"),  # row break
    ("\\boxed{\\begin{cases} 5 \\\\ 6 \\end{cases}}", "6"),  # cases environment
    ("\\boxed{5 \\lor 6}", "6"),  # logical or
    ("\\boxed{5 \\vee 6}", "6"),  # vee
    ("\\boxed{5 | 6}", "6"),  # bar
    ("\\boxed{5 \\mid 6}", "6"),  # \mid
    ("\\boxed{5 \\cup 6}", "6"),  # union
    ("\\boxed{5 \\& 6}", "6"),  # ampersand
    ("\\boxed{5 \\hspace{1em} 6}", "6"),  # spacing command between numbers
    ("\\boxed{5 \\setminus 6}", "6"),  # any non-operator command between numbers
]


@pytest.mark.parametrize("verifier", ANSWER_VERIFIERS)
@pytest.mark.parametrize(("response", "reference"), HEDGED, ids=[h[0][:28] for h in HEDGED])
def test_hedged_responses_score_zero(verifier: str, response: str, reference: str) -> None:
    verdict = get_verifier(verifier).verify(response, reference)
    assert verdict.score == 0.0
    assert "hedged" in verdict.reason


COMMITTED = [
    ("We have 3 + 4 = 7 and 7 * 2 = 14, then 14 - 1 = 13.\n\\boxed{13}", "13"),  # worked solution
    (
        "Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 eggs.\nShe makes 9 * 2 = $<<9*2=18>>18.\n#### 18",
        "18",
    ),
    ("\\boxed{18} so #### 18", "18"),  # two markers that agree
    ("\\boxed{0.5}, that is \\boxed{\\frac{1}{2}}", "1/2"),  # agreeing markers, two spellings
    ("The answer is 18 dollars.", "18"),  # units are not candidates
    ("The answer is $2,125.", "2125"),  # thousands comma is not a list separator
    ("The answer is 5, because 2 + 3 = 5.", "5"),  # explanation repeats the value
    ("The answer is 4. Wait, I made an error. The answer is 5.", "5"),  # prose self-correction
    ("\\boxed{18 \\text{ dollars}}", "18"),  # unit in the box
    ("so 9 * 2 = 18", "18"),  # arithmetic on the last line is one candidate
    ("#### Step 1\n2 + 3 = 5\n#### Step 2\n\\boxed{5}", "5"),  # headings are not markers
    ("\\boxed{1{,}000}", "1000"),  # LaTeX thousands separator is not a list
    ("\\boxed{2\\,125}", "2125"),  # thin-space thousands separator is not a list
]


@pytest.mark.parametrize("verifier", ANSWER_VERIFIERS)
@pytest.mark.parametrize(("response", "reference"), COMMITTED, ids=[c[0][:28] for c in COMMITTED])
def test_committed_responses_still_score(verifier: str, response: str, reference: str) -> None:
    verdict = get_verifier(verifier).verify(response, reference)
    assert verdict.score == 1.0, verdict


OPERATOR_ANSWERS = [
    ("\\boxed{2 \\cdot 3}", "6"),  # an operator command joins numbers into one value
    ("\\boxed{2 \\times 10^{3}}", "2000"),  # \\times and a power
    ("\\boxed{3\\sqrt{2}}", "\\sqrt{18}"),  # coefficient and radical
    ("\\boxed{\\binom{5}{2}}", "10"),  # binomial
]


@pytest.mark.parametrize(("response", "reference"), OPERATOR_ANSWERS)
def test_expressions_are_one_candidate(response: str, reference: str) -> None:
    assert get_verifier("math").verify(response, reference).score == 1.0


def test_reference_with_several_values_allows_as_many() -> None:
    verifier = get_verifier("math")
    assert verifier.verify("\\boxed{(1, 2)}", "(1, 2)").score == 1.0  # a pair against a pair
    assert "hedged" in verifier.verify("\\boxed{1, 2, 3}", "1, 2").reason  # one too many
    # A triple is one value (math-verify reads a tuple), wrong against a pair, not a hedge.
    assert verifier.verify("\\boxed{(1, 2, 3)}", "(1, 2)").score == 0.0


CANDIDATE_COUNTS = [
    ("18", 1),  # one value
    ("3, 4, 5", 3),  # comma list
    ("2,125", 1),  # thousands separator
    ("5 or 6", 2),  # "or"
    ("x = 5 or x = -5", 2),  # equations: the value after '='
    ("9 * 2 = 18 dollars", 1),  # arithmetic then result
    ("5, 5", 1),  # repeats count once
    ("1 2 3", 3),  # whitespace between bare numbers
    ("2^{10}", 1),  # an expression is one candidate
    ("\\frac{1}{2}, \\frac{2}{4}", 1),  # equal values count once
]


@pytest.mark.parametrize(("segment", "count"), CANDIDATE_COUNTS)
def test_count_candidates(segment: str, count: int) -> None:
    assert count_candidates(segment) == count


LABEL_HEDGED = [
    "Answer: entailment or neutral",  # two labels in the answer
    "\\boxed{entailment} \\boxed{contradiction}",  # boxes disagree
    "<answer>e</answer> so \\boxed{n}",  # letters disagree
    "It could be entailment, neutral, or contradiction.",  # every label on the last line
]


@pytest.mark.parametrize("response", LABEL_HEDGED)
def test_label_hedges_score_zero(response: str) -> None:
    verdict = get_verifier("label").verify(response, "e")
    assert verdict.score == 0.0
    assert "hedged" in verdict.reason
