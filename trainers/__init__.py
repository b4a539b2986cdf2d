"""Trainers: the rollout engine, TRL adapters (GRPO, PPO, SFT, DPO), evaluation and the scripts'
plumbing. ``from trainers import load_environment`` gives any registered env as a stock
`GRPOTrainer`'s ``train_dataset``, ``rollout_func`` and ``reward_funcs`` (`trainers.algorithms.grpo`);
the import is lazy, so ``import trainers`` pulls in no TRL until then."""

from __future__ import annotations

from typing import Any

__all__ = ["EnvBundle", "load_environment"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from trainers.algorithms import grpo

        return getattr(grpo, name)
    raise AttributeError(f"module 'trainers' has no attribute {name!r}")
