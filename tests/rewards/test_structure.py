"""The structural checks (`rewards.structure`) answer hostile answers without math-verify, with
the verdict math-verify gives where it gives one, and say "not sure" everywhere else.

The `math` verifier tests mock `symbolic_equal` to raise: a verdict reached here came from the
structural path, whatever the machine's load (no timing assertions)."""

from __future__ import annotations

import math

import pytest

from rewards import MathVerifier
from rewards import verifiers as verifiers_module
from rewards.structure import (
    exact_value,
    log10_lower,
    log10_upper,
    looks_hostile,
    nesting_depth,
    parse_expression,
    strip_redundant,
    structural_verdict,
)

PARENS_100 = "(" * 100 + "7" + ")" * 100


@pytest.fixture
def no_symbolic(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """`symbolic_equal` replaced by one that records its calls and raises."""
    calls: list[tuple[str, str]] = []

    def refuse(reference: str, answer: str, *args: object, **kwargs: object) -> None:
        calls.append((reference, answer))
        raise AssertionError(f"math-verify was asked: {reference!r:.40} vs {answer!r:.40}")

    monkeypatch.setattr(verifiers_module, "symbolic_equal", refuse)
    return calls


# ------------------------------------------------------------------------- the verifier


def test_hundred_nested_parentheses_equal_to_the_reference_score_right(no_symbolic) -> None:
    verdict = MathVerifier().verify("\\boxed{" + PARENS_100 + "}", "7")
    assert verdict.score == 1.0, verdict
    assert no_symbolic == []


@pytest.mark.parametrize(
    ("answer", "reference", "score"),
    [
        (PARENS_100, "7", 1.0),
        (PARENS_100, "8", 0.0),
        ("(" * 100 + "x+1" + ")" * 100, "x+1", 1.0),
        ("\\left(" * 60 + "x+1" + "\\right)" * 60, "x + 1", 1.0),
        ("{" * 40 + "7" + "}" * 40, "7", 1.0),  # deeper than max_nesting braces, yet redundant
        ("[" * 40 + "7" + "]" * 40, "7.0", 1.0),  # peeled, then the numbers compare
        ("(" * 600 + "7" + ")" * 600, "7", 1.0),  # longer than max_answer_chars
        ("\\frac{" * 20 + "1" + "}{2}" * 20, "7", 0.0),  # 1/2^20: exact arithmetic
        ("\\frac{" * 20 + "1" + "}{2}" * 20, "\\frac{1}{1048576}", 1.0),
        ("\\sqrt{" * 10 + "2" + "}" * 10, "7", 0.0),  # irrational: interval arithmetic
        ("\\sqrt[3]{" * 10 + "8" + "}" * 10, "x^2+2x+1", 0.0),  # 1.0000352 against P(0) = 1
        ("\\sqrt{" * 10 + "\\pi" + "}" * 10, "\\frac{\\sqrt{3}}{2}", 0.0),
        ("10^{10^{10}}", "18", 0.0),  # a tower: magnitude
        ("2^{2^{2^{2^{100}}}}-1", "18", 0.0),  # a tower minus a small number
        ("-2^{2^{2^{2^{100}}}} + \\frac{5}{3}", "18", 0.0),
        ("\\frac{10^{10^{10}}}{7}", "18", 0.0),
        ("\\sqrt{(10^{10})!}", "18", 0.0),
        ("9^{9^{9^{9}}}", "18", 0.0),
        ("2^{2^{2^{2^{100}}}}", "x^2+2x+1", 0.0),  # a polynomial equal to a constant: at 0
        ("2^{" * 10 + "2" + "}" * 10, "18", 0.0),
        ("(10^{10})!", "18", 0.0),  # a factorial of a huge number
        ("100000!", "2\\sqrt{3}", 0.0),
        ("-10^{10^{10}}", "\\frac{1}{2}", 0.0),
        ("(1+x)^{100000}", "2\\sqrt{3}", 0.0),  # degree 100000 against a constant
        ("9^{9^{9^{9}}}", "(1, 2)", 0.0),  # one value against two, neither equal to it
        ("10^{10^{10}}", "\\$2,125", 0.0),  # a number outside the grammar: parse_number's
        ("10^{10^{10}}", "50\\%", 0.0),
        ("9^{9^{9^{9}}}", "[0, \\infty)", 0.0),
        ("(1+x)^{100000}", "\\{1, x\\}", 0.0),
        ("x^{100000}", "2", 0.0),
        ("(1+x)^{100000}", "(1+x)^{100000}", 1.0),  # the same text
        ("(1+x)^{100000}", "(x+1)^{100000}", 1.0),  # the same base and exponent
        ("(-1-x)^{100000}", "(x+1)^{100000}", 1.0),  # opposite bases, even exponent
        ("(-1-x)^{100001}", "(x+1)^{100001}", 0.0),
        ("(1+x)^{100000}", "(1+x)^{99999}", 0.0),
        ("\\frac{" + "7" * 300 + "}{" + "3" * 300 + "}", "\\frac{1}{2}", 0.0),  # long digits
        ("{" * 12 + "}" * 12, "18", 0.0),  # only empty brackets
        ("\\left(" * 40 + "1", "7", 0.0),  # unmatched brackets
        ("[" * 100 + "1", "1", 0.0),
        ("7" + ")" * 30, "7", 0.0),
    ],
)
def test_hostile_answers_are_answered_without_math_verify(
    no_symbolic, answer: str, reference: str, score: float
) -> None:
    verdict = MathVerifier().verify("\\boxed{" + answer + "}", reference)
    assert verdict.score == score, verdict
    assert no_symbolic == []


def test_huge_answers_equal_by_text_are_accepted_before_any_check(no_symbolic) -> None:
    for answer in ("10^{10^{10}}", "(10^{10})!", "9^{9^{9^{9}}}"):
        assert MathVerifier().verify(f"\\boxed{{{answer}}}", answer).score == 1.0
    assert no_symbolic == []


def test_markers_in_nested_brackets_are_one_value_not_a_hedge(no_symbolic) -> None:
    response = "\\boxed{" + PARENS_100 + "} so the answer is \\boxed{7}"
    assert MathVerifier().verify(response, "7").score == 1.0
    assert no_symbolic == []


@pytest.mark.parametrize(
    ("answer", "reference"),
    [
        ("(1+x)^{100000}", "x^{100000}+1"),  # the reference's degree is not below 100000
        ("(1+e)^{100000}", "2"),  # e may be Euler's number: a constant
        ("10^{10^{10}}", "10^{10000000000}"),  # equal, but not by text
        ("10^{10^{10}}", "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}"),  # outside the grammar
        ("10^{10^{10}}", "(1, 10^{10^{10}})"),  # one part may equal it
        ("\\frac{" * 8 + "1" + "}{0}" * 8, "[0, \\infty)"),  # not provably finite
        ("((1, 2))", "(1,2)"),  # a tuple is not peeled
        ("{}", "\\emptyset"),  # the empty set to math-verify
        ("{{{{{{}}}}}}", "\\varnothing"),
        ("{{{{{{\\sqrt{2}^{2}}}}}}}", "2"),  # equal: intervals only ever prove a difference
        ("\\sqrt[3]{" * 20 + "8" + "}" * 20, "1"),  # within math-verify's rounding of 1
        ("(((((((\\sqrt{2})))))))", "\\frac{1}{x}"),  # not a polynomial: no value at 0
    ],
)
def test_hostile_answers_without_a_sound_cheap_verdict_go_to_math_verify(
    answer: str, reference: str
) -> None:
    assert structural_verdict(answer, reference).verdict is None


def test_ordinary_answers_are_left_to_math_verify() -> None:
    # Not hostile: no power, no deep nesting, short.
    for answer, reference in (("\\frac{1}{3}", "0.333"), ("(7)", "7.0"), ("2\\sqrt{3}", "x")):
        assert structural_verdict(answer, reference).verdict is None


# ------------------------------------------------------------------------- the parts


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("((((7))))", ("7", 4)),
        ("( ( 7 ) )", ("7", 2)),
        ("{[(x+1)]}", ("x+1", 3)),
        ("\\left(\\left(7\\right)\\right)", ("7", 2)),
        ("(1)(2)", ("(1)(2)", 0)),  # the first bracket closes early
        ("((1, 2))", ("((1, 2))", 0)),  # {(1,2)} != (1,2) to math-verify: commas stay
        ("(((7)", ("(((7)", 0)),  # unbalanced
        ("(7]", ("(7]", 0)),  # mismatched
        ("\\{7\\}", ("\\{7\\}", 0)),  # a set, not a group
        ("{}", ("{}", 0)),
    ],
)
def test_strip_redundant(text: str, expected: tuple[str, int]) -> None:
    assert strip_redundant(text) == expected


