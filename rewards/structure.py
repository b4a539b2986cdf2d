"""Cheap structural checks that answer hostile answers before any symbolic (math-verify) work.

math-verify can spend its whole budget (`rewards.symbolic`) on an answer a few hundred characters
long: 100 redundant parentheses around ``7``, a tower such as ``10^{10^{10}}``, ``(10^{10})!``,
``(1+x)^{100000}``, a ``\\frac`` nested 20 deep. `structural_verdict` answers such inputs in
well under a millisecond, with the verdict math-verify gives where it can give one, and says
"not sure" (None) otherwise, so the caller falls back to math-verify:

1. Redundant brackets: ``((((7))))``, ``{{x+1}}``, ``\\left(\\left(7\\right)\\right)``, ``[[7]]``
   are peeled (`strip_redundant`; math-verify reads each as its content) when the content holds no
   comma or semicolon (``{(1,2)}`` and ``(1,2)`` differ to math-verify). The peeled answer is
   what the caller compares from then on.
2. Exact arithmetic: an answer and a reference that are both plain rational expressions
   (numbers, ``+ - * /``, ``\\frac``, ``\\sqrt`` of a perfect square, integer powers, small
   factorials) are evaluated exactly (`exact_value`); equal values score right, values further
   apart than math-verify's rounding can bridge score wrong. Otherwise a constant answer and a
   constant (or polynomial, read at 0) reference are enclosed in mpmath intervals (roots and
   ``\\pi`` included): intervals that far apart score wrong (``\\sqrt{\\sqrt{\\sqrt{2}}}`` != 7).
3. Magnitude: a lower bound on ``log10`` of a huge answer (`log10_lower`: towers, factorials,
   and sums, differences and quotients that one huge part dominates) against an upper bound
   for the reference (`log10_upper`, which reads a reference polynomial in its variables at
   zero: a polynomial that equals a constant equals it there) proves ``10^{10^{10}}`` != 18
   without building the number.
4. Degree: ``(a + b x)^{E}`` (a non-constant linear base, ``E`` a whole number of at least
   `MIN_HUGE_DEGREE`) is a polynomial of degree ``E``; a reference that is ``N / D`` with
   ``N`` and ``D`` of degree below ``E`` (`rewards.expression.rational_size`: variables under ``+ - * /`` and
   whole powers, constants anything the grammar reads) differs from it, as ``E + deg D > deg N``.
   Two such powers compare by base and exponent.
5. Unreadable: an answer of only empty brackets (``{{}}``) against a number or expression (not
   a set: ``{}`` is the empty set to math-verify), or with `MIN_IMBALANCE` or more unmatched
   round or square brackets, scores 0, as math-verify parses neither.
6. Too costly: an answer whose symbolic check would run out of any budget (a binomial of huge
   numbers, a sum with a bound over 10^4, an integral or limit of a tower of powers, a tower of
   ``e``: `rewards.costly.costly_reason`) scores 0, reason "refused: too costly for a symbolic
   check: ...)", unless the reference is costly too. Before it, rule 3 reads ``e`` and ``\\exp``
   as Euler's number in answers of over a million digits, so ``e^{e^{e^{e^{e}}}}`` against 18
   is "wrong" on magnitude.

Every rule reads a small grammar (`parse_expression`: numbers, single-letter variables other
than ``e`` and ``i``, ``\\pi``, ``+ - * / ^ !``, ``\\cdot``, ``\\times``, ``\\frac``, ``\\sqrt``,
brackets); anything else makes it return None. Rules 2-4 run only on answers that look hostile
(`looks_hostile`: deep nesting, a power, a factorial, ``\\exp``, a long digit run or a long
text), and rule 6 only on the operators it names, so ordinary answers reach math-verify exactly
as before.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

from rewards.costly import MAX_CONSTANT_DIGITS, costly_reason
from rewards.expression import (
    MIN_HUGE_DEGREE,
    apart,
    exact_value,
    huge_power,
    log10_lower,
    log10_upper,
    rational_size,
)
from rewards.extract import top_level_parts
from rewards.grammar import Node, parse_expression
from rewards.numeric import parse_number

__all__ = [
    "MIN_HUGE_DEGREE",
    "Structural",
    "exact_value",
    "log10_lower",
    "log10_upper",
    "looks_hostile",
    "nesting_depth",
    "parse_expression",
    "strip_redundant",
    "structural_verdict",
]

MIN_HUGE_LOG10 = 15.0
"""Rule 3 applies to answers of at least 10^15 (below, math-verify compares them fast)."""
HOSTILE_DEPTH = 6
HOSTILE_DIGITS = 40
HOSTILE_CHARS = 200
MIN_IMBALANCE = 3
"""Answers with this many unmatched ``(`` ``[`` (or ``)`` ``]``) score 0: math-verify 0.9 parses
none of them (``((7`` and ``7))`` are not 7 to it), after up to half a second on deep ones."""
MAX_PARSE_CHARS = 2000
"""Longer answers and references are not parsed (only their redundant brackets are peeled)."""

# ------------------------------------------------------------------------- brackets

_OPENERS = {"(": ")", "[": "]", "{": "}", "\\left(": "\\right)", "\\left[": "\\right]"}
_CLOSERS = frozenset(_OPENERS.values())
_BRACKET = re.compile(r"\\left[(\[]|\\right[)\]]|\\.|[()\[\]{}]", re.DOTALL)


def _bracket_tokens(text: str) -> list[tuple[str, int, int]]:
    """Bracket tokens (text, start, end); escaped characters (``\\{``, ``\\\\``) are skipped."""
    return [
        (m.group(), m.start(), m.end())
        for m in _BRACKET.finditer(text)
        if m.group() in _OPENERS or m.group() in _CLOSERS
    ]


def nesting_depth(text: str) -> int:
    """The deepest nesting of ``( [ {`` and ``\\left( \\right)`` brackets (kinds not matched)."""
    depth = deepest = 0
    for token, _start, _end in _bracket_tokens(text):
        if token in _OPENERS:
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth = max(0, depth - 1)
    return deepest


def strip_redundant(text: str) -> tuple[str, int]:
    """`text` without brackets that wrap all of it, and how many layers were peeled.

    ``((((7))))`` -> ``("7", 4)``; ``(1)(2)``, ``(1, 2)``, ``((1, 2))`` and unbalanced text are
    returned as they are (with 0). Linear in the length of `text`.

    Examples:
        >>> strip_redundant("\\\\left( ((x+1)) \\\\right)")
        ('x+1', 3)
        >>> strip_redundant("(1)+(2)")
        ('(1)+(2)', 0)
    """
    tokens = _bracket_tokens(text)
    match: dict[int, tuple[int, int]] = {}  # opener start -> (closer start, closer end)
    stack: list[tuple[str, int, int]] = []
    for token, start, end in tokens:
        if token in _OPENERS:
            stack.append((token, start, end))
        elif not stack or _OPENERS[stack[-1][0]] != token:
            return text, 0  # unbalanced or mismatched: read it as it is
        else:
            opener = stack.pop()
            match[opener[1]] = (start, end)
    if stack:
        return text, 0
    ends = {start: end for _token, start, end in tokens if _token in _OPENERS}
    low, high, layers = 0, len(text), 0
    while True:
        while low < high and text[low].isspace():
            low += 1
        while high > low and text[high - 1].isspace():
            high -= 1
        closer = match.get(low)
        if closer is None or closer[1] != high:
            break
        low, high, layers = ends[low], closer[0], layers + 1
    core = text[low:high]
    if layers == 0 or not core or "," in core or ";" in core:
        return text, 0
    return core, layers


# ------------------------------------------------------------------------- the verdict


@dataclass(frozen=True)
class Structural:
    """What the structural checks found.

    Attributes:
        verdict: True (equal), False (different) or None (no cheap verdict: ask math-verify).
        reason: why, when `verdict` is not None.
        answer: the answer with redundant brackets peeled, for the checks that follow.
    """

    verdict: bool | None
    reason: str
    answer: str


def looks_hostile(text: str) -> bool:
    """Whether an answer is worth the structural checks: deep nesting, a power, ``\\exp``, a
    factorial, a long digit run or a long text."""
    return (
        len(text) >= HOSTILE_CHARS
        or "^" in text
        or "\\exp" in text
        or "!" in text.replace("\\!", "")
        or re.search(rf"\d{{{HOSTILE_DIGITS}}}", text) is not None
        or nesting_depth(text) >= HOSTILE_DEPTH
    )


def _numbers_differ(first: Fraction, second: Fraction, float_rounding: int) -> bool:
    """Whether two exact values are further apart than math-verify's rounding (its
    ``float_rounding`` decimal places, and 1e-9 relative) can bridge."""
    gap = abs(first - second)
    scale = max(abs(first), abs(second))
    return gap > max(Fraction(2, 10**float_rounding), Fraction(1, 10**9), scale / 10**9)


def _plain_value(reference: str) -> bool:
    """Whether a reference is a number or an expression of this module's grammar."""
    if len(reference) > MAX_PARSE_CHARS:
        return False
    try:
        return parse_expression(reference) is not None or parse_number(reference) is not None
    except RecursionError:
        return False


def _core_of(text: str) -> str:
    """`text` without any brackets (``{{}}`` -> ``""``), for the empty-answer check."""
    return re.sub(r"\\left|\\right|[()\[\]{}\s]", "", text) if len(text) < 100_000 else text


def _round_imbalance(text: str) -> int:
    """Round and square openers minus closers (``\\left(`` and ``\\right)`` included)."""
    gap = 0
    for token, _start, _end in _bracket_tokens(text):
        if token != "{" and token in _OPENERS:
            gap += 1
        elif token != "}" and token in _CLOSERS:
            gap -= 1
    return gap


def _same_power(
    first: tuple[dict[str, Fraction], int], second: tuple[dict[str, Fraction], int]
) -> bool:
    """Whether ``L1^{E1}`` and ``L2^{E2}`` (non-constant linear bases) are one polynomial: the
    same degree, and bases equal or (for an even degree) opposite; non-proportional linear forms
    give different polynomials (unique factorisation), and ``(aL)^E = L^E`` needs ``a^E = 1``."""
    (base, degree), (other, other_degree) = first, second
    if degree != other_degree:
        return False
    return base == other or (degree % 2 == 0 and base == {k: -v for k, v in other.items()})


def structural_verdict(answer: str, reference: str, float_rounding: int = 6) -> Structural:
    """The cheap verdict on `answer` against `reference`, or ``verdict=None``.

    Examples:
        >>> structural_verdict("(" * 100 + "7" + ")" * 100, "7").verdict
        True
        >>> structural_verdict("10^{10^{10}}", "18").verdict
        False
        >>> structural_verdict("x^2", "18").verdict is None
        True
    """
    if answer.split() == reference.split():
        return Structural(True, "correct: the same text", answer)
    stripped, layers = strip_redundant(answer)
    reference_core, _ = strip_redundant(reference)
    if layers and " ".join(stripped.split()) == " ".join(reference_core.split()):
        return Structural(True, f"correct: the same expression inside {layers} brackets", stripped)
    if layers == 0 and not _core_of(answer) and _plain_value(reference_core):
        # Not against a set: {} is the empty set to math-verify.
        return Structural(False, "wrong: only empty brackets", answer)
    gap = _round_imbalance(answer)
    if abs(gap) >= MIN_IMBALANCE:
        return Structural(False, f"wrong: {abs(gap)} unmatched round or square brackets", answer)
    unsure = Structural(None, "", stripped)
    if max(len(stripped), len(reference_core)) > MAX_PARSE_CHARS:
        return unsure
    found = None
    if looks_hostile(answer):
        try:
            found = _decide(stripped, reference_core, float_rounding)
        except RecursionError:
            found = None
    if found is not None:
        return Structural(found[0], found[1], stripped)
    costly = costly_reason(stripped)
    if costly is not None and costly_reason(reference_core) is None:
        return Structural(False, costly, stripped)
    return unsure


def _decide(answer: str, reference: str, float_rounding: int) -> tuple[bool, str] | None:
    tree = parse_expression(answer)
    if tree is None:
        return _decide_magnitude(answer, reference)
    gold = parse_expression(reference)
    if gold is None:
        return _against_unparsed(tree, reference)
    value, expected = exact_value(tree), exact_value(gold)
    if value is not None and expected is not None:
        if value == expected:
            return True, "correct: the same exact value"
        if _numbers_differ(value, expected, float_rounding):
            return False, "wrong: a different exact value"
        return None
    if apart(tree, gold, float_rounding):
        return False, "wrong: a different value (interval arithmetic)"
    power, other = huge_power(tree), huge_power(gold)
    if power is not None and other is not None:
        if _same_power(power, other):
            return True, f"correct: the same polynomial of degree {power[1]}"
        return False, "wrong: a different huge power"
    return _differ(tree, gold)


def _against_unparsed(tree: Node, reference: str) -> tuple[bool, str] | None:
    """`tree` against a reference the expression grammar does not read: a number in another
    notation (``\\$2,125``, ``50%``: either reading of the percent), or a tuple, set or
    interval none of whose values may equal it."""
    number = parse_number(reference)
    if number is not None:
        bound = max(abs(number.value), abs(number.actual))
        return _differ(tree, ("num", bound, reference))
    parts = _reference_parts(reference)
    if parts is not None and all(_differ(tree, part) for part in parts):
        return False, f"wrong: one value against {len(parts)}, none of them equal to it"
    return None


def _decide_magnitude(answer: str, reference: str) -> tuple[bool, str] | None:
    """Rule 3 alone, with ``e`` and ``\\exp`` read as Euler's number, for answers of over
    `rewards.costly.MAX_CONSTANT_DIGITS` digits that way (``e^{e^{e^{e^{e}}}}``), which
    math-verify cannot evaluate. It may read ``e`` as a variable instead: then such an answer is
    no number at all and equals no constant either, so the magnitude rule stays sound; the exact,
    interval and degree rules would not (``(1+e)^{100000}`` is left to math-verify)."""
    tree = parse_expression(answer, euler=True)
    lower = None if tree is None else log10_lower(tree)
    if tree is None or lower is None or lower <= MAX_CONSTANT_DIGITS:
        return None
    gold = parse_expression(reference, euler=True)
    if gold is None:
        return _against_unparsed(tree, reference)
    return _differ(tree, gold)


def _differ(tree: Node, gold: Node | None) -> tuple[bool, str] | None:
    """``(False, why)`` when a huge `tree` provably differs from `gold` (None: +-infinity, which
    no number equals), else None."""
    lower = log10_lower(tree)
    if gold is None:
        # A tree of + * ^ ! over numbers, or a polynomial, is finite.
        if (lower is not None and lower >= MIN_HUGE_LOG10) or huge_power(tree) is not None:
            return False, "wrong: a finite value is not infinite"
        return None
    if lower is not None and lower >= MIN_HUGE_LOG10:
        upper = log10_upper(gold)
        if upper is not None and lower > upper + 1:
            return False, (
                f"wrong: the answer is over 10^{_short(lower)}, the reference under "
                f"10^{_short(upper + 1)}"
            )
    power = huge_power(tree)
    if power is not None:
        size = rational_size(gold)
        if size is not None and size < power[1]:
            return False, (
                f"wrong: a polynomial of degree {power[1]} against a reference of lower degree"
            )
    return None


_OUTER_OPEN = re.compile(r"\s*(?:\\left\s*)?(?:\(|\[|\\\{)")
_OUTER_CLOSE = re.compile(r"(?:\\right\s*)?(?:\)|\]|\\\})\s*$")
_INFINITY = re.compile(r"\s*[-+]?\s*\\infty\s*")


def _reference_parts(reference: str) -> list[Node | None] | None:
    """The parts of a reference of two or more values (a tuple, interval, set or list:
    ``(1, 2)``, ``[0, \\infty)``), each parsed (None for +-infinity), or None.

    A single value equals none of these to math-verify unless it equals one of the parts (a set
    ``{a}``, a degenerate interval ``[a, a]``), so an answer that differs from every part is
    wrong."""
    opening = _OUTER_OPEN.match(reference)
    closing = _OUTER_CLOSE.search(reference)
    start = opening.end() if opening else 0
    end = closing.start() if closing else len(reference)
    parts = top_level_parts(reference[start:end])
    if len(parts) < 2:
        return None
    parsed: list[Node | None] = []
    for part in parts:
        if _INFINITY.fullmatch(part):
            parsed.append(None)
            continue
        tree = parse_expression(part)
        if tree is None:
            return None
        parsed.append(tree)
    return parsed


def _short(value: float) -> str:
    return "inf" if value == math.inf else f"{value:.3g}"
