"""The verifier contract: `Verdict` and the `Verifier` protocol."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class Verdict:
    """What a verifier says about one response.

    Args:
        score: float in [0.0, 1.0]; 1.0 means correct.
        extracted: the answer parsed from the response, or None when none was found.
        reason: why it scored what it did (always set on a score below 1.0).
    """

    score: float
    extracted: str | None = None
    reason: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.score, (int, float)) or not math.isfinite(self.score):
            raise ValueError(f"Verdict.score must be a finite float, got {self.score!r}")
        if not 0.0 <= self.score <= 1.0:
            raise ValueError(f"Verdict.score must lie in [0, 1], got {self.score!r}")

    @property
    def correct(self) -> bool:
        """True when the score is at least 0.5 (binary view of a graded score)."""
        return self.score >= 0.5


@runtime_checkable
class Verifier(Protocol):
    """Anything with a name and `verify(response, reference) -> Verdict`.

    Model output (the response) never makes `verify` raise or hang; a malformed reference
    raises `ValueError`.
    """

    name: str

    def verify(self, response: str, reference: str) -> Verdict: ...
