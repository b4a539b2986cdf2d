"""A calculator audit of the arithmetic a reply states (``17 + 6 = 23``), as in GSM8K's calculator
annotations: a process check that needs no reference answer.

`false_equations` finds every plain equation of numbers ``a op b [op c ...] = r`` (``+ - * /``,
also ``×`` and ``÷``; usual precedence) and returns those that do not hold. It is conservative:
what it cannot read unambiguously it skips rather than judges (an expression continued by a word
or a bracket, a right side that goes on with an operator, a question such as ``20 + 7 = 21?``,
numbers with thousands separators, numbers of more than `MAX_DIGITS` digits). A right side
written with decimals holds when it equals the left side rounded to its decimals, so
``10 / 3 = 3.33`` holds. Only the last `MAX_TEXT_CHARS` characters are read, each expression is
scanned once from its start, and it never raises on a string: model output cannot stall it.

Examples:
    >>> false_equations("Check 20: 20 + 7 - 4 = 21? 20 + 7 = 27. 27 - 4 = 23. 23 - 21 = 0.")
    ['23 - 21 = 0']
    >>> false_equations("2 * 3 + 4 = 10, 7 / 2 = 3.5, so x = 5.")
    []
"""

from __future__ import annotations

import re
from fractions import Fraction

__all__ = ["MAX_DIGITS", "MAX_TEXT_CHARS", "false_equations"]

MAX_DIGITS = 12
MAX_TEXT_CHARS = 20_000  # only the last this many characters are audited (bounds the time)

_NUM = r"\d+(?:\.\d+)?"
_OP = r"[-+*/×÷]"
_EQUATION = re.compile(
    # Not inside a longer expression, word, number or bracket on the left ...
    rf"(?<![\w.,)\]])(?<!{_OP})(?<!{_OP} )(?<!= )(?<!=)"
    rf"(?P<lhs>-?{_NUM}(?: ?{_OP} ?{_NUM})+) ?= ?(?P<rhs>-?{_NUM})"
    # ... nor going on to the right (another operator, digit, bracket or decimal), nor asked.
    rf"(?![\d(\[]|\.\d| ?{_OP} ?[\d(]| ?\?)"
)
_TOKEN = re.compile(rf"{_NUM}|{_OP}")


def _value(expression: str) -> Fraction | None:
    """The value of ``-?n (op n)*`` with * and / before + and -; None on a division by zero."""
    negative = expression.startswith("-")
    tokens = _TOKEN.findall(expression[1:] if negative else expression)
    terms: list[Fraction] = []
    sign = -1 if negative else 1
    current = Fraction(tokens[0])
    for op, number in zip(tokens[1::2], tokens[2::2], strict=True):
        value = Fraction(number)
        if op in "*×":
            current *= value
        elif op in "/÷":
            if value == 0:
                return None
            current /= value
        else:
            terms.append(sign * current)
            sign, current = (1 if op == "+" else -1), value
    terms.append(sign * current)
    return sum(terms, Fraction(0))


def _holds(value: Fraction, rhs: str) -> bool:
    decimals = len(rhs.split(".")[1]) if "." in rhs else 0
    if decimals == 0:
        return value == Fraction(rhs)
    return abs(value - Fraction(rhs)) <= Fraction(1, 2 * 10**decimals)


def false_equations(text: str) -> list[str]:
    """The stated equations of `text` that do not hold, as written (see the module docstring)."""
    if not isinstance(text, str):
        raise TypeError(f"false_equations needs a str, got {type(text).__name__}")
    wrong = []
    for match in _EQUATION.finditer(text[-MAX_TEXT_CHARS:]):
        numbers = re.findall(r"\d+", match.group(0))
        if any(len(n) > MAX_DIGITS for n in numbers):
            continue
        value = _value(match.group("lhs"))
        if value is None or not _holds(value, match.group("rhs")):
            wrong.append(match.group(0))
    return wrong
