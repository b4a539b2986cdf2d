"""The toy family's generator and scorer, in one file (as reasoning-gym keeps a task's): the last
digit of a sum of `difficulty` + 1 digits."""

from __future__ import annotations

import random

from envs.tasks.sources import Problem
from rewards.base import Verdict
from rewards.extract import last_boxed


def generate_problem(index: int, *, difficulty: int = 1, seed: int = 0) -> Problem:
    rng = random.Random(f"toy-{seed}-{difficulty}-{index}")
    digits = [rng.randrange(10) for _ in range(difficulty + 1)]
    question = f"What is the last digit of {' + '.join(map(str, digits))}?"
    meta = {"source": "toy", "index": index, "difficulty": difficulty}
    pid = f"toy/d{difficulty}/s{seed}/{index}"
    return Problem(id=pid, question=question, answer=str(sum(digits) % 10), metadata=meta)


class LastDigitVerifier:
    """1 when the last ``\\boxed{}`` holds the reference digit.

    >>> LastDigitVerifier().verify("\\\\boxed{7}", "7").score
    1.0
    >>> LastDigitVerifier().verify("\\\\boxed{8}", "7").score
    0.0
    """

    name = "toy_last_digit"

    def verify(self, response: str, reference: str) -> Verdict:
        boxed = last_boxed(response) if isinstance(response, str) else None
        score = float(boxed is not None and boxed.strip() == reference)
        return Verdict(score, boxed, "correct" if score else "wrong or missing")
