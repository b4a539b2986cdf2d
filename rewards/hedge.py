"""Hedge detection shared by every answer-checking verifier.

A policy trained on a lenient verifier learns to hedge: two boxed answers, "5 or 6", or a list of
every number from 1 to 100. Two rules refuse such responses before any comparison:

1. Explicit final-answer markers (``\\boxed{}``, ``<answer>`` tags, ``#### N``) must agree:
   ``\\boxed{5} ... \\boxed{6}`` is hedged, ``\\boxed{18}`` with ``#### $18`` is not, and nor
   is one value in two notations (``15\\frac{39}{40}`` and ``\\frac{639}{40}`` by their number;
   others by the caller's ``same`` check, asked about at most `MAX_SAME_CHECKS` markers). When
   the reference states as many values as there are markers (``1, -2``), `join_markers` makes
   them one answer (``\\boxed{-2} and \\boxed{1}`` is the pair of roots).
2. The final-answer segment may hold no more distinct candidate values than the reference:
   ``\\boxed{3, 4, 5}`` against ``5`` is hedged, ``\\boxed{(1, 2)}`` against ``(1, 2)`` is not.

Candidates are the parts of the segment between list separators (commas that are not thousands
separators, semicolons, "or", "and", ``\\quad``, ellipses, whitespace between two bare numbers,
and LaTeX alternatives: row breaks ``\\\\``, ``&``, ``|``, ``\\lor``, ``\\vee``, ``\\cup``, ...);
each part counts by its value after its last ``=``, so "9 * 2 = 18" is one candidate and a
worked solution with many intermediate numbers and one final marker passes. A bracketed group
(a tuple, interval or set) and a matrix are one candidate each; a segment that is one number
("1 000", ``15\\frac{39}{40}``, a decimal comma against a one-number reference) is one.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from rewards.extract import Extraction, canonical_answer, normalize_text, spoken_numbers
from rewards.numeric import NUMBER_TOKEN, fraction_key, parse_decimal_comma, parse_number

__all__ = ["count_candidates", "hedge_reason", "join_markers"]

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
    "approx",
    "sim",
    "simeq",
    "equiv",
    "cong",
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
    # (?![A-Za-z]), not \b: "2\\sqrt3" and "2\\frac13" glue a digit to the command name.
    r"|(?<=\d)(?:\s|\\[;:]|\\(?!(?:" + "|".join(_OPERATORS) + r")(?![A-Za-z]))[A-Za-z]+\*?"
    r"(?:\{[^{}]*\})?)+"
    r"(?=[-+]?\.?\d)",
    re.IGNORECASE,
)
_MAX_PARTS = 1000


def _part_keys(part: str, prose: bool = False) -> set[str]:
    value = part.rsplit("=", 1)[-1].strip()
    if not any(char.isdigit() for char in value):
        return set()
    number = parse_number(value)
    if number is None:
        said = spoken_numbers(value) if prose else None
        if said is not None and len(said) > 1:  # "17 (equivalent to 18 ...)": two values
            return {key for token in said if (key := _number_key(token))}
        tokens = NUMBER_TOKEN.findall(value)
        if len(tokens) == 1:
            number = parse_number(tokens[0])
    return {fraction_key(number.value) if number is not None else normalize_text(value)}


def _number_key(token: str) -> str:
    number = parse_number(token)
    return fraction_key(number.value) if number is not None else normalize_text(token)


# Stand-ins, while splitting, for a comma or semicolon inside brackets and for a matrix's cell
# and row separators.
_GROUPED, _GROUPED_CELL, _GROUPED_ROW = "\x00", "\x01", "\x02"
_ENVIRONMENT = re.compile(r"\\(begin|end)\s*\{(?:[pbvBV]?matrix|smallmatrix|array)\}")


def _split(segment: str) -> list[str]:
    """Parts between separators. A comma inside brackets, as in ``(1, 2)``, ``[0, 1)`` or
    ``\\{1, 2\\}``, belongs to one value (math-verify reads a tuple, interval or set, never
    equal to one of its members), and so does everything inside a matrix or array environment
    (its ``&`` and ``\\\\`` are its layout, not alternatives)."""
    chars = []
    depth = environments = 0
    index = 0
    while index < len(segment):
        char = segment[index]
        if char == "\\":
            environment = _ENVIRONMENT.match(segment, index)
            if environment is not None:
                environments = max(0, environments + (1 if environment[1] == "begin" else -1))
                chars.append(environment.group())
                index = environment.end()
                continue
            if environments and segment.startswith("\\\\", index):
                chars.append(_GROUPED_ROW)
                index += 2
                continue
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(0, depth - 1)
        elif (depth or environments) and char in ",;":
            char = _GROUPED
        elif environments and char == "&":
            char = _GROUPED_CELL
        chars.append(char)
        index += 1
    parts = _SEPARATORS.split("".join(chars), maxsplit=_MAX_PARTS)
    return [
        part.replace(_GROUPED, ",").replace(_GROUPED_CELL, "&").replace(_GROUPED_ROW, "\\\\")
        for part in parts
    ]


def count_candidates(segment: str, grouped: bool = True, prose: bool = False) -> int:
    """Distinct candidate values in a final-answer segment (see the module docstring).

    Args:
        segment: the final-answer text.
        grouped: a bracketed group such as ``(1, 2)`` or ``\\{1, 2\\}`` counts as one value
            (the default, for answers); False counts its members (for a reference's allowance).
        prose: count each number a sentence states (`rewards.extract.spoken_numbers`), for
            the segment of an "answer is" phrase: "17 (equivalent to 18)" states two.

    Examples:
        >>> count_candidates("3, 4, 5"), count_candidates("9 * 2 = 18 dollars")
        (3, 1)
        >>> count_candidates("x = 5 or x = -5"), count_candidates("$2,125")
        (2, 1)
    """
    if parse_number(segment) is not None:
        return 1  # one number, however grouped: "1 000", "12 345 678", "15\\frac{39}{40}"
    keys = set()
    parts = _split(segment) if grouped else _SEPARATORS.split(segment, maxsplit=_MAX_PARTS)
    for part in parts:
        keys |= _part_keys(part, prose)
    return len(keys)


def _distinct_markers(
    extraction: Extraction, key: Callable[[str], str] = canonical_answer
) -> list[str]:
    """The first spelling of each distinct marker value, in order."""
    firsts: dict[str, str] = {}
    for marker in extraction.markers:
        marker_key = key(marker)
        if marker_key:
            firsts.setdefault(marker_key, marker)
    return list(firsts.values())


def join_markers(extraction: Extraction, reference: str) -> Extraction:
    """One answer from several markers when the reference has at least as many values.

    ``\\boxed{-2} and \\boxed{1}`` against ``1, -2`` states the two roots, one per box: the
    answer becomes ``-2, 1``. Against a one-value reference, the extraction is returned as it
    is (and `hedge_reason` refuses it).

    Examples:
        >>> from rewards.extract import analyze
        >>> join_markers(analyze("\\\\boxed{-2} and \\\\boxed{1}"), "1, -2").answer
        '-2, 1'
    """
    markers = _distinct_markers(extraction)
    if len(markers) < 2 or len(markers) > _allowance(reference):
        return extraction
    joined = ", ".join(markers)
    return Extraction(joined, extraction.kind, joined, (joined,))


def hedge_reason(
    extraction: Extraction,
    reference: str,
    key: Callable[[str], str] = canonical_answer,
    same: Callable[[str, str], bool] | None = None,
) -> str | None:
    """Why a response hedges between answers, or None when it commits to one.

    Args:
        extraction: what `analyze` found in the response.
        reference: the bare reference answer (its candidate count is the allowance).
        key: maps a marker to the value it stands for; markers with different keys disagree.
        same: optional check that two markers with different keys still state one value (a
            symbolic comparison); asked only when at most `MAX_SAME_CHECKS` keys differ, so a
            response that sprays markers never buys more than a few checks.

    Returns:
        A reason starting with "hedged", or None.
    """
    markers = _distinct_markers(extraction, key)
    if len(markers) > 1 and not _same_value(markers, same):
        shown = ", ".join(repr(key(m)[:40]) for m in markers[:4])
        return f"hedged: explicit final answers disagree ({shown})"
    if extraction.answer is None:
        return None
    found = count_candidates(extraction.segment, prose=extraction.kind == "phrase")
    if found > 1:
        allowed = _allowance(reference)
        if allowed == 1 and parse_decimal_comma(extraction.segment) is not None:
            return None  # "3,5" against a single-number reference: a decimal comma
        if found > allowed:
            return (
                f"hedged: multiple candidate answers ({found} distinct values in the final "
                f"answer, the reference has {allowed})"
            )
    return None


def _allowance(reference: str) -> int:
    """How many values the reference states: ``{1, 2, 3}`` counts its three members."""
    return max(1, count_candidates(reference), count_candidates(reference, grouped=False))


MAX_SAME_CHECKS = 3
"""Most markers with different keys that `hedge_reason` asks `same` about."""


def _same_value(markers: list[str], same: Callable[[str, str], bool] | None) -> bool:
    """Whether every marker states the value of the last one, by `same`."""
    if same is None or len(markers) > MAX_SAME_CHECKS:
        return False
    last = markers[-1]
    return all(same(last, other) for other in markers[:-1])
