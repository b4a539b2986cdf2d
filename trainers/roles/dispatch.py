"""Per-role dispatch, shared by a LoRA adapter per role (`trainers.roles.adapters`) and a full
model per role (`trainers.roles.models`): each row of a batch runs under its role.

`PerRoleMixin` is mixed into `GRPOTrainer` (or a subclass). Every forward pass the trainer makes
(log-probabilities for the loss, the old and reference ones, PPO's value features) is split into
one sub-batch per role, each run with its role's module (`role_context`), and the outputs are put
back in row order. TRL's loss, its normalisation and its optimizer see the same tensors as with one
shared model, and each role's weights get their gradient from their own role's rows alone.

The role of each row travels in the rows: the rollout function's rows carry each row's ``agent``
(`trainers.algorithms.rows`), the trainer reads them as the rollout function returns them and adds
the roles to the generation batch as a ``role_index`` tensor, which TRL shuffles and splits with
the other tensors, and `_compute_loss` reads it back for its micro-batch. Padding rows (no
trainable turn, agent None) run under the first role; their loss mask is 0.

Under several processes (data parallel) the forward passes bypass DDP's wrapper and the mixin
averages the gradients itself (`average_gradients`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import torch

from envs.roles import role_of
from trainers import compat


class PerRoleMixin:
    """Row-role bookkeeping and per-role forward dispatch, shared by role adapters and role models.

    Subclasses say how a role runs: `role_context(role, model)` is a context manager yielding the
    module to run that role's rows with (`model` is the one TRL passed, possibly wrapped).
    `roles` lists the roles in the order of their ``role_index``.
    """

    roles: list[str]
    _row_roles: torch.Tensor | None = None
    what: str = "per-role training"  # named in refusals: "role adapters", "a model per role"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if getattr(self, "use_vllm", False):
            raise ValueError(
                f"{self.what}: not on TRL's vLLM generation (one set of weights per server); "
                "use the transformers rollout (use_vllm=False)"
            )
        engine = self.accelerator.distributed_type.name
        if self.accelerator.num_processes > 1 and engine in (
            "DEEPSPEED",
            "FSDP",
            "MEGATRON_LM",
            "XLA",
        ):
            raise ValueError(
                f"{self.what}: data-parallel processes only (accelerate's multi-GPU / multi-CPU "
                f"config), not {engine}: its forward passes run "
                "outside the distributed wrapper and the trainer averages the gradients itself"
            )

    def role_context(self, role: str, model: Any) -> contextlib.AbstractContextManager[Any]:
        raise NotImplementedError

    def resume_extras(self, checkpoint: str) -> None:
        """What a checkpoint holds besides the roles' weights: PPO's value head (Trainer skips it)."""
        resume_value_head = getattr(self, "resume_value_head", None)
        if resume_value_head is not None:
            resume_value_head(checkpoint)

    # ------------------------------------------------------------------ row roles
    def role_index(self, agents: Sequence[str | None]) -> torch.Tensor:
        """One role index per row; padding rows (agent None) map to 0, unknown roles raise."""
        index = []
        for agent in agents:
            if agent is None:
                index.append(0)
                continue
            role = role_of(agent)
            if role not in self.roles:
                raise ValueError(
                    f"agent {agent!r} has no trained role; the trainer's roles are {self.roles}"
                )
            index.append(self.roles.index(role))
        return torch.tensor(index, dtype=torch.long)

    def per_role(self, rows: int, run: Any, model: Any = None) -> list[Any]:
        """``run(index, module)`` for each role's rows, outputs put back in row order.

        `run` takes the row indices (a LongTensor) and the module to run them with (from
        `role_context(role, model)`), and returns a tuple of tensors (or None) whose first
        dimension is those rows; the result is the same tuple over all `rows`.
        """
        roles = self._row_roles
        if roles is None or len(roles) != rows:
            raise RuntimeError(
                f"no role for each of the {rows} rows (got "
                f"{None if roles is None else len(roles)}): the rollout function's rows must "
                "carry each row's 'agent'"
            )
        roles = roles.cpu()
        parts: list[tuple[torch.Tensor, tuple[Any, ...]]] = []
        for r in roles.unique().tolist():
            index = (roles == r).nonzero().squeeze(1)
            with self.role_context(self.roles[r], model) as module:
                parts.append((index, run(index, module)))
        order = torch.cat([index for index, _ in parts])
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(len(order))
        merged = []
        for k in range(len(parts[0][1])):
            pieces = [out[k] for _, out in parts]
            if pieces[0] is None:
                merged.append(None)
            elif pieces[0].dim() == 0:  # a scalar (MoE aux loss): row-weighted mean
                weights = torch.tensor([len(i) / rows for i, _ in parts], device=pieces[0].device)
                merged.append((torch.stack(pieces) * weights).sum())
            else:
                stacked = torch.cat(pieces)
                merged.append(stacked[inverse.to(stacked.device)])
        return merged

    # ------------------------------------------------------------------ several processes
    # One backward pass follows a forward pass per role. Through DDP's wrapper that marks the
    # shared parameters ready more than once, which DDP refuses; so under several processes every
    # forward pass runs on the unwrapped model (DDP's reducer then stays idle) and
    # `training_step` averages the gradients across processes itself, on the micro-batch that
    # ends an accumulation, as DDP would.
    def training_step(self, model: Any, inputs: Any, num_items_in_batch: Any = None) -> Any:
        loss = super().training_step(model, inputs, num_items_in_batch)
        if self.accelerator.num_processes > 1 and self.accelerator.sync_gradients:
            average_gradients(self.accelerator.unwrap_model(self.model))
        return loss

    # ------------------------------------------------------------------ TRL hooks
    @compat.hook
    def _get_per_token_logps_and_entropies(
        self, model, input_ids, attention_mask, logits_to_keep, batch_size=None, **kwargs
    ):
        if self._row_roles is None:
            raise RuntimeError("a forward pass without row roles; see PerRoleMixin")
        if self.accelerator.num_processes > 1:
            model = self.accelerator.unwrap_model(model)  # see training_step
        extra = {k: v for k, v in kwargs.items() if isinstance(v, torch.Tensor)}
        if extra:
            raise NotImplementedError(f"per-role training is text-only; got inputs {sorted(extra)}")
        parent = super()._get_per_token_logps_and_entropies

        def run(index: torch.Tensor, module: Any) -> tuple[Any, ...]:
            index = index.to(input_ids.device)
            return parent(
                module,
                input_ids[index],
                attention_mask[index],
                logits_to_keep,
                batch_size,
                **kwargs,
            )

        return tuple(self.per_role(input_ids.size(0), run, model))

    @compat.hook
    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        # Each row's role comes from the ``agent`` column of the rows the rollout function
        # returns. TRL runs forward passes over the batch inside this call (old and reference
        # log-probabilities, PPO's value features) before it hands those columns on with the
        # inputs, so the roles are read from the rows as the rollout function returns them.
        rollout = self.rollout_func
        if rollout is None:
            raise ValueError(f"{self.what}: needs a rollout function (TurnRollout) for the roles")

        def rollout_with_roles(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
            rows = rollout(prompts, trainer)
            if "agent" not in rows:
                raise ValueError(
                    f"{self.what}: the rollout function's rows carry no 'agent' column; "
                    f"they hold {sorted(rows)}"
                )
            self._row_roles = self.role_index(rows["agent"])
            return rows

        self._row_roles, self.rollout_func = None, rollout_with_roles
        try:
            output = super()._generate_and_score_completions(inputs)
            if self._row_roles is None:
                raise RuntimeError(f"{self.what}: the generation step ran no rollout")
            output["role_index"] = self._row_roles.to(output["completion_ids"].device)
        finally:
            self._row_roles, self.rollout_func = None, rollout
        return output

    @compat.hook
    def _compute_loss(self, model, inputs):
        self._row_roles = inputs["role_index"]
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self._row_roles = None

    def turn_features(
        self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, model: Any = None
    ) -> torch.Tensor:
        """PPO's value features, each row's from its role's module."""
        parent = super().turn_features
        model = self.accelerator.unwrap_model(model if model is not None else self.model)
        return self.per_role(
            len(prompt_ids),
            lambda i, module: (parent(prompt_ids[i], prompt_mask[i], model=module),),
            model,
        )[0]


_CLASSES: dict[tuple[type, type], type] = {}


def average_gradients(model: Any) -> None:
    """All-reduce the gradients of `model`'s trainable parameters to their mean over processes.

    A parameter that got no gradient on this process (e.g. a role with no rows here) counts as
    zero, so every process reduces the same tensors in the same order. One flat buffer, one call.
    """
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        return
    flat = torch.cat(
        [(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params]
    )
    torch.distributed.all_reduce(flat)
    flat /= torch.distributed.get_world_size()
    offset = 0
    for param in params:
        param.grad = flat[offset : offset + param.numel()].view_as(param)
        offset += param.numel()


def with_mixin(mixin: type, trainer_cls: type, prefix: str) -> type:
    """`trainer_cls` with `mixin` mixed in, one class per pair (named ``<prefix><trainer>``)."""
    if issubclass(trainer_cls, mixin):
        return trainer_cls
    key = (mixin, trainer_cls)
    if key not in _CLASSES:
        _CLASSES[key] = type(f"{prefix}{trainer_cls.__name__}", (mixin, trainer_cls), {})
    return _CLASSES[key]
