"""The calculator audit of stated equations (`rewards.arithmetic.false_equations`)."""

from __future__ import annotations

import time

import pytest

from rewards.arithmetic import MAX_DIGITS, false_equations


@pytest.mark.parametrize(
    ("text", "false"),
    [
        ("20 + 7 = 27. 27 - 4 = 23. 23 - 21 = 2: 2 too many.", []),
        ("20 + 7 = 27. 27 - 4 = 23. 23 - 21 = 0: it checks.", ["23 - 21 = 0"]),
        ("10 - 26 = -16", []),
        ("10 - 26 = 16", ["10 - 26 = 16"]),
        ("-5 + 3 = -2", []),
        ("10 + 5 * 2 = 20", []),  # precedence: * before +
        ("10 + 5 * 2 = 30", ["10 + 5 * 2 = 30"]),
        ("6 × 7 = 42 and 84 ÷ 2 = 41", ["84 ÷ 2 = 41"]),
        ("7 / 2 = 3.5", []),
        ("7/2 = 3", ["7/2 = 3"]),
        ("10 / 3 = 3.33", []),  # rounded to the decimals written
        ("10 / 3 = 3.4", ["10 / 3 = 3.4"]),
        ("2.5 * 4 = 11", ["2.5 * 4 = 11"]),
        ("7 / 0 = 1", ["7 / 0 = 1"]),
        ("Step 2: 4 * 3 = 12 apples.", []),
    ],
)
def test_false_equations_judges_plain_equations(text, false):
    assert false_equations(text) == false


@pytest.mark.parametrize(
    "text",
    [
        "Check 20: 20 + 7 - 4 = 21? 20 + 7 = 27.",  # a question, not a claim
        "x + 3 = 9",  # not all numbers
        "(3 + 4) * 2 = 15",  # brackets: not read
        "2 * (3 + 4) = 15",
        "3 + 4 = 7 + 1 = 9",  # a chain: each side goes on
        "1,000 + 5 = 1006",  # thousands separators: not read
        "a-3 = 5",
        "2023-11-24 = today",
        "= 5 + 3 = 9",
        f"{'9' * (MAX_DIGITS + 1)} + 1 = 0",
    ],
)
def test_false_equations_skips_what_it_cannot_read(text):
    assert false_equations(text) == []


def test_false_equations_is_fast_on_hostile_text():
    started = time.perf_counter()
    product = " * ".join(["999999999989"] * 1600) + " = 1"  # a 19,000-digit product
    quotient = " / ".join(["999999999989", "999999999959"] * 800) + " = 1"
    for text in ("1 + 2 = 4 " * 5000, "1 " * 50_000 + "=", "1+" * 50_000, "9" * 100_000 + "=1"):
        false_equations(text)
    assert false_equations(product) and false_equations(quotient)  # the tail is still read
    assert time.perf_counter() - started < 2.0


def test_false_equations_refuses_a_non_string():
    with pytest.raises(TypeError, match="needs a str"):
        false_equations(b"1 + 1 = 3")
