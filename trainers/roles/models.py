"""A full model per role, trained together by the multi-agent GRPO and PPO trainers.

Design
------
TRL's trainer holds one model and one optimizer. Here that model is the first role's (the
solver's) with every other role's model attached to it as a submodule (``role_models.<role>``),
so one optimizer, one gradient clip and one ``.to(device)`` cover all of them, and Adam's
per-parameter updates are the same as separate optimizers with the same settings. The first
role's forward pass never touches the attached models.

Everything per row goes through `trainers.roles.dispatch.PerRoleMixin`, the machinery role
adapters use: the rollout plays each role's turns with its own model (one ``generate`` call per
role), reports the agent of every row, and every forward pass of the loss (and PPO's value
features) runs each role's rows through that role's model and puts the results back in row
order. TRL's loss is unchanged; each model's gradient comes from its own role's turns alone.

Checkpoints and the final folder hold one complete model (weights, config, tokenizer) per role in
``<folder>/<role>/``, which `scripts/evaluate.py --role-model ROLE=<folder>/<role>` plays and
``resume_from_checkpoint`` reloads.

Under several processes (``accelerate launch``, data parallel) the forward passes bypass DDP's
wrapper and `PerRoleMixin` averages every role's gradients itself. Limits: the roles must share
one tokenizer (TRL tokenizes every completion with the trainer's); no DeepSpeed or FSDP sharding
(the attached models are not sharded); no vLLM generation (one set of weights per server); no
``sync_ref_model``.

With ``beta > 0`` each role has a frozen reference: its own start model. TRL loads the first
role's start as ``ref_model``; a role that starts from the same path shares it, a role with
another start path gets that model loaded once more, frozen. The reference pass runs each role's
rows through its role's reference, so every role's KL is to its own start.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from trainers import compat
from trainers.roles.dispatch import PerRoleMixin, with_mixin

logger = logging.getLogger(__name__)

ROLE_MODULES = "role_models"  # the attribute of the first role's model holding the others


def resolve_role_paths(
    roles: Sequence[str], default: str, role_models: bool | Mapping[str, str]
) -> dict[str, str]:
    """The start model of every role: `default`, or the path `role_models` gives for the role."""
    given = dict(role_models) if isinstance(role_models, Mapping) else {}
    unknown = sorted(set(given) - set(roles))
    if unknown:
        raise ValueError(f"role_models names role(s) {unknown}; the env's roles are {list(roles)}")
    return {role: str(given.get(role, default)) for role in roles}


def check_shared_tokenizer(paths: Mapping[str, str]) -> None:
    """Raise unless every distinct path's tokenizer has the first one's vocabulary."""
    from transformers import AutoTokenizer

    distinct = list(dict.fromkeys(paths.values()))
    first = AutoTokenizer.from_pretrained(distinct[0]).get_vocab()
    for path in distinct[1:]:
        if AutoTokenizer.from_pretrained(path).get_vocab() != first:
            raise ValueError(
                f"the role models {distinct[0]} and {path} have different tokenizers; a model "
                "per role needs one shared tokenizer (TRL tokenizes every completion with it)"
            )


def load_role_models(
    paths: Mapping[str, str], model_init_kwargs: Mapping[str, Any] | None = None
) -> Any:
    """The first role's model with every other role's model attached as ``role_models.<role>``.

    Each role gets its own copy of the weights, also when several roles start from one path.
    """
    from transformers import AutoModelForCausalLM

    kwargs = dict(model_init_kwargs or {})
    models = {
        role: AutoModelForCausalLM.from_pretrained(path, **kwargs) for role, path in paths.items()
    }
    roles = list(paths)
    main = models[roles[0]]
    main.add_module(ROLE_MODULES, torch.nn.ModuleDict({r: models[r] for r in roles[1:]}))
    return main


def role_modules(main: Any, roles: Sequence[str]) -> dict[str, Any]:
    """Each role's model in `main`, as `load_role_models` built it: `main` is the first role's,
    the models attached to it are the others'."""
    attached = getattr(main, ROLE_MODULES, {})
    missing = [r for r in roles[1:] if r not in attached]
    if missing:
        raise ValueError(f"the model has no attached model for role(s) {missing}")
    return {role: attached[role] if i else main for i, role in enumerate(roles)}


