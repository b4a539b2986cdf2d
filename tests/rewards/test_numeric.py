"""Number parsing and the fast path's agreement with math-verify."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest

from rewards import MathVerifier
from rewards.numeric import numbers_match, parse_number

PARSE_CASES = [
    ("18", Fraction(18), False),  # plain integer
    ("-7", Fraction(-7), False),  # negative
    ("−7", Fraction(-7), False),  # unicode minus
    ("2,125", Fraction(2125), False),  # thousands comma
    ("1,000,000", Fraction(10**6), False),  # several groups
    ("1{,}000", Fraction(1000), False),  # LaTeX thousands separator
    ("2\\,125", Fraction(2125), False),  # LaTeX thin space
    ("$18", Fraction(18), False),  # dollar sign
    ("\\$18.50", Fraction(37, 2), False),  # escaped dollar, decimal
    ("\\\\$5", Fraction(5), False),  # double-escaped dollar (JSON-escaped output)
    ("USD 5", Fraction(5), False),  # currency code first
    ("5 USD", Fraction(5), False),  # currency code last
    ("18 dollars", Fraction(18), False),  # trailing unit word
    ("5 apples.", Fraction(5), False),  # unit word and trailing period
    ("12 dollars per hour", Fraction(12), False),  # several unit words
    ("18 \\text{ dollars}", Fraction(18), False),  # \text unit
    ("\\text{18}", Fraction(18), False),  # \text around the number
    ("18.", Fraction(18), False),  # trailing period
    ("0.50", Fraction(1, 2), False),  # decimal
    (".5", Fraction(1, 2), False),  # leading-dot decimal
    ("007", Fraction(7), False),  # leading zeros
    ("50%", Fraction(50), True),  # percent sign keeps the written value, flagged
    ("50\\%", Fraction(50), True),  # LaTeX percent
    ("50 percent", Fraction(50), True),  # percent word
    ("\\frac{1}{2}", Fraction(1, 2), False),  # LaTeX fraction
    ("\\dfrac{-3}{4}", Fraction(-3, 4), False),  # \dfrac with a negative numerator
    ("-\\tfrac12", Fraction(-1, 2), False),  # \tfrac with digit arguments
    ("3/4", Fraction(3, 4), False),  # slash fraction
    ("\\boxed{7}", Fraction(7), False),  # boxed
    ("$\\frac{1}{2}$", Fraction(1, 2), False),  # inline math
    ("\\!1\\,000", Fraction(1000), False),  # LaTeX spacing commands
]


@pytest.mark.parametrize(("text", "value", "percent"), PARSE_CASES, ids=[c[0] for c in PARSE_CASES])
def test_parse_number(text: str, value: Fraction, percent: bool) -> None:
    number = parse_number(text)
    assert number is not None
    assert (number.value, number.percent) == (value, percent)


NOT_NUMBERS = [
    "5x",  # glued variable
    "5 x",  # single-letter word is a variable, not a unit
    "5 or 6",  # two candidates
    "5 pi",  # a constant, not a unit
    "2^{10}",  # an expression
    "1.5/3",  # decimal fraction: an expression to math-verify
    "1/0",  # division by zero
    "x = 5",  # an equation goes to the symbolic path
    "1e3",  # math-verify reads 1e3 as 1: leave it to math-verify
    "",  # empty
    "seven",  # words
    "1" * 300,  # too long to be an answer
]


@pytest.mark.parametrize("text", NOT_NUMBERS, ids=[t[:12] or "empty" for t in NOT_NUMBERS])
def test_not_a_single_number(text: str) -> None:
    assert parse_number(text) is None


# (reference, prediction) pairs whose verdict math-verify decides by its number rules.
MATCH_CASES = [
    ("18", "18"),  # same integer
    ("18", "19"),  # different integer
    ("18", "18.0"),  # integer vs float: equal after rounding
    ("18", "18.00001"),  # differs at the 5th decimal
    ("18", "18.0000001"),  # an Integer against a Float compares exactly in sympy
    ("18", "18.000000"),  # exactly equal
    ("0", "0.0000001"),  # exact compare for a whole number, even below the rounding
    ("\\frac{4}{2}", "2.0000001"),  # a whole fraction is an Integer to sympy
    ("0.5", "0.5000001"),  # Float against Float: rounded to 6 places, equal
    ("0.1", "0.1000006"),  # rounded, unequal
    ("1/3", "0.333333"),  # float rounding to 6 places
    ("1/3", "0.3333"),  # too few places
    ("0.333333", "1/3"),  # the other way round
    ("3.5", "7/2"),  # decimal vs fraction
    ("0.1", "1/10"),  # decimal vs fraction
    ("50", "50%"),  # integers: the percent sign is ignored
    ("9%", "9"),  # percent on the reference
    ("2125", "2,125"),  # commas
    ("1/2", "2/4"),  # equal fractions
    ("-3", "-3"),  # negative
    ("0", "0.0"),  # zero
    ("1/128", "0.007812"),  # an exact tie in the rational side
    ("1/3", "0.3333333"),  # more places than the rounding
]


@pytest.mark.parametrize(
    ("reference", "prediction"), MATCH_CASES, ids=[f"{r}|{p}" for r, p in MATCH_CASES]
)
def test_numbers_match_agrees_with_math_verify(reference: str, prediction: str) -> None:
    from math_verify import parse, verify

    expected = verify(parse(reference), parse(prediction))
    ours = numbers_match(parse_number(reference), parse_number(prediction))
    if ours is None:  # deferred: the verifier then asks math-verify itself
        ours = MathVerifier().verify(f"\\boxed{{{prediction}}}", reference).correct
    assert ours == expected


def _spell(value: Fraction, rng: random.Random) -> str:
    """One way of writing `value` (possibly rounded, as a model would write it)."""
    kind = rng.randrange(5)
    if kind == 0 and value.denominator == 1:
        return f"{value.numerator:,}" if rng.random() < 0.5 else str(value.numerator)
    if kind == 1:
        return f"{value.numerator}/{value.denominator}"
    if kind == 2 and value.denominator == 1 and value >= 0:
        return f"{value.numerator}%"
    if kind == 3:
        return f"${float(value):.2f}" if value >= 0 else f"{float(value):.2f}"
    return f"{float(value):.{rng.randint(1, 8)}f}"


def _random_pair(rng: random.Random) -> tuple[str, str]:
    if rng.random() < 0.5:
        value = Fraction(rng.randint(-2000, 2000))
    else:
        value = Fraction(rng.randint(-300, 300), rng.choice([2, 3, 4, 7, 8, 16, 125, 1000]))
    other = value
    if rng.random() < 0.3:  # a near miss: off by 1e-8 .. 1e-3
        other = value + Fraction(rng.choice([1, -1]), 10 ** rng.randint(3, 8))
    return _spell(value, rng), _spell(other, rng)


def test_numbers_match_agrees_with_math_verify_on_random_pairs() -> None:
    from math_verify import parse, verify

    rng = random.Random(1234)
    checked = agreed_true = 0
    for _ in range(600):
        reference, prediction = _random_pair(rng)
        ours = numbers_match(parse_number(reference), parse_number(prediction))
        if ours is None:
            continue
        assert ours == verify(parse(reference), parse(prediction)), (reference, prediction)
        checked += 1
        agreed_true += ours
    assert checked > 450
    assert agreed_true > 100  # the table must exercise equal values, not only mismatches
