"""Graded reward shapes from the original multi-agent GRPO scripts, as verifiers.

Binary correctness is a noisy RL signal; these give partial credit. Every score lies in [0, 1]:
where an original script returned a larger number (100 x a similarity ratio, a raw count of
characters) the docstring says how it was scaled.
"""

from __future__ import annotations

import difflib
import math
import re

from rewards.base import Verdict
from rewards.extract import TAIL_CHARS, analyze, has_closed_box, sanitize
from rewards.hedge import hedge_reason
from rewards.numeric import numbers_match
from rewards.screen import NO_ANSWER, answer_number, check_reference, not_a_string

__all__ = [
    "FormatVerifier",
    "PartialNumericVerifier",
    "SimilarityVerifier",
    "UniqueCharsVerifier",
]


class SimilarityVerifier:
    """difflib ``SequenceMatcher`` ratio between the response and the reference.

    The original script rewarded ``100 * ratio``; the score here is the ratio itself, in [0, 1].
    Only the last `max_chars` characters of each side are compared, which bounds the time.

    Args:
        use_answer: compare the extracted answer instead of the whole response (default False).
        max_chars: characters of each side compared (default 2000).

    Examples:
        >>> SimilarityVerifier().verify("the cat sat", "the cat sat").score
        1.0
        >>> SimilarityVerifier().verify("xyz", "the cat sat").score
        0.0
    """

    name = "similarity"

    def __init__(self, use_answer: bool = False, max_chars: int = 2000) -> None:
        if max_chars < 1:
            raise ValueError(f"similarity verifier: max_chars must be >= 1, got {max_chars!r}")
        self.use_answer = bool(use_answer)
        self.max_chars = int(max_chars)

    def verify(self, response: str, reference: str) -> Verdict:
        """Score the similarity of one response to one reference."""
        gold = check_reference(reference, self.name, prepare=False)[-self.max_chars :]
        rejected = not_a_string(response)
        if rejected is not None:
            return rejected
        text = sanitize(response, self.max_chars).strip()
        extracted = None
        if self.use_answer:
            extracted = analyze(response).answer
            text = extracted or ""
        ratio = difflib.SequenceMatcher(None, text, gold, autojunk=False).ratio()
        return Verdict(ratio, extracted, f"similarity ratio {ratio:.3f} (x100 = {100 * ratio:.1f})")


class UniqueCharsVerifier:
    """Number of distinct characters in the response, divided by `cap` and clipped to 1.

    The original script rewarded the raw count; ``cap`` maps it into [0, 1]. The reference is
    not used (any string is accepted).

    Args:
        cap: the count that earns a full score (default 100).

    Examples:
        >>> UniqueCharsVerifier(cap=4).verify("abcd", "").score
        1.0
        >>> UniqueCharsVerifier(cap=4).verify("aaaa", "").score
        0.25
    """

    name = "unique_chars"

    def __init__(self, cap: int = 100) -> None:
        if cap < 1:
            raise ValueError(f"unique_chars verifier: cap must be >= 1, got {cap!r}")
        self.cap = int(cap)

    def verify(self, response: str, reference: str) -> Verdict:
        """Score one response by how many distinct characters it uses."""
        if not isinstance(reference, str):
            check_reference(reference, self.name)
        rejected = not_a_string(response)
        if rejected is not None:
            return rejected
        count = len(set(response))
        return Verdict(
            min(1.0, count / self.cap), None, f"{count} unique characters (cap {self.cap})"
        )