@contextlib.contextmanager
def detached(main: Any) -> Iterator[None]:
    """`main` without its attached role models (to save or load its own weights alone)."""
    extra = dict(main.named_children()).get(ROLE_MODULES)
    if extra is not None:
        delattr(main, ROLE_MODULES)
    try:
        yield
    finally:
        if extra is not None:
            main.add_module(ROLE_MODULES, extra)


def load_weights(module: Any, folder: Path) -> None:
    """Load ``folder/model.safetensors`` into `module`; raise naming missing/unexpected tensors."""
    from safetensors.torch import load_file

    path = folder / "model.safetensors"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: cannot resume role {folder.name!r}")
    missing, unexpected = module.load_state_dict(load_file(str(path)), strict=False)
    missing = [k for k in missing if k not in compat.tied_weight_keys(module)]
    if missing or unexpected:
        raise ValueError(
            f"{path} does not match the role's model: missing {missing[:5]}, "
            f"unexpected {list(unexpected)[:5]}"
        )


class RoleValueHead(torch.nn.Module):
    """PPO's value head with a linear head per role model (each reads its own model's features).

    Its input is `RoleModelMixin.turn_features`' output: each row's features zero-padded to the
    widest role model, then the row's role index as a last column.
    """

    def __init__(self, hidden: Mapping[str, int]) -> None:
        super().__init__()
        self.roles = list(hidden)
        self.hidden = dict(hidden)
        self.heads = torch.nn.ModuleDict(
            {role: torch.nn.Linear(h, 1) for role, h in hidden.items()}
        )
        for head in self.heads.values():
            torch.nn.init.zeros_(head.weight)
            torch.nn.init.zeros_(head.bias)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        roles = features[:, -1].long()
        out = features.new_zeros(len(features), 1)
        for r, role in enumerate(self.roles):
            rows = roles == r
            if rows.any():
                out[rows] = self.heads[role](features[rows, : self.hidden[role]])
        return out


