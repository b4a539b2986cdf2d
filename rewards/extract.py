"""Answer extraction from untrusted model text, and answer keys for voting.

Extraction reads only the last `TAIL_CHARS` characters, so its cost is bounded whatever the
input size. Priority, first found wins:

1. the last ``\\boxed{...}`` / ``\\fbox{...}`` (balanced-brace scan; a missing closing brace
   takes the rest of the text),
2. the last ``<answer>...</answer>`` (a missing closing tag takes the rest),
3. the last GSM8K marker ``#### N`` (a number must follow: ``#### Step 1`` is a heading),
4. the last phrase "the answer is X" / "Answer: X" / "Final answer: X" (up to the end of its
   sentence),
5. the final math expression, ``$...$``, ``\\(...\\)``, ``\\[...\\]`` or ``$$...$$`` (display
   math may span lines), when no digit follows it; the expressions just before it that only a
   separator ("or", ",", ";") divides from it join the segment, so ``$5$ or $6$`` still hedges,
6. the last number of the last non-empty line.

Markers 1-3 are explicit; `analyze` returns all of them so that `hedge_reason` (in `hedge.py`)
can refuse a response whose explicit markers disagree. Phrases are prose: models correct
themselves ("the answer is 4... no, wait, the answer is 5"), so only the last one counts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rewards.numeric import NUMBER_TOKEN, fraction_key, parse_decimal_comma, parse_number

__all__ = [
    "TAIL_CHARS",
    "Extraction",
    "analyze",
    "canonical_answer",
    "extract_answer",
    "find_boxed",
    "has_closed_box",
    "last_boxed",
    "majority_vote",
    "normalize_text",
    "prepare_reference",
    "sanitize",
    "spoken_numbers",
]

TAIL_CHARS = 4000
"""Extraction looks at this many trailing characters of a response."""

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u200b-\u200d\u2060\ufeff]")
_SURROGATES = re.compile(r"[\ud800-\udfff]")
_ODD_SPACES = re.compile(r"[\u00a0\u2000-\u200a\u202f\u205f\u3000]")
# (?<!\\) here and below: a run of backslashes is tried once, not once per character.
_BOXED = re.compile(r"(?<!\\)\\+(?:boxed|fbox)\b\s*")
_TOKEN = re.compile(r"[^\s$]*")
_ANSWER_OPEN = re.compile(r"<\s*answer\s*>", re.IGNORECASE)
_ANSWER_CLOSE = re.compile(r"<\s*/\s*answer\s*>", re.IGNORECASE)
# "#### 18" is a GSM8K final only when a number follows: "#### Step 1" is a markdown heading.
# The body runs to the next "####" or line end (callers strip it); a lazy body followed by
# "[ \t]*(?=####|\n|$)" was quadratic on long runs of spaces.
_GSM8K = re.compile(r"####[ \t]*((?=[-+$\\.\d])(?:(?!####)[^\n])*)")
_PHRASE = re.compile(
    r"(?i)(?:\bfinal\s+answer|\banswer)[*_]*\s*(?:is\b\s*:?|:|=)[*_\s]*(?P<seg>[^\n]*)"
)
# A phrase's answer ends with its sentence or where an explanation starts ("5, because ...";
# the comma is dropped in `_phrase_segment`: a ",?\s*" prefix here was quadratic on spaces).
_SENTENCE_END = re.compile(
    r"\.(?=\s|$)|\bI hope\b"
    r"|\b(?P<why>because|since|which|given|where|due to|thus|therefore|hence)\b",
    re.IGNORECASE,
)


# Math delimiters, found in one pass and paired in `_math_spans` (a regex with a lazy body per
# opener would be quadratic on a run of unclosed "$"). An escaped dollar "\\$5" is currency.
_MATH_DELIMITER = re.compile(r"\$\$|\\[\[\]()]|(?<!\\)\$")
_CLOSER = {"$$": "$$", "\\[": "\\]", "\\(": "\\)", "$": "$"}
_JOINER = re.compile(r"\s*(?:,|;|\bor\b|\band\b|\\q?quad)?\s*", re.IGNORECASE)
_MAX_MATH_CHARS = 1000
_MAX_JOINER_CHARS = 24  # "$5$, or $6$": a separator between expressions is short
_LAST_DECIMAL_COMMA = re.compile(r"(?<![\d,.])\d+,(?:\d{1,2}|\d{4,})$")
# A sentence ends at ".", "!" or "?" after a word, at the end of display math, or where a
# conclusion starts without a period ("... = 2/3 Therefore, the probability is 2/3").
_SENTENCE_BOUNDARY = re.compile(
    r"(?<=[A-Za-z)}\]$])[.!?](?=\s)|(?:\$\$|\\\])(?=\s)|\s(?=(?:Therefore|Thus|Hence)\b)"
)
_PROSE = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{4,}")
# A number said in a sentence: after a plain word (not a LaTeX command such as \\times), a
# parenthesis, a colon, "=" or the start.
_SPOKEN_NUMBER = re.compile(
    r"(?:^|(?<![\\A-Za-z])[A-Za-z]+(?:'[A-Za-z]+)?\s+|[(:=]\s*)(?P<number>"
    + NUMBER_TOKEN.pattern
    + r")"
    r"(?![\w^{}/])"
)


def sanitize(text: str, limit: int = TAIL_CHARS) -> str:
    """Keep the last `limit` characters, drop control and zero-width characters, fix surrogates.

    Args:
        text: raw model output.
        limit: how many trailing characters to keep.

    Returns:
        Printable text safe to encode as UTF-8 (lone surrogates become U+FFFD).
    """
    tail = text[-limit:]
    if not tail.isascii():
        tail = _SURROGATES.sub("\ufffd", _ODD_SPACES.sub(" ", tail)).replace("−", "-")
    return _CONTROL.sub("", tail)


def brace_end(text: str, start: int) -> tuple[int, bool]:
    """Index just past the brace group opening at `start`, and whether it closes at all."""
    depth = 0
    index = start
    length = len(text)
    while index < length:
        char = text[index]
        if char == "\\":
            index += 2  # an escaped brace \{ or \} does not count
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index + 1, True
        index += 1
    return length, False


def top_level_parts(text: str) -> list[str]:
    """`text` split at its commas outside every bracket (``(1, 2], \\{3, 4\\}`` -> two parts);
    one part when there is none."""
    parts, depth, begin = [], 0, 0
    for index, char in enumerate(text):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[begin:index])
            begin = index + 1
    parts.append(text[begin:])
    return parts


def _boxed_spans(text: str) -> list[tuple[int, str, bool]]:
    """(start, content, closed) of each top-level box."""
    spans: list[tuple[int, str, bool]] = []
    position = 0
    while True:
        match = _BOXED.search(text, position)
        if match is None:
            return spans
        start = match.end()
        if start < len(text) and text[start] == "{":
            end, closed = brace_end(text, start)
            content = text[start + 1 : end - 1] if closed else text[start + 1 :]
        else:  # \boxed 5: the next token (matched in place: slicing the rest was quadratic)
            token = _TOKEN.match(text, start)
            content = token.group() if token else ""
            end, closed = start + len(content), bool(content)
        spans.append((match.start(), content.strip(), closed))
        position = max(end, match.end())


def last_boxed(text: str) -> str | None:
    """Content of the last top-level ``\\boxed{}`` / ``\\fbox{}`` of `text`, or None.

    Examples:
        >>> last_boxed(r"so $x = \\boxed{\\frac{1}{2}}$.")
        '\\\\frac{1}{2}'
    """
    spans = _boxed_spans(text)
    return spans[-1][1] if spans else None


def find_boxed(text: str) -> list[str]:
    """Contents of every top-level ``\\boxed{}`` / ``\\fbox{}`` in order (nested ones stay inside).

    Examples:
        >>> find_boxed(r"so \\boxed{\\frac{1}{2}} and \\boxed{3")
        ['\\\\frac{1}{2}', '3']
    """
    return [content for _, content, _ in _boxed_spans(text)]


def has_closed_box(text: str) -> bool:
    """Whether `text` has a closed, non-empty ``\\boxed{}`` / ``\\fbox{}``."""
    return any(content and closed for _, content, closed in _boxed_spans(text))


def _answer_tags(text: str) -> list[tuple[int, str]]:
    tags = []
    for match in _ANSWER_OPEN.finditer(text):
        close = _ANSWER_CLOSE.search(text, match.end())
        body = text[match.end() : close.start() if close else len(text)]
        tags.append((match.start(), body.strip()))
    return tags


def _strip_wrappers(text: str) -> str:
    """Unwrap one answer: a whole-text ``\\boxed{}``, ``$...$``, trailing period."""
    text = text.strip()
    for _ in range(4):
        before = text
        match = _BOXED.match(text)
        if match and text[match.end() : match.end() + 1] == "{":
            end, closed = brace_end(text, match.end())
            if end >= len(text):  # the box spans the whole text (or never closes)
                text = text[match.end() + 1 : end - 1 if closed else end].strip()
        if len(text) >= 2 and text[0] == "$" and text[-1] == "$":
            text = text.strip("$").strip()
        text = text.rstrip(".").strip()
        if text == before:
            break
    return text


KINDS = ("boxed", "answer_tag", "gsm8k", "phrase", "math", "last_line", "none")  # Extraction.kind


@dataclass(frozen=True)
class Extraction:
    """What `analyze` found in a response.

    Args:
        answer: the final answer text, unwrapped (``"18"``, ``"\\frac{1}{2}"``), or None.
        kind: where it was found, one of `KINDS`: ``"boxed"``, ``"answer_tag"``, ``"gsm8k"``,
            ``"phrase"``, ``"math"`` (the final ``$...$``-style expression), ``"last_line"`` or
            ``"none"``.
        segment: the text the answer was taken from; hedge counting looks at all of it.
        markers: every explicit final-answer marker (boxed, answer tags, ``####``) in order.
    """

    answer: str | None
    kind: str
    segment: str
    markers: tuple[str, ...] = ()


def _math_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, content) of each math expression, in order; unpaired delimiters are text."""
    spans: list[tuple[int, int, str]] = []
    opener: re.Match[str] | None = None
    for match in _MATH_DELIMITER.finditer(text):
        token = match.group()
        if opener is None:
            if token in _CLOSER:
                opener = match
            continue
        if token != _CLOSER[opener.group()]:
            if token in _CLOSER and opener.group() == "$":
                opener = match  # "$5 and \\(x\\)": the lone "$" was currency
            continue
        content = text[opener.end() : match.start()]
        if opener.group() == "$" and "\n" in content:
            opener = match  # inline math never spans lines: this "$" opens anew
            continue
        spans.append((opener.start(), match.end(), content.strip()))
        opener = None
    return spans


def _outside_math(text: str) -> list[tuple[int, str, int]]:
    """(start, text, end) of each stretch of `text` outside math expressions."""
    pieces = []
    position = 0
    for start, end, _ in _math_spans(text):
        pieces.append((position, text[position:start], start))
        position = end
    pieces.append((position, text[position:], len(text)))
    return pieces


def _final_math(text: str) -> tuple[str, str] | None:
    """(answer, segment) from the final math expression, when nothing numeric follows it."""
    spans = [span for span in _math_spans(text) if span[2]]
    if not spans:
        return None
    start, end, content = spans[-1]
    if any(char.isdigit() for char in text[end:]) or len(content) > _MAX_MATH_CHARS:
        return None
    run = [content]
    for previous in reversed(spans[:-1]):
        between = text[previous[1] : start]
        if len(between) > _MAX_JOINER_CHARS or not _JOINER.fullmatch(between):
            break
        run.insert(0, previous[2])
        start = previous[0]
    return _strip_wrappers(content), " ; ".join(run)


def _last_phrase(text: str) -> str | None:
    last = None
    for last in _PHRASE.finditer(text):  # noqa: B007 - only the last phrase counts
        pass
    return None if last is None else last["seg"]


def _phrase_segment(text: str) -> str | None:
    segment = _last_phrase(text)
    if segment is None:
        return None
    # "Final Answer: The final answer is 5" nests one phrase in another: take the innermost.
    while (inner := _last_phrase(segment)) is not None:
        segment = inner
    end = _SENTENCE_END.search(segment)
    if end is None:
        return segment.strip()
    head = segment[: end.start()].rstrip()
    return (head[:-1] if end["why"] and head.endswith(",") else head).strip()


def spoken_numbers(text: str) -> list[str] | None:
    """The numbers a piece of prose states, or None when `text` is not prose.

    Prose has a word of four letters or more outside math, LaTeX commands and ``\\text{}``;
    a number in it counts when a plain word, "(", ":" or "=" comes before it, so in
    ``2 \\times 10^3 meters`` only the 2 is said, and "17 (equivalent to 18)" says two.

    Examples:
        >>> spoken_numbers("The largest $n$ is 34"), spoken_numbers("x^2 + 1") is None
        (['34'], True)
    """
    bare = _TEXT_CMD.sub(" ", text)
    if not _PROSE.search("".join(content for _, content, _ in _outside_math(bare))):
        return None
    return [match["number"].strip() for match in _SPOKEN_NUMBER.finditer(text)]


# After a phrase's leading math expression, prose: a word that is not a list joiner ("and"
# may open the prose, "and there are 12 left"; "or" offers an alternative and never does).
_PROSE_AFTER = re.compile(r"\s*,?\s*(?:and\s+)?(?!(?:or|and)\b)[A-Za-z]{2,}", re.IGNORECASE)


def _leading_math(segment: str) -> str | None:
    """The math expression a phrase's segment opens with, when prose follows it: in "the final
    answer is $\\frac{2}{3}$ of the class, or 8 people" the answer is 2/3 (math-verify reads
    the expression after the phrase too); the rest of the sentence explains it. An expression
    followed by a joiner and another value ("$4$ or $5$", "$4$, 5") is not one."""
    spans = _math_spans(segment)
    if not spans or spans[0][0] != 0 or not spans[0][2]:
        return None
    _, end, content = spans[0]
    if len(content) > _MAX_MATH_CHARS or not _PROSE_AFTER.match(segment, end):
        return None
    return _strip_wrappers(content) or None


def _phrase_answer(segment: str) -> str:
    """The answer inside a phrase written as a sentence: "The largest $n$ is 34" gives 34.

    A segment that is prose (see `spoken_numbers`) is reduced to its final math expression,
    or to the one number it states; anything else is the answer as written. (A segment that
    opens with a math expression followed by prose is that expression: `_leading_math`.)
    """
    if parse_number(segment) is not None:
        return segment  # "5 apples": a number and its unit
    said = spoken_numbers(segment)
    if said is None:
        return segment
    final = _final_math(segment)
    if final is not None:
        return final[0]
    return said[0] if len(said) == 1 else segment


def analyze(response: str) -> Extraction:
    """Find the final answer of a response and every explicit answer marker in it.

    Args:
        response: model output (only its last `TAIL_CHARS` characters are read).

    Returns:
        The `Extraction`; ``answer`` is None when nothing answer-like was found.
    """
    text = sanitize(response)
    tags = _answer_tags(text)
    boxed = [(start, content) for start, content, _ in _boxed_spans(text)]
    gsm8k = [(m.start(), m.group(1).strip()) for m in _GSM8K.finditer(text)]
    found_all = sorted(boxed + tags + gsm8k)
    markers = tuple(m for m in (_strip_wrappers(body) for _, body in found_all) if m)
    for kind, found in (("boxed", boxed), ("answer_tag", tags), ("gsm8k", gsm8k)):
        # Empty markers (an echoed "put it in \boxed{}") are skipped.
        bodies = [body for body in (_strip_wrappers(b) for _, b in found) if body]
        if bodies:
            return Extraction(bodies[-1], kind, bodies[-1], markers)
    phrase = _phrase_segment(text)
    if phrase:
        lead = _leading_math(phrase.strip())
        if lead is not None:
            return Extraction(lead, "phrase", lead)
        segment = _strip_wrappers(phrase)
        return Extraction(_phrase_answer(segment) or None, "phrase", segment)
    final = _final_math(text)
    if final is not None and final[0]:
        return Extraction(final[0], "math", final[1])
    lines = [line for line in text.splitlines() if line.strip()]
    # "1 000" and "1000,99" are one number each, not "000" and "99".
    if lines and (parse_number(lines[-1]) or parse_decimal_comma(lines[-1])) is not None:
        return Extraction(lines[-1].strip(), "last_line", lines[-1].strip())
    if lines:
        last = None
        for last in NUMBER_TOKEN.finditer(lines[-1]):  # noqa: B007 - the last number counts
            pass
        if last is not None:
            decimal = _LAST_DECIMAL_COMMA.search(lines[-1], 0, last.end())
            if decimal is not None and decimal.end() == last.end():  # "Soucis : 2,74 $": 2.74
                return Extraction(decimal.group(), "last_line", decimal.group())
            return Extraction(last.group().strip(), "last_line", _sentence(lines[-1], last.start()))
    return Extraction(None, "none", "")


def _sentence(line: str, position: int) -> str:
    """The sentence of `line` around `position`, to the line's end: the hedge count of a
    one-line essay looks at its conclusion, not at every number it worked through. A period
    after a digit ends no sentence here, so "3. 4. 5. 6." stays one list; a capitalised
    "Therefore", "Thus" or "Hence" starts one, period or not."""
    start = 0
    for boundary in _SENTENCE_BOUNDARY.finditer(line, 0, position):
        start = boundary.end()
    return line[start:].strip()


def extract_answer(response: str) -> str | None:
    """The final answer of a response, or None.

    Args:
        response: model output; any string (non-strings give None).

    Returns:
        The answer text, unwrapped from ``\\boxed{}`` and ``$...$``.

    Examples:
        >>> extract_answer("9 * 2 = 18, so the answer is \\\\boxed{18}.")
        '18'
        >>> extract_answer("She pays $5.\\n#### 5")
        '5'
        >>> extract_answer("no digits here") is None
        True
    """
    if not isinstance(response, str):
        return None
    return analyze(response).answer


def prepare_reference(reference: str) -> str:
    """The answer inside a reference: the final of a GSM8K solution, the last boxed of a MATH one.

    Args:
        reference: a bare answer (``"18"``) or a full reference solution.

    Returns:
        The bare answer, stripped.
    """
    text = reference.strip()
    if "####" in text:
        return text.rsplit("####", 1)[1].strip()
    if "boxed" in text or "fbox" in text:
        boxed = [_strip_wrappers(b) for b in find_boxed(text)]
        if boxed and boxed[-1]:
            # "\\boxed{1} and \\boxed{-2}": both roots. A value boxed twice in two notations
            # ("15\\frac{39}{40}", then "\\frac{639}{40}") is one answer: the last spelling.
            distinct = {canonical_answer(b): b for b in boxed if b}
            return ", ".join(distinct.values()) if len(distinct) > 1 else boxed[-1]
    return text


_TEXT_NOISE = re.compile(r"(?<!\\)\\+(?:left|right|displaystyle|!|,|;|:)|\s+")
_TEXT_CMD = re.compile(r"(?<!\\)\\+(?:text|textbf|textrm|mathrm|mbox)\s*\{([^{}]*)\}")


def normalize_text(text: str) -> str:
    """Lowercased answer text with LaTeX spacing, ``$`` and whitespace differences removed."""
    text = _TEXT_CMD.sub(r"\1", _strip_wrappers(text))
    text = text.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    return _TEXT_NOISE.sub(" ", text).strip().lower().replace(" ", "")


def canonical_answer(text: str) -> str:
    """A key under which equivalent answers vote together.

    Numbers become their exact fraction (``"0.5"``, ``"\\frac{1}{2}"`` and ``"1/2"`` all give
    ``"1/2"``; ``"$2,125"`` gives ``"2125"``; a percent sign is dropped, so ``"20%"`` votes with
    ``"20"``). Anything else is lowercased with whitespace and LaTeX spacing removed.

    Args:
        text: an extracted answer.

    Returns:
        The key; ``""`` for an empty answer.

    Examples:
        >>> canonical_answer("\\\\dfrac{2}{4}") == canonical_answer("0.5")
        True
        >>> canonical_answer(" X + 1 ")
        'x+1'
    """
    number = parse_number(text)
    if number is not None:
        return fraction_key(number.value)
    return normalize_text(text)


def majority_vote(answers: Sequence[str | None]) -> tuple[str | None, int]:
    """The most common answer by `canonical_answer`, and how many answers gave it.

    Args:
        answers: one extracted answer per agent; None and empty answers are ignored.

    Returns:
        ``(answer, count)`` where answer is the first agent's spelling of the winning key; ties
        go to the key that appeared first. ``(None, 0)`` when no agent answered.

    Examples:
        >>> majority_vote(["0.5", None, "7", "\\\\frac{1}{2}", "7"])
        ('0.5', 2)
    """
    counts: dict[str, int] = {}
    first: dict[str, str] = {}
    for answer in answers:
        if answer is None:
            continue
        key = canonical_answer(answer)
        if not key:
            continue
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, answer)
    if not counts:
        return None, 0
    best = max(counts, key=lambda key: counts[key])  # max keeps the first key among equals
    return first[best], counts[best]
