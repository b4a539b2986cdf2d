"""A LoRA adapter per role on one base model, trained by the multi-agent GRPO and PPO trainers.

Design
------
One `PeftModel` holds one named adapter per role (``solver``, ``critic``, ``refiner``); the base
weights are shared and frozen. Rollouts already play mixed-role batches in one ``generate`` call
(peft's per-row ``adapter_names``, `agents.roles.build_lora_role_map`). Training cannot use
per-row adapters (peft refuses ``adapter_names`` in training mode), so `RoleAdapterMixin` splits
every forward pass the trainer makes into one sub-batch per role, runs each under its role's
adapter, and puts the per-token log-probabilities back in row order. Only that dispatch changes:
TRL's loss, its normalisation and its optimizer see the same tensors as with a shared model, and
each adapter's gradient comes from its own role's turns alone.

Which row runs under which adapter is `trainers.roles.dispatch.PerRoleMixin`'s work, shared with
a model per role (`trainers.roles.models`).

Checkpoints and the final folder hold one adapter per role in ``<folder>/<role>/`` (peft's layout
for named adapters); `load_role_adapters` reads them back onto the base model for evaluation, and
``resume_from_checkpoint`` reloads every role's adapter.

Not supported: TRL's vLLM generation (its server holds one set of weights) and reference-model
adapters named ``ref``; ``beta > 0`` uses the base model (adapters disabled) as reference, as TRL
does for a fresh adapter.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from trainers import compat
from trainers.roles.dispatch import PerRoleMixin, with_mixin

logger = logging.getLogger(__name__)


def add_role_adapters(
    model: Any, roles: Sequence[str], r: int = 8, alpha: int = 16, dropout: float = 0.0
) -> Any:
    """`model` (a causal LM) as a `PeftModel` with one trainable LoRA adapter per role.

    Every adapter is rank `r` on all linear layers and starts as the identity (LoRA's B = 0), so the
    team starts exactly as the base model plays.
    """
    from peft import LoraConfig

    from agents.roles import add_lora_adapters

    config = LoraConfig(
        r=r,
        lora_alpha=alpha,
        lora_dropout=dropout,
        target_modules="all-linear",
        task_type="CAUSAL_LM",
    )
    peft_model = add_lora_adapters(model, roles, config)
    peft_model.set_adapter(roles[0])
    _train_all(peft_model, roles)
    return peft_model


def _adapter_params(model: Any, roles: Sequence[str]) -> Iterator[torch.nn.Parameter]:
    for name, param in model.named_parameters():
        if "lora_" in name and any(f".{role}." in name for role in roles):
            yield param


def _train_all(model: Any, roles: Sequence[str]) -> None:
    """peft's `set_adapter` freezes the inactive adapters; every role's adapter stays trainable."""
    for param in _adapter_params(model, roles):
        param.requires_grad_(True)


def load_role_adapters(base: Any, folder: str | os.PathLike, roles: Sequence[str]) -> Any:
    """`base` with the adapters saved in ``folder/<role>/`` (inference mode)."""
    from peft import PeftModel

    folder = Path(folder)
    missing = [r for r in roles if not (folder / r / "adapter_config.json").is_file()]
    if missing:
        raise FileNotFoundError(
            f"{folder} has no adapter for role(s) {missing}: expected {folder}/<role>/"
            "adapter_config.json, as a run with --role_adapters true writes"
        )
    model = PeftModel.from_pretrained(base, str(folder / roles[0]), adapter_name=roles[0])
    for role in roles[1:]:
        model.load_adapter(str(folder / role), adapter_name=role)
    return model


def saved_roles(folder: str | os.PathLike) -> list[str]:
    """Roles whose adapters a run with role adapters saved in `folder` (sorted)."""
    folder = Path(folder)
    return sorted(p.parent.name for p in folder.glob("*/adapter_config.json"))


class RoleAdapterMixin(PerRoleMixin):
    """Mixed into `GRPOTrainer` (or `MultiAgentPPOTrainer`): each row runs under its role's adapter.

    The trainer's model must be a `PeftModel` from `add_role_adapters`; `role_adapters` lists the
    roles in the order of their ``role_index``.
    """

    what = "role adapters"

    def __init__(self, *args: Any, role_adapters: Sequence[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        model = self.accelerator.unwrap_model(self.model)
        missing = [r for r in role_adapters if r not in getattr(model, "peft_config", {})]
        if missing:
            raise ValueError(
                f"the model has no adapter for role(s) {missing}; see add_role_adapters"
            )
        self.roles = list(role_adapters)
        _train_all(model, self.roles)

    @property
    def role_adapters(self) -> list[str]:
        return self.roles

    @contextlib.contextmanager
    def role_context(self, role: str, model: Any) -> Iterator[Any]:
        """Run `model` under `role`'s adapter; the active adapter is restored afterwards."""
        peft_model = self.accelerator.unwrap_model(self.model)
        previous = peft_model.active_adapter
        peft_model.set_adapter(role)
        _train_all(peft_model, self.roles)
        try:
            yield model
        finally:
            peft_model.set_adapter(previous)
            _train_all(peft_model, self.roles)

    @compat.hook
    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: Any = None) -> None:
        """Every role's adapter from ``checkpoint/<role>/`` (`Trainer` would load one adapter)."""
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        target = self.accelerator.unwrap_model(model if model is not None else self.model)
        for role in self.roles:
            path = Path(resume_from_checkpoint) / role / "adapter_model.safetensors"
            if not path.is_file():
                raise FileNotFoundError(f"{path} is missing: cannot resume role {role!r}")
            set_peft_model_state_dict(target, load_file(str(path)), adapter_name=role)
        _train_all(target, self.roles)
        self.resume_extras(resume_from_checkpoint)


def with_role_adapters(trainer_cls: type) -> type:
    """`trainer_cls` (GRPOTrainer or a subclass) with `RoleAdapterMixin` mixed in."""
    return with_mixin(RoleAdapterMixin, trainer_cls, "RoleAdapter")