class RoleModelMixin(PerRoleMixin):
    """Mixed into `GRPOTrainer` (or `MultiAgentPPOTrainer`): each row runs through its role's model.

    The trainer's model must come from `load_role_models`; `role_models` lists the roles in the
    order of their ``role_index`` (the first is the trainer's own model).
    """

    what = "a model per role"

    def __init__(
        self, *args: Any, role_models: Sequence[str] | Mapping[str, str], **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        main = self.accelerator.unwrap_model(self.model)
        attached = getattr(main, ROLE_MODULES, {})
        self.roles = list(role_models)
        missing = [r for r in self.roles[1:] if r not in attached]
        if missing:
            raise ValueError(f"the model has no attached model for role(s) {missing}")
        for role in self.roles[1:]:
            self._add_log_prob_head(attached[role])
        self.ref_role_models = self._reference_models(role_models)
        if hasattr(self, "value_head"):  # PPO: a value head per trained model
            hidden = {
                r: self.role_module(r).config.get_text_config().hidden_size for r in self.roles
            }
            torch.manual_seed(self.args.seed)
            self.value_head = RoleValueHead(hidden).to(self.accelerator.device)
            self.value_optimizer = torch.optim.Adam(
                self.value_head.parameters(), lr=self.args.value_learning_rate
            )

    def _add_log_prob_head(self, module: Any) -> None:
        """TRL's fused log-prob head on `module`, as TRL patches its own model and reference."""
        compat.add_fused_lm_head(
            module,
            temperature=self.temperature,
            cast_lm_head_to_fp32=self.args.cast_lm_head_to_fp32,
            outputs=("log_probs", "entropy"),
        )

    def _reference_models(self, role_models: Sequence[str] | Mapping[str, str]) -> dict[str, Any]:
        """Each role's frozen start model for the KL term (empty with ``beta == 0``)."""
        if self.beta == 0.0:
            return {}
        if self.args.sync_ref_model:
            raise ValueError(
                "sync_ref_model with a model per role: TRL's callback would sync the first "
                "role's reference only; use sync_ref_model=False"
            )
        if not isinstance(role_models, Mapping) or self.ref_model is None:
            raise ValueError(
                f"beta={self.beta} with a model per role needs each role's start path "
                "(role_models as {role: path}, as build_grpo_trainer passes it)"
            )
        from transformers import AutoModelForCausalLM

        first = role_models[self.roles[0]]
        loaded = {first: self.ref_model}
        refs = {}
        for role in self.roles:
            path = role_models[role]
            if path not in loaded:
                ref = AutoModelForCausalLM.from_pretrained(path, dtype=self.ref_model.dtype)
                ref.requires_grad_(False).eval()
                if self.args.disable_dropout:
                    compat.disable_dropout_in_model(ref)
                self._add_log_prob_head(ref)
                loaded[path] = ref.to(self.accelerator.device)
            refs[role] = loaded[path]
        return refs

    @property
    def role_models(self) -> list[str]:
        return self.roles

    def role_module(self, role: str, model: Any = None) -> Any:
        """`role`'s model (the first role's is the trainer's own, `model` when given); for TRL's
        ``ref_model``, `role`'s reference."""
        if model is not None and model is self.ref_model:
            return self.ref_role_models[role]
        main = self.accelerator.unwrap_model(self.model)
        if role == self.roles[0]:
            return model if model is not None else main
        return getattr(main, ROLE_MODULES)[role]

    @contextlib.contextmanager
    def role_context(self, role: str, model: Any) -> Iterator[Any]:
        yield self.role_module(role, model)

    def turn_features(
        self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, model: Any = None
    ) -> torch.Tensor:
        """PPO's value features from each row's role model, in `RoleValueHead`'s input layout."""
        parent = super(PerRoleMixin, self).turn_features
        width = max(self.value_head.hidden.values())

        def run(index: torch.Tensor, module: Any) -> tuple[torch.Tensor]:
            features = parent(prompt_ids[index], prompt_mask[index], model=module)
            padded = torch.nn.functional.pad(features, (0, width - features.size(1)))
            return (padded,)

        features = self.per_role(len(prompt_ids), run)[0]
        roles = self._row_roles.to(features.device, features.dtype)
        return torch.cat([features, roles.unsqueeze(1)], dim=1)

    # ------------------------------------------------------------------ save / resume
    @compat.hook
    def _save(self, output_dir: str | None = None, state_dict: Any = None) -> None:
        """One complete model per role in ``output_dir/<role>/`` (weights, config, tokenizer)."""
        output_dir = output_dir or self.args.output_dir
        main = self.accelerator.unwrap_model(self.model)
        modules = {role: self.role_module(role) for role in self.roles}
        with detached(main):
            for role, module in modules.items():
                folder = Path(output_dir) / role
                module.save_pretrained(str(folder))
                if self.processing_class is not None:
                    self.processing_class.save_pretrained(str(folder))
        torch.save(self.args, os.path.join(output_dir, compat.TRAINING_ARGS_NAME))

    @compat.hook
    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: Any = None) -> None:
        """Every role's model from ``checkpoint/<role>/`` (plus PPO's value head)."""
        main = self.accelerator.unwrap_model(model if model is not None else self.model)
        modules = {role: getattr(main, ROLE_MODULES)[role] for role in self.roles[1:]}
        with detached(main):
            for role in self.roles:
                load_weights(modules.get(role, main), Path(resume_from_checkpoint) / role)
        self.resume_extras(resume_from_checkpoint)


def with_role_models(trainer_cls: type) -> type:
    """`trainer_cls` (GRPOTrainer or a subclass) with `RoleModelMixin` mixed in."""
    return with_mixin(RoleModelMixin, trainer_cls, "RoleModel")
