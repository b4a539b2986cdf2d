"""Verifiers: turn model answers into rewards.

Quick use::

    from rewards import get_verifier
    verdict = get_verifier("math").verify("... so the answer is \\boxed{18}.", "18")
    verdict.score, verdict.extracted, verdict.reason   # 1.0, "18", "correct: numbers match"

Everything here imports without torch; math-verify is imported on the first symbolic check.
A reward server (`rewards.serving.server`, FastAPI) serves any verifier over HTTP;
`RemoteVerifier` (``get_verifier("remote:http://127.0.0.1:8000/math")``) uses one.
"""

from __future__ import annotations

from rewards.base import Verdict, Verifier
from rewards.batch import verify_batch
from rewards.extract import canonical_answer, extract_answer, last_boxed, majority_vote
from rewards.reach import ReachVerifier
from rewards.registry import (
    CompositeVerifier,
    build_verifiers,
    deregister_verifier,
    get_verifier,
    list_verifiers,
    register_verifier,
)
from rewards.remote import RemoteVerifier, RewardRequestError, RewardServerError
from rewards.reward_funcs import as_reward_func
from rewards.shaping import (
    FormatVerifier,
    PartialNumericVerifier,
    SimilarityVerifier,
    UniqueCharsVerifier,
)
from rewards.symbolic import is_math_verify_available
from rewards.verifiers import ExactVerifier, LabelVerifier, MathVerifier, NumericVerifier

__all__ = [
    "CompositeVerifier",
    "ExactVerifier",
    "FormatVerifier",
    "LabelVerifier",
    "MathVerifier",
    "NumericVerifier",
    "PartialNumericVerifier",
    "ReachVerifier",
    "RemoteVerifier",
    "RewardRequestError",
    "RewardServerError",
    "SimilarityVerifier",
    "UniqueCharsVerifier",
    "Verdict",
    "Verifier",
    "as_reward_func",
    "build_verifiers",
    "canonical_answer",
    "deregister_verifier",
    "extract_answer",
    "get_verifier",
    "is_math_verify_available",
    "last_boxed",
    "list_verifiers",
    "majority_vote",
    "register_verifier",
    "verify_batch",
]