def test_strip_redundant_is_linear_on_deep_input() -> None:
    deep = "(" * 200_000 + "7" + ")" * 200_000
    assert strip_redundant(deep) == ("7", 200_000)
    assert nesting_depth(deep) == 200_000


def test_nesting_depth_counts_every_bracket_kind() -> None:
    assert nesting_depth("\\frac{\\sqrt{(x)}}{[2]}") == 3
    assert nesting_depth("\\{7\\}") == 0  # escaped braces are not groups


def test_looks_hostile() -> None:
    assert not looks_hostile("\\frac{1}{2}")
    assert looks_hostile("x^2")  # a power: the magnitude and degree rules apply
    assert looks_hostile("(" * 6 + "1" + ")" * 6)
    assert looks_hostile("1" * 40)
    assert not looks_hostile("5 \\! 3")  # a thin negative space is not a factorial


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("\\frac{\\frac{1}{2}}{2}", "1/4"),
        ("2^{10}", "1024"),
        ("2^{-2}", "1/4"),
        ("5!", "120"),
        ("\\sqrt{\\frac{9}{4}}", "3/2"),
        ("2(3+4)", "14"),
        ("0.1 \\cdot 3", "3/10"),
        ("-\\left(7\\right)", "-7"),
    ],
)
def test_exact_value(text: str, value: str) -> None:
    tree = parse_expression(text)
    assert tree is not None
    assert str(exact_value(tree)) == value


