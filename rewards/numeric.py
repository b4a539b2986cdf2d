"""Numbers in model answers: parsing to `Fraction` and comparing them the way math-verify does.

`parse_number` accepts one number written the many ways models and datasets write it (``2,125``,
``$18``, ``\\$18.00``, ``18 dollars``, ``50\\%``, ``\\frac{1}{2}``, ``-3/4``, ``\\boxed{7}``) and
returns a `Num`, or None when the text is anything more than one number (an expression, two
numbers, a number glued to a variable such as ``5x``). Callers send the None cases to a slower,
symbolic check, so None means "not sure", never "wrong".

`numbers_match` decides equality exactly as math-verify's ``verify(parse(ref), parse(pred))`` does
for numbers (checked case by case against math-verify 0.9, see tests/rewards/test_numeric.py):

- two integers compare exactly, and a percent sign is ignored between integers (``20%`` == ``20``);
- a whole number against a decimal compares exactly (``18`` == ``18.0``, ``18`` != ``18.0000001``);
- otherwise, when either side is written with a decimal point, both are rounded to 6 decimal
  places (half to even; ``float_rounding``, as math-verify's) first, so ``0.333333`` == ``1/3``
  but ``0.3333`` != ``1/3``;
- otherwise (fractions) the exact values compare, a percent meaning 1/100.

Where math-verify's answer depends on float representation details (a percent next to a decimal,
more than 15 significant digits, an exact rounding tie) `numbers_match` returns None and the
caller defers to math-verify itself.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from fractions import Fraction

__all__ = [
    "NUMBER_TOKEN",
    "Num",
    "fraction_key",
    "numbers_match",
    "parse_decimal_comma",
    "parse_number",
]

# One unsigned number: thousands-grouped (never after a lone 0: "0,111" is a decimal comma) or
# plain, with an optional decimal part.
_NUM = r"(?:[1-9]\d{0,2}(?:,\d{3})+(?!\d)(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+)"
_FRAC_ARG = r"\{\s*(?:-\s*)?" + _NUM + r"\s*\}"  # not \s*-?\s*: quadratic on spaces

NUMBER_TOKEN = re.compile(
    r"(?:(?<![\w)\]}.])-)?"  # a minus is a sign only when not a binary operator
    r"(?<![\w.])"  # not glued to a word (x2) or another number (1.2.3)
    r"(?:(?<!\\)\\+[dt]?frac\s*"  # (?<!\\): a run of backslashes is tried once, not per char
    + _FRAC_ARG
    + r"\s*"
    + _FRAC_ARG
    + r"|(?<!\\)\\+[dt]?frac\d\d(?!\d)"  # \frac12
    + r"|"
    + _NUM
    + r"(?:\s*/\s*"
    + _NUM
    + r")?)"
)
"""Finds number-like tokens in free text (used for last-number fallbacks and hedge counting)."""

_NUMBER_TEXT = re.compile(
    r"(?P<sign>[-+])?\s*"
    # A mixed number, 15\frac{39}{40}: math-verify reads it as 15 + 39/40.
    r"(?:(?P<whole>\d+)\s*(?=\\[dt]?frac))?"
    r"(?:\\[dt]?frac\s*\{\s*(?P<fn>(?:-\s*)?" + _NUM + r")\s*\}"
    r"\s*\{\s*(?P<fd>(?:-\s*)?" + _NUM + r")\s*\}"
    r"|\\[dt]?frac(?P<fn1>\d)(?P<fd1>\d)"
    r"|(?P<n>" + _NUM + r")(?:\s*/\s*(?P<d>" + _NUM + r"))?)"
    r"\s*(?P<pct>%|percent\b|per\s?cent\b)?"
    r"(?P<unit>(?:\s+[A-Za-z][A-Za-z'./-]*)+)?"
    r"\s*[.,;:]?"  # not "!": 18! is a factorial to math-verify
)

_WRAPPERS = (
    re.compile(r"^\\+(?:boxed|fbox)\s*\{(.*)\}$", re.DOTALL),
    re.compile(r"^\$\$(.*)\$\$$", re.DOTALL),
    re.compile(r"^\$([^$]*)\$$", re.DOTALL),
    re.compile(r"^\\\((.*)\\\)$", re.DOTALL),
    re.compile(r"^\\\[(.*)\\\]$", re.DOTALL),
)
_TEXT_CMD = re.compile(
    r"\\+(?:text|textrm|textbf|textit|textnormal|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}"
)
_LATEX_COMMA = re.compile(r"\s*\{\s*,\s*\}\s*|,\s*\\+!\s*")
_SPACING = re.compile(r"\\+[!,;: ]|\\+(?:left|right|displaystyle)\b|~")
_CURRENCY = re.compile(r"\\*\$|\bUS(?:D|\$)?\b|[€£¥₹]|\\+(?:euro|pounds)\b")
_PERCENT_LATEX = re.compile(r"\\+%")
# Trailing words that are never units: they turn "5 or 6" or "5 pi" into something else.
_NOT_UNITS = frozenset(
    {"or", "and", "to", "plus", "minus", "times", "over", "divided", "by", "not", "nor"}
    | {"either", "maybe", "possibly", "perhaps", "between", "except", "pi", "sqrt", "cdot"}
    | {"div", "mod", "log", "ln", "sin", "cos", "tan", "choose", "factorial", "squared", "cubed"}
)
_MAX_NUMBER_TEXT = 200
# Thousands grouped by spaces (SI style), "1 000" or "12 345 678.5"; LaTeX "\," is removed
# earlier. math-verify reads "1 000" as 1*000, a product; a reader means one thousand.
_SPACED_THOUSANDS = re.compile(r"(?P<sign>[-+]?)\s*(?P<n>\d{1,3}(?:[ ~]\d{3})+(?:\.\d+)?)")
# A decimal comma, "3,5" or "3{,}5": a comma not followed by exactly three digits (which would
# group thousands), or after a lone 0 ("0,125").
_DECIMAL_COMMA = re.compile(r"(?<![\d,])(?P<i>\d+),(?P<f>\d+)(?![\d,])")


@dataclass(frozen=True)
class Num:
    """A parsed number.

    Args:
        value: the number as written, without the percent scaling (``50%`` has value 50).
        percent: whether a percent sign or word followed it.
        is_float: whether it was written with a decimal point (math-verify makes it a Float).
        is_integer: whether it was written as a whole number (no fraction bar, no decimal point).
        digits: significant digits written (float handling depends on them).
        decimals: digits after the decimal point.
    """

    value: Fraction
    percent: bool = False
    is_float: bool = False
    is_integer: bool = True
    digits: int = 1
    decimals: int = 0

    @property
    def actual(self) -> Fraction:
        """The value with a percent applied (``50%`` -> 1/2)."""
        return self.value / 100 if self.percent else self.value


def _unwrap(text: str) -> str:
    for _ in range(4):
        before = text
        for pattern in _WRAPPERS:
            match = pattern.match(text)
            if match:
                text = match.group(1).strip()
        if text == before:
            break
    return text


def _clean(text: str) -> str:
    text = _unwrap(text.strip())
    # LaTeX thousands separators: "2{,}125", "14 {, }916", "11,\\! 111".
    text = _LATEX_COMMA.sub(",", text)
    text = _SPACING.sub("", text)
    text = _TEXT_CMD.sub(r" \1 ", text)
    text = _PERCENT_LATEX.sub("%", text)
    text = _CURRENCY.sub(" ", text)
    return text.replace("−", "-").strip()


def _to_fraction(literal: str) -> Fraction:
    return Fraction(literal.replace(",", "").replace(" ", ""))


def _literal_stats(literal: str) -> tuple[int, int]:
    """Significant digits and decimals of an unsigned decimal literal."""
    plain = literal.replace(",", "").replace("-", "").replace(" ", "")
    whole, _, frac = plain.partition(".")
    significant = (whole + frac).lstrip("0") or "0"
    return len(significant), len(frac)


def parse_number(text: str) -> Num | None:
    """Parse text that is exactly one number, possibly with currency, percent and unit words.

    Args:
        text: an extracted answer such as ``"$2,125"``, ``"\\frac{3}{4}"`` or ``"18 dollars"``.

    Returns:
        The `Num`, or None when the text is not a single plain number.

    Examples:
        >>> parse_number("\\\\$2,125.50").value
        Fraction(4251, 2)
        >>> parse_number("50\\\\%").percent
        True
        >>> parse_number("5x") is None
        True
    """
    if not isinstance(text, str) or len(text) > _MAX_NUMBER_TEXT:
        return None
    return _parse(text)


@functools.lru_cache(maxsize=8192)
def _parse(text: str) -> Num | None:
    """`parse_number` on a short string (cached: answers such as "18" recur all the time). The
    cache holds 8,192 texts, about 2 MB: model output is unbounded in variety, and at 65,536 it
    grew a long-lived server by about 16 MB (the soak, `benchmarks.soak`)."""
    cleaned = _clean(text)
    spaced = _SPACED_THOUSANDS.fullmatch(cleaned)
    if spaced is not None:
        cleaned = spaced["sign"] + spaced["n"].replace(" ", "").replace("~", "")
    match = _NUMBER_TEXT.fullmatch(cleaned)
    if match is None:
        return None
    unit = match["unit"]
    if unit and any(
        word.lower().strip(".") in _NOT_UNITS or len(word) == 1 for word in unit.split()
    ):
        return None
    sign = -1 if match["sign"] == "-" else 1
    percent = match["pct"] is not None
    if match["n"] is not None and match["d"] is None:
        digits, decimals = _literal_stats(match["n"])
        return Num(
            sign * _to_fraction(match["n"]),
            percent,
            is_float=decimals > 0 or "." in match["n"],
            is_integer="." not in match["n"],
            digits=digits,
            decimals=decimals,
        )
    num, den = (
        (match["fn"], match["fd"]) if match["fn"] is not None else (match["fn1"], match["fd1"])
    )
    if num is None:
        num, den = match["n"], match["d"]
    if "." in num or "." in den:
        return None  # 1.5/3 is an expression to math-verify, not a Rational
    denominator = _to_fraction(den)
    if denominator == 0:
        return None
    value = _to_fraction(num) / denominator
    if match["whole"] is not None:
        if value < 0:
            return None  # 2\frac{-1}{2}: leave it to math-verify
        value += _to_fraction(match["whole"])
    return Num(sign * value, percent, is_float=False, is_integer=False)


def parse_decimal_comma(text: str) -> Num | None:
    """Read ``3,5`` or ``3{,}5`` as 3.5 (a decimal comma); None for anything else.

    Only for answers checked against a plain-number reference: as a list, ``3,5`` could never
    equal one number, so that reading costs nothing there, while a list reference such as
    ``1, 2`` keeps its meaning (`parse_number` never reads a decimal comma).

    Examples:
        >>> parse_decimal_comma("3,5").value, parse_decimal_comma("2,125")
        (Fraction(7, 2), None)
    """
    if not isinstance(text, str) or len(text) > _MAX_NUMBER_TEXT:
        return None
    cleaned = _clean(text)
    commas = _DECIMAL_COMMA.findall(cleaned)
    if len(commas) != 1 or cleaned.count(",") != 1:
        return None
    whole, fraction = commas[0]
    if len(fraction) == 3 and whole != "0":
        return None  # 2,125 groups thousands
    return parse_number(_DECIMAL_COMMA.sub(r"\g<i>.\g<f>", cleaned))


def _rounded(num: Num, value: Fraction, places: int) -> Fraction | None:
    """Round to `places` places, half to even, like sympy's ``round(places)``; None if a float
    may flip it."""
    if num.is_float and num.digits > 15:
        return None
    scaled = value * 10**places
    if scaled - (scaled.numerator // scaled.denominator) == Fraction(1, 2):
        return None  # exact tie: the binary float may sit on either side of it
    return round(value, places)


def _whole(num: Num) -> bool:
    """Whether sympy holds this number as an Integer (``18``, ``\\frac{4}{2}``), not a Float."""
    return not num.is_float and num.value.denominator == 1


def numbers_match(reference: Num, predicted: Num, float_rounding: int = 6) -> bool | None:
    """Whether two numbers are equal under math-verify's rules (see the module docstring).

    Args:
        reference: the gold number.
        predicted: the model's number.
        float_rounding: the decimal places two numbers written with a decimal point are
            compared at (math-verify's ``float_rounding``, 6 by default).

    Returns:
        True or False, or None when only math-verify itself can say (the caller should defer).
    """
    if reference.percent or predicted.percent:
        if reference.is_float or predicted.is_float:
            return None
        if reference.is_integer and predicted.is_integer:
            return reference.value == predicted.value
        return reference.actual == predicted.actual
    if reference.is_float or predicted.is_float:
        if _whole(reference) or _whole(predicted):
            # sympy compares an Integer with a Float exactly (Integer(18) != Float(18.0000001)).
            if max(reference.digits, predicted.digits) > 15:
                return None
            return reference.value == predicted.value
        left = _rounded(reference, reference.value, float_rounding)
        right = _rounded(predicted, predicted.value, float_rounding)
        if left is None or right is None:
            return None
        return left == right
    return reference.value == predicted.value


def fraction_key(value: Fraction) -> str:
    """Canonical text of a fraction: ``"18"``, ``"1/2"``, ``"-3/4"``."""
    return (
        str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
    )
