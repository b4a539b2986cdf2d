"""Trainers: the rollout engine, TRL adapters (GRPO, PPO, SFT, DPO), evaluation and the scripts'
plumbing, one subpackage per concern (docs/architecture.md). ``from trainers import
load_environment`` gives any registered env as a stock `GRPOTrainer`'s ``train_dataset``,
``rollout_func`` and ``reward_funcs``, and `build_grpo_trainer` / `build_ppo_trainer` the
project's trainers (`trainers.algorithms`); the import is lazy, so ``import trainers`` pulls in
no TRL until then."""

from __future__ import annotations

import importlib
from typing import Any

# name -> the module that defines it, imported on first use
_LAZY = {
    "EnvBundle": "trainers.algorithms.grpo",
    "load_environment": "trainers.algorithms.grpo",
    "build_grpo_trainer": "trainers.algorithms.grpo",
    "build_ppo_trainer": "trainers.algorithms.ppo",
}
__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'trainers' has no attribute {name!r}")
