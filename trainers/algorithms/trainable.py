"""Training part of a model: freeze every parameter whose name does not match a regex.

Every builder (`build_grpo_trainer`, `build_sft_trainer`, `build_dpo_trainer`) applies its
``trainable`` regex with `freeze_except` after building the trainer and before ``train()`` makes
the optimizer from the parameters that still require grad. The CPU configs of those algorithms
also share their `no_gradient_checkpointing` default.
"""

from __future__ import annotations

import logging
import re
from dataclasses import field
from typing import Any

logger = logging.getLogger(__name__)


def freeze_except(model: Any, pattern: str) -> list[str]:
    """Freeze every parameter of `model` whose name does not match the regex `pattern`.

    Returns the names left trainable; raises if none match (naming a few parameters).
    """
    regex = re.compile(pattern)
    params = dict(model.named_parameters())
    kept = {name: param for name, param in params.items() if regex.search(name)}
    if not kept:
        raise ValueError(
            f"trainable={pattern!r} matches no parameter; names look like {list(params)[:4]}"
        )
    for name, param in params.items():
        param.requires_grad_(name in kept)
    count = sum(param.numel() for param in kept.values())
    logger.info("training %d parameter tensors (%d values) matching %r", len(kept), count, pattern)
    return list(kept)


def no_gradient_checkpointing() -> Any:
    """The ``gradient_checkpointing`` field of the CPU configs: unset (None), so it does not
    turn checkpointing on. TRL's configs default it to True; it only recomputes the forward pass
    for memory a small model never needs (the same gradients; the main job's GRPO steps take
    4.5 s with it off, 5.1 s on). transformers 5 renamed it ``activation_checkpointing`` and
    warns (FutureWarning) whenever the old name holds a value, so the CPU configs leave it None;
    `TrainingArguments` then sets both names to False. ``--activation_checkpointing true``
    turns it on for a large model (``--gradient_checkpointing true`` too, with that warning)."""
    return field(
        default=None,
        metadata={"help": "Deprecated alias of --activation_checkpointing (transformers 5)."},
    )
