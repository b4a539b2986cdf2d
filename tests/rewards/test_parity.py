"""Parity with plain math-verify on free-form answers, by category, without giving up hedging.

Each category lists correct answers the `math` verifier must accept and near misses it must
reject, so a verifier that accepted everything fails as surely as one that accepted nothing.
"""

from __future__ import annotations

import pytest

from rewards import MathVerifier, NumericVerifier
from rewards.extract import analyze

# (category, response, reference, score)
CASES = [
    # Answers stated without \boxed{}: the final math expression.
    ("no_box", "Adding them, the sum is $\\frac{7}{12}$", "\\frac{7}{12}", 1.0),  # inline $...$
    ("no_box", "Therefore we get \\(2x^2-3\\)", "2x^2 - 3", 1.0),  # \(...\)
    ("no_box", "Simplifying:\n\\[\n4\\sqrt{5}\n\\]", "\\sqrt{80}", 1.0),  # display math over lines
    ("no_box", "Finally\n$$\n\\frac{\\pi}{6}\n$$\nas claimed.", "\\pi/6", 1.0),  # $$...$$
    ("no_box", "Answer: $y = 3$", "3", 1.0),  # "Answer:" form
    ("no_box", "so the value is $\\frac{7}{13}$", "\\frac{7}{12}", 0.0),  # wrong fraction
    ("no_box", "Therefore we get \\(2x^2+3\\)", "2x^2 - 3", 0.0),  # wrong sign
    ("no_box", "It is $4$ or $5$.", "5", 0.0),  # two final expressions joined by "or"
    ("no_box", "With \\(x^2\\) in hand there are 17 apples", "17", 1.0),  # a number follows
    # Intervals, including inside $...$ (once read as the number 1).
    ("interval", "so x lies in $[0,1)$", "[0,1)", 1.0),  # half-open interval in $...$
    ("interval", "so x lies in $[0,1]$", "[0,1)", 0.0),  # closed is not half-open
    (
        "interval",
        "\\boxed{(-\\infty, -2] \\cup [2, \\infty)}",
        "(-\\infty,-2]\\cup[2,\\infty)",
        1.0,
    ),
    ("interval", "\\boxed{(-\\infty, 2)}", "(-\\infty, 2]", 0.0),  # open end differs
    # Relations in LaTeX and ASCII, either way round.
    ("relation", "\\boxed{x \\geq 7}", "x >= 7", 1.0),  # \geq vs >=
    ("relation", "\\boxed{7 \\leq x}", "x \\ge 7", 1.0),  # reversed
    ("relation", "\\boxed{x \\neq 4}", "x != 4", 1.0),  # \neq vs !=
    ("relation", "\\boxed{x > 7}", "x \\geq 7", 0.0),  # strict is not non-strict
    ("relation", "\\boxed{x \\leq 7}", "x \\geq 7", 0.0),  # wrong direction
    # Equations of one line or conic in another form.
    ("equation", "\\boxed{y = 3x - 2}", "3x - y - 2 = 0", 1.0),  # slope-intercept vs general
    ("equation", "\\boxed{x^2 + y^2 = 9}", "x^2 + y^2 - 9 = 0", 1.0),  # circle
    ("equation", "\\boxed{y = 3x + 2}", "3x - y - 2 = 0", 0.0),  # another line
    # Matrices in any environment.
    (
        "matrix",
        "\\boxed{\\begin{bmatrix} 2 & 0 \\\\ 1 & 3 \\end{bmatrix}}",
        "\\begin{pmatrix} 2 & 0 \\\\ 1 & 3 \\end{pmatrix}",
        1.0,
    ),  # bmatrix vs pmatrix
    (
        "matrix",
        "\\boxed{\\left(\\begin{array}{c} 4 \\\\ -1 \\end{array}\\right)}",
        "\\begin{pmatrix} 4 \\\\ -1 \\end{pmatrix}",
        1.0,
    ),  # array in parentheses
    (
        "matrix",
        "\\boxed{\\begin{pmatrix} 2 & 0 \\\\ 3 & 1 \\end{pmatrix}}",
        "\\begin{pmatrix} 2 & 0 \\\\ 1 & 3 \\end{pmatrix}",
        0.0,
    ),  # entries swapped
    # Short LaTeX forms.
    ("short_latex", "\\boxed{\\frac25}", "0.4", 1.0),  # \frac25
    ("short_latex", "\\boxed{3\\sqrt5}", "\\sqrt{45}", 1.0),  # \sqrt5 after a coefficient
    ("short_latex", "\\boxed{\\cfrac{3}{8}}", "\\frac{3}{8}", 1.0),  # \cfrac
    ("short_latex", "\\boxed{\\tfrac{5}{6}}", "\\frac{5}{6}", 1.0),  # \tfrac
    ("short_latex", "\\boxed{3\\sqrt6}", "\\sqrt{45}", 0.0),  # wrong radicand
    # Decimal commas and spaced thousands.
    ("number_format", "\\boxed{2,75}", "2.75", 1.0),  # decimal comma
    ("number_format", "\\boxed{0{,}5}", "1/2", 1.0),  # LaTeX decimal comma
    ("number_format", "\\boxed{25 000}", "25000", 1.0),  # spaced thousands
    ("number_format", "#### 3 141 592", "3141592", 1.0),  # several spaced groups
    ("number_format", "\\boxed{2,75}", "2.57", 0.0),  # decimal comma, wrong value
    ("number_format", "\\boxed{25 001}", "25000", 0.0),  # spaced thousands, wrong value
    ("number_format", "\\boxed{2, 7}", "7", 0.0),  # a list, not a decimal: hedge
    # Mixed numbers and the empty set.
    ("mixed_empty", "\\boxed{4\\frac{2}{3}}", "\\frac{14}{3}", 1.0),  # mixed vs improper
    ("mixed_empty", "so \\boxed{3\\frac{1}{4}}, that is \\boxed{\\frac{13}{4}}", "13/4", 1.0),
    ("mixed_empty", "\\boxed{4\\frac{1}{3}}", "\\frac{14}{3}", 0.0),  # wrong mixed number
    ("mixed_empty", "\\boxed{\\varnothing}", "\\emptyset", 1.0),  # \varnothing vs \emptyset
    ("mixed_empty", "\\boxed{\\emptyset}", "\\varnothing", 1.0),  # and the other way
    ("mixed_empty", "\\boxed{\\{0\\}}", "\\emptyset", 0.0),  # a set with one element
    # A phrase's leading expression, explained by the rest of its sentence (math-verify reads it).
    ("prose_final", "The final answer is $\\frac{2}{3}$ of the class, or 8 people.", "2/3", 1.0),
    ("prose_final", "The final answer is $\\frac{1}{4}$ and there are 12 left.", "1/4", 1.0),
    ("prose_final", "The final answer is $\\frac{1}{4}$ and 12", "1/4", 0.0),  # a list: hedge
    ("prose_final", "The answer is \\(\\frac{5}{6}\\) of the cake, 10 slices.", "5/6", 1.0),
    ("prose_final", "The final answer is $\\frac{2}{3}$ of the class, or 8 people.", "8", 0.0),
    ("prose_final", "The final answer is $\\frac{1}{4}$ or $12$ marbles.", "12", 0.0),  # hedge
    ("prose_final", "The final answer is $4$, or 5 of them.", "5", 0.0),  # an alternative
    (
        "prose_final",
        "Bo wins a round with (1/2) * (2/3) = 1/3 Therefore, the chance that Bo wins is 1/3.",
        "1/3",
        1.0,
    ),  # a one-line essay: its conclusion, where "Therefore" starts it without a period
    (
        "prose_final",
        "Bo wins a round with (1/2) * (2/3) = 1/3 Therefore, the chance is 1/3 or 1/2.",
        "1/3",
        0.0,
    ),  # the conclusion hedges
    # Hacking stays unrewarded.
    (
        "hedge",
        "\\boxed{\\frac{1}{2}} or maybe \\boxed{\\frac{1}{3}}",
        "\\frac12",
        0.0,
    ),  # two values
    ("hedge", "\\boxed{\\sqrt2} \\boxed{\\sqrt3} \\boxed{\\sqrt5}", "\\sqrt3", 0.0),  # a spray
    ("hedge", "\\boxed{1, 2, 3, 4, 5, 6, 7, 8}", "5", 0.0),  # list in one box
    ("hedge", "The answer is $6$ or $7$", "7", 0.0),  # phrase with two values
    ("hedge", "\\boxed{\\frac{\\sqrt2}{2}} and \\boxed{\\sqrt{2}/2}", "\\frac{1}{\\sqrt2}", 1.0),
]

