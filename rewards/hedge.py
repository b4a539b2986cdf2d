"""Hedge detection shared by every answer-checking verifier.

A policy trained on a lenient verifier learns to hedge: two boxed answers, "5 or 6", or a list of
every number from 1 to 100. Two rules refuse such responses before any comparison:

1. Explicit final-answer markers (``\\boxed{}``, ``<answer>`` tags, ``#### N``) must agree:
   ``\\boxed{5} ... \\boxed{6}`` is hedged, ``\\boxed{18}`` with ``#### $18`` is not.
2. The final-answer segment may hold no more distinct candidate values than the reference:
   ``\\boxed{3, 4, 5}`` against ``5`` is hedged, ``\\boxed{(1, 2)}`` against ``(1, 2)`` is not.

Candidates are the parts of the segment between list separators (commas that are not thousands
separators, semicolons, "or", "and", ``\\quad``, ellipses, whitespace between two bare numbers,
and LaTeX alternatives: row breaks ``\\\\``, ``&``, ``|``, ``\\lor``, ``\\vee``, ``\\cup``, ...);
each part counts by its value after its last ``=``, so "9 * 2 = 18" is one candidate and a
worked solution with many intermediate numbers and one final marker passes.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from rewards.extract import Extraction, canonical_answer, normalize_text
from rewards.numeric import NUMBER_TOKEN, fraction_key, parse_number

__all__ = ["count_candidates", "hedge_reason"]

_OPERATORS = (
    "cdot",
    "times",
    "div",
    "pm",
    "mp",
    "frac",
    "dfrac",
    "tfrac",
    "sqrt",
    "over",
    "ast",
    "star",
    "circ",
    "left",
    "right",
    "cdots",
    "ldots",
    "dots",
    "binom",
    "choose",
    "mod",
    "bmod",
    "pmod",
)
_SEPARATORS = re.compile(
    r",(?!\}?\d{3}(?!\d))"  # a comma, unless it groups thousands (2,125 or 2{,}125)
    r"|;|\n|\\q?quad\b|…|\.{3}|\\[lc]?dots\b|\bor\b|\band\b"
    # LaTeX alternatives math-verify would read as one value: rows, "or", "|", unions.
    r"|\\\\(?![A-Za-z])|&|\||\\(?:lor|vee|land|wedge|mid|cup|cap)\b"
    # Two numbers with only whitespace or non-operator commands between them: "1 2 3",
    # "5 \\hspace{1em} 6", "5 \\setminus 6" (not "2 \\cdot 3", not the thin space of "2\\,125").
    r"|(?<=\d)(?:\s|\\[;:]|\\(?!(?:" + "|".join(_OPERATORS) + r")\b)[A-Za-z]+\*?(?:\{[^{}]*\})?)+"
    r"(?=[-+]?\.?\d)",
    re.IGNORECASE,
)
_MAX_PARTS = 1000


def _part_key(part: str) -> str | None:
    value = part.rsplit("=", 1)[-1].strip()
    if not any(char.isdigit() for char in value):
        return None
    number = parse_number(value)
    if number is None:
        tokens = NUMBER_TOKEN.findall(value)
        if len(tokens) == 1:
            number = parse_number(tokens[0])
    return fraction_key(number.value) if number is not None else normalize_text(value)


def count_candidates(segment: str) -> int:
    """Distinct candidate values in a final-answer segment (see the module docstring).

    Examples:
        >>> count_candidates("3, 4, 5"), count_candidates("9 * 2 = 18 dollars")
        (3, 1)
        >>> count_candidates("x = 5 or x = -5"), count_candidates("$2,125")
        (2, 1)
    """
    keys = set()
    for part in _SEPARATORS.split(segment, maxsplit=_MAX_PARTS):
        key = _part_key(part)
        if key:
            keys.add(key)
    return len(keys)


def hedge_reason(
    extraction: Extraction,
    reference: str,
    key: Callable[[str], str] = canonical_answer,
) -> str | None:
    """Why a response hedges between answers, or None when it commits to one.

    Args:
        extraction: what `analyze` found in the response.
        reference: the bare reference answer (its candidate count is the allowance).
        key: maps a marker to the value it stands for; markers with different keys disagree.

    Returns:
        A reason starting with "hedged", or None.
    """
    keys = []
    for marker in extraction.markers:
        marker_key = key(marker)
        if marker_key and marker_key not in keys:
            keys.append(marker_key)
    if len(keys) > 1:
        shown = ", ".join(repr(k[:40]) for k in keys[:4])
        return f"hedged: explicit final answers disagree ({shown})"
    if extraction.answer is None:
        return None
    found = count_candidates(extraction.segment)
    if found > 1:
        allowed = max(1, count_candidates(reference))
        if found > allowed:
            return (
                f"hedged: multiple candidate answers ({found} distinct values in the final "
                f"answer, the reference has {allowed})"
            )
    return None
