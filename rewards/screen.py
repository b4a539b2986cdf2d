"""What every verifier does before it compares: the reference checked (`check_reference`), the
response screened (`not_a_string`, `screen`: no answer, hedged) and numbers read from answers and
references (`answer_number`, `reference_number`, `reference_decimal_comma`).

Model output never makes these raise: a response that is not a string, states no answer or
hedges gets its zero `Verdict`. A bad reference raises `ValueError`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from rewards.base import Verdict
from rewards.extract import Extraction, analyze, prepare_reference
from rewards.hedge import hedge_reason, join_markers
from rewards.numeric import NUMBER_TOKEN, Num, parse_decimal_comma, parse_number

__all__ = [
    "NO_ANSWER",
    "answer_number",
    "check_reference",
    "not_a_string",
    "reference_decimal_comma",
    "reference_number",
    "screen",
]

NO_ANSWER = "no answer found (no \\boxed{}, <answer>, ####, 'the answer is' or final number)"


def check_reference(reference: object, verifier: str, prepare: bool = True) -> str:
    """Validate a reference and return its bare answer.

    Raises:
        ValueError: the reference is not a string or is empty.
    """
    if not isinstance(reference, str):
        raise ValueError(  # noqa: TRY004 - the Verifier contract: a bad reference is a ValueError
            f"{verifier} verifier: reference must be a non-empty str, got "
            f"{type(reference).__name__} {reference!r:.80}"
        )
    bare = prepare_reference(reference) if prepare else reference.strip()
    if not bare:
        raise ValueError(f"{verifier} verifier: reference is empty ({reference!r:.80})")
    return bare


def not_a_string(response: object) -> Verdict | None:
    """The zero verdict for a response that is not a string, else None."""
    if isinstance(response, str):
        return None
    return Verdict(0.0, None, f"response must be a str, got {type(response).__name__}")


def screen(
    response: object, reference: str, same: Callable[[str, str], bool] | None = None
) -> Extraction | Verdict:
    """Extract the answer, or the zero verdict when there is none or it hedges (`same`: see
    `rewards.hedge.hedge_reason`)."""
    rejected = not_a_string(response)
    if rejected is not None:
        return rejected
    extraction = join_markers(analyze(response), reference)  # type: ignore[arg-type]
    if extraction.answer is None:
        return Verdict(0.0, None, NO_ANSWER)
    hedged = hedge_reason(extraction, reference, same=same)
    if hedged is not None:
        return Verdict(0.0, extraction.answer, hedged)
    return extraction


@functools.lru_cache(maxsize=65536)
def reference_number(reference: str) -> Num | None:
    """The number a bare reference states, or None (cached: references repeat)."""
    return parse_number(reference)


_REFERENCE_DECIMAL_COMMA = re.compile(r"-?(?:0,\d+|\d+,(?:\d\d|\d{4,}))")


def reference_decimal_comma(reference: str) -> Num | None:
    """A reference written with a decimal comma, as math-verify reads one: ``1,22`` or ``0,111``
    (one digit after the comma, as in ``1,2``, is a list of two answers)."""
    if _REFERENCE_DECIMAL_COMMA.fullmatch(reference.strip().strip("$").strip()) is None:
        return None
    return parse_decimal_comma(reference)


def answer_number(answer: str) -> Num | None:
    """The number an extracted answer states: the whole text, the part after its last ``=``, or
    its only number token."""
    number = parse_number(answer) or parse_decimal_comma(answer)
    if number is None and "=" in answer:
        number = parse_number(answer.rsplit("=", 1)[1])
    if number is None:
        tokens = NUMBER_TOKEN.findall(answer)
        # Letters, powers and factorials change the number: "18x", "18^2", "18!".
        if len(tokens) == 1 and not re.search(r"[A-Za-z\\^!]", answer.replace(tokens[0], "")):
            number = parse_number(tokens[0])
    return number