IDS = [f"{c[0]}-{i}" for i, c in enumerate(CASES)]


@pytest.fixture(scope="module")
def verifier() -> MathVerifier:
    return MathVerifier()


@pytest.mark.parametrize(("category", "response", "reference", "score"), CASES, ids=IDS)
def test_math_parity(
    verifier: MathVerifier, category: str, response: str, reference: str, score: float
) -> None:
    verdict = verifier.verify(response, reference)
    assert verdict.score == score, (category, verdict)


def test_every_category_has_accepts_and_rejects() -> None:
    for category in {c[0] for c in CASES}:
        scores = {c[3] for c in CASES if c[0] == category}
        assert scores == {0.0, 1.0} or category == "hedge", category


@pytest.mark.parametrize(
    ("response", "reference"),
    [
        ("\\boxed{1 000}", "1000"),  # spaced thousands
        ("\\boxed{3,5}", "3.5"),  # decimal comma
        ("\\boxed{15\\frac{39}{40}}", "639/40"),  # mixed number
        ("\\boxed{15\\frac{39}{40}} = \\boxed{\\frac{639}{40}}", "\\frac{639}{40}"),  # both forms
    ],
)
def test_number_formats_take_the_fast_path(
    monkeypatch: pytest.MonkeyPatch, response: str, reference: str
) -> None:
    import rewards.verifiers as module

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("plain numbers must not reach math-verify")

    monkeypatch.setattr(module, "symbolic_equal", forbidden)
    assert MathVerifier().verify(response, reference).score == 1.0