class PartialNumericVerifier:
    """Graded numeric closeness: ``1 - |pred - ref| / |ref|``, floored at 0.

    An exact match (under the `math` verifier's number rules) scores 1; a zero reference scores
    1 only for a zero answer. Hedged responses score 0. A percent sign is read as written
    (``19%`` against ``20`` scores 0.95).

    Examples:
        >>> PartialNumericVerifier().verify("#### 90", "100").score
        0.9
        >>> PartialNumericVerifier().verify("#### 300", "100").score
        0.0
    """

    name = "partial_numeric"

    def verify(self, response: str, reference: str) -> Verdict:
        """Score how close the response's number is to the reference number."""
        bare = check_reference(reference, self.name)
        gold = answer_number(bare)
        if gold is None:
            raise ValueError(
                f"partial_numeric verifier: reference {reference!r:.80} is not a number"
            )
        rejected = not_a_string(response)
        if rejected is not None:
            return rejected
        extraction = analyze(response)
        if extraction.answer is None:
            return Verdict(0.0, None, NO_ANSWER)
        hedged = hedge_reason(extraction, bare)
        if hedged is not None:
            return Verdict(0.0, extraction.answer, hedged)
        pred = answer_number(extraction.answer)
        if pred is None:
            return Verdict(0.0, extraction.answer, "answer is not a number")
        if numbers_match(gold, pred) or pred.value == gold.value:
            return Verdict(1.0, extraction.answer, "exact match")
        if gold.value == 0:
            return Verdict(0.0, extraction.answer, "reference is 0 and the answer is not")
        error = abs(pred.value - gold.value) / abs(gold.value)
        # float(Fraction) raises OverflowError past ~1e308 (a tiny reference, a huge answer).
        shown = float(error) if error < 10**300 else math.inf
        score = max(0.0, 1.0 - shown)
        return Verdict(score, extraction.answer, f"relative error {shown:.3g}")


_ANSWER_TAG = re.compile(r"<answer>\s*\S.*?</answer>", re.DOTALL | re.IGNORECASE)


class FormatVerifier:
    """1.0 when the response states its answer in the expected format, else 0.0.

    Args:
        style: ``"answer_tag"`` (``<answer>...</answer>`` with content), ``"boxed"`` (a
            non-empty, closed ``\\boxed{}``), ``"any"`` (either; the default) or
            ``"think_answer"`` (``<think>...</think>`` then ``<answer>...</answer>`` and nothing
            else, as TRL's ``think_format_reward`` with an answer).
        pattern: a custom regular expression searched (DOTALL) instead of a style.

    Tags and boxes are looked for in the last 4000 characters, which bounds the time.

    Examples:
        >>> FormatVerifier().verify("so \\\\boxed{4}", "").score
        1.0
        >>> FormatVerifier(style="answer_tag").verify("4", "").reason
        'no <answer>...</answer> tags'
    """

    name = "format"
    _STYLES = ("answer_tag", "boxed", "any", "think_answer")

    def __init__(self, style: str = "any", pattern: str | None = None) -> None:
        if style not in self._STYLES:
            raise ValueError(f"format verifier: style must be one of {self._STYLES}, got {style!r}")
        self.style = style
        self.pattern = pattern
        self._regex = re.compile(pattern, re.DOTALL) if pattern is not None else None

    def _think_answer(self, text: str) -> bool:
        body = text.strip()
        if not body.startswith("<think>") or body.count("<think>") != 1:
            return False
        close = body.find("</think>")
        rest = body[close + len("</think>") :].strip() if close >= 0 else ""
        return bool(_ANSWER_TAG.fullmatch(rest[-TAIL_CHARS:])) and rest.count("<answer>") == 1

    def verify(self, response: str, reference: str) -> Verdict:
        """Score whether one response follows the format (the reference is not used)."""
        if not isinstance(reference, str):
            check_reference(reference, self.name)
        rejected = not_a_string(response)
        if rejected is not None:
            return rejected
        tail = sanitize(response)
        if self._regex is not None:
            ok, missing = bool(self._regex.search(tail)), f"no match for {self.pattern!r}"
        elif self.style == "think_answer":
            ok, missing = self._think_answer(response), "not <think>...</think><answer>...</answer>"
        else:
            tagged = self.style != "boxed" and bool(_ANSWER_TAG.search(tail))
            boxed = self.style != "answer_tag" and has_closed_box(tail)
            ok = tagged or boxed
            missing = {
                "answer_tag": "no <answer>...</answer> tags",
                "boxed": "no \\boxed{} answer",
                "any": "no <answer> tags and no \\boxed{} answer",
            }[self.style]
        return Verdict(1.0, None, "format ok") if ok else Verdict(0.0, None, missing)
