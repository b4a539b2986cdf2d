"""TRL reward-function adapter: any verifier as ``reward_func(completions, **columns)``.

Named ``reward_funcs`` (not ``trl``) so that it never shadows the ``trl`` package.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rewards.base import Verifier
from rewards.registry import get_verifier

__all__ = ["as_reward_func", "completion_text"]

RewardFunc = Callable[..., list[float | None]]


def completion_text(completion: Any) -> Any:
    """The text of a TRL completion: a string as is; for a conversation (a list of
    ``{"role", "content"}`` messages) the last assistant message's content, with list-of-parts
    content joined. Anything else is returned unchanged (the verifier scores it 0)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        completion = [completion]
    if isinstance(completion, Sequence) and completion:
        messages = [m for m in completion if isinstance(m, dict)]
        assistant = [m for m in messages if m.get("role") == "assistant"] or messages
        if assistant:
            content = assistant[-1].get("content")
            if isinstance(content, list):  # multimodal parts: [{"type": "text", "text": ...}]
                texts = [p.get("text") for p in content if isinstance(p, dict)]
                return "".join(t for t in texts if isinstance(t, str))
            return content
    return completion


def as_reward_func(verifier: Verifier | str, reference_column: str = "answer") -> RewardFunc:
    """Turn a verifier into a TRL reward function.

    Args:
        verifier: a verifier or its registry name.
        reference_column: the dataset column holding the reference answer (default "answer").

    Returns:
        ``reward_func(completions, **columns) -> list[float | None]``, named
        ``<verifier.name>_reward``; a row whose reference is None gets None (TRL skips it).

    Examples:
        >>> reward = as_reward_func("gsm8k")
        >>> reward.__name__
        'gsm8k_reward'
        >>> reward(["#### 18", [{"role": "assistant", "content": "#### 7"}], "x"],
        ...        answer=["18", "18", None])
        [1.0, 0.0, None]
    """
    resolved = get_verifier(verifier) if isinstance(verifier, str) else verifier
    if not isinstance(resolved, Verifier):
        raise TypeError(f"as_reward_func needs a verifier, got {type(verifier).__name__}")

    def reward_func(completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        if reference_column not in kwargs:
            raise ValueError(
                f"{reward_func.__name__}: the dataset needs a {reference_column!r} column; "
                f"got columns {sorted(kwargs)}"
            )
        references = kwargs[reference_column]
        if len(references) != len(completions):
            raise ValueError(
                f"{reward_func.__name__}: {len(completions)} completions but "
                f"{len(references)} values in column {reference_column!r}"
            )
        scores: list[float | None] = [None] * len(completions)
        rows = [i for i, reference in enumerate(references) if reference is not None]
        texts = [completion_text(completions[i]) for i in rows]
        refs = [str(references[i]) for i in rows]
        batch = getattr(resolved, "verify_batch", None)
        # A verifier with its own batch call (a reward server, a learned verifier) gets the
        # whole batch in one call; others are asked row by row.
        verdicts = (
            batch(texts, refs)
            if callable(batch)
            else [resolved.verify(t, r) for t, r in zip(texts, refs, strict=True)]
        )
        if len(verdicts) != len(rows):
            raise ValueError(
                f"{resolved.name}.verify_batch returned {len(verdicts)} verdicts for "
                f"{len(rows)} rows"
            )
        for i, verdict in zip(rows, verdicts, strict=True):
            scores[i] = verdict.score
        return scores

    reward_func.__name__ = reward_func.__qualname__ = f"{resolved.name}_reward"
    return reward_func