def test_numeric_verifier_reads_the_same_number_formats() -> None:
    verifier = NumericVerifier()
    assert verifier.verify("#### 1 000", "1000").score == 1.0
    assert verifier.verify("The answer is 2,5 kg.", "2.5").score == 1.0
    assert verifier.verify("#### 1 001", "1000").score == 0.0


def test_final_math_needs_nothing_numeric_after_it() -> None:
    assert analyze("so $x = 4$.\n\nHope that helps!").answer == "x = 4"
    assert analyze("so $x = 4$ and then 9 more").answer == "9"  # the last number wins
    assert analyze("It costs $5 and $6 more, 11 in all").answer == "11"  # dollars, not math


def test_many_disagreeing_markers_are_refused_without_symbolic_checks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import rewards.verifiers as module

    calls = []
    real = module.symbolic_equal
    monkeypatch.setattr(module, "symbolic_equal", lambda *a, **k: calls.append(a) or real(*a, **k))
    spray = " ".join(f"\\boxed{{\\sqrt{{{n}}}}}" for n in range(2, 40))
    verdict = MathVerifier().verify(spray, "\\sqrt{39}")
    assert verdict.score == 0.0
    assert verdict.reason.startswith("hedged")
    assert calls == []


# Answers in decimals against a reference in fractions, at a stated precision: math-verify's
# ``float_rounding``, which the `math` verifier takes too (matrix and interval entries included).
# (response, reference, places, score)
ROUNDING_CASES = [
    (
        "$\\begin{pmatrix} 0.33 & 0.67 \\end{pmatrix}$",
        "\\begin{pmatrix} 1/3 & 2/3 \\end{pmatrix}",
        2,
        1.0,
    ),
    (
        "\\boxed{\\begin{pmatrix} 0.333 \\\\ 0.667 \\end{pmatrix}}",
        "\\begin{pmatrix} \\frac{1}{3} \\\\ \\frac{2}{3} \\end{pmatrix}",
        3,
        1.0,
    ),
    (
        "\\boxed{\\begin{pmatrix} 0.33 & 0.66 \\end{pmatrix}}",
        "\\begin{pmatrix} 1/3 & 2/3 \\end{pmatrix}",
        2,
        0.0,
    ),
    ("\\boxed{(0.5, 1.33]}", "\\left(\\frac{1}{2}, \\frac{4}{3}\\right]", 2, 1.0),
    ("\\boxed{(0.5, 1.33)}", "\\left(\\frac{1}{2}, \\frac{4}{3}\\right]", 2, 0.0),  # open end
    ("\\boxed{(0.5, 1.34]}", "\\left(\\frac{1}{2}, \\frac{4}{3}\\right]", 2, 0.0),
    ("so it is $0.33$", "\\frac{1}{3}", 2, 1.0),  # a plain number: the fast path rounds alike
    ("so it is $0.34$", "\\frac{1}{3}", 2, 0.0),
]


@pytest.mark.parametrize(("response", "reference", "places", "score"), ROUNDING_CASES)
def test_float_rounding_matches_math_verify_at_the_cases_precision(
    response: str, reference: str, places: int, score: float
) -> None:
    from math_verify import parse, verify

    plain = verify(parse(f"${reference}$"), parse(response), float_rounding=places)
    assert float(plain) == score  # the case says what math-verify says
    assert MathVerifier(float_rounding=places).verify(response, reference).score == score
    if score:  # at the default 6 places the same decimals are too coarse
        assert MathVerifier().verify(response, reference).score == 0.0


@pytest.mark.parametrize(
    ("places", "error"), [(-1, ValueError), (16, ValueError), (2.0, TypeError), (True, TypeError)]
)
def test_float_rounding_is_checked(places, error) -> None:
    with pytest.raises(error, match="float_rounding"):
        MathVerifier(float_rounding=places)