@pytest.mark.parametrize(
    "text",
    ["\\sqrt{2}", "\\pi", "x+1", "\\frac{1}{0}", "0^{0}", "2^{10^{10}}", "1000!", "(1/2)!"],
)
def test_exact_value_refuses(text: str) -> None:
    tree = parse_expression(text)
    assert tree is not None
    assert exact_value(tree) is None


@pytest.mark.parametrize(
    "text",
    ["2^10", "2^{2}^{3}", "f(x)", "e^{2}", "i", "1,2", "\\sin(x)", "\\sqrt[3]", "2{3}", ""],
)
def test_outside_the_grammar(text: str) -> None:
    assert parse_expression(text) is None


def test_magnitude_bounds() -> None:
    assert log10_lower(parse_expression("10^{10^{10}}")) == pytest.approx(1e10)
    assert log10_lower(parse_expression("(10^{10})!")) > 9e10
    assert log10_lower(parse_expression("0^{5}+3")) == pytest.approx(0.477, abs=1e-3)
    assert log10_lower(parse_expression("10-3")) == -math.inf  # may cancel: no bound
    assert log10_lower(parse_expression("10^{10^{10}} - 10^{9}")) > 9.99e9  # one part dominates
    assert log10_lower(parse_expression("\\frac{10^{100}}{7}")) > 99
    assert log10_lower(parse_expression("x^{100}")) is None  # variables
    assert log10_upper(parse_expression("x^2+2x+1")) == pytest.approx(0.301, abs=1e-3)
    assert log10_upper(parse_expression("\\frac{1}{x}")) is None  # not a polynomial
    assert log10_upper(parse_expression("\\frac{10^{3}}{4}")) == pytest.approx(2.398, abs=1e-3)


def test_rounding_is_respected() -> None:
    # 1/3 and 0.33 are equal at 2 decimal places to math-verify: not decided here.
    thirds = "\\frac{" * 7 + "1" + "}{1}" * 6 + "}{3}"
    assert structural_verdict(thirds, "0.33", float_rounding=2).verdict is None
    assert structural_verdict(thirds, "0.5", float_rounding=2).verdict is False
