"""Building role maps from model names: the embedded default, one shared model, or one per role."""

from __future__ import annotations

from collections.abc import Mapping

from agents.base import GenerationArguments
from agents.hf import HFPolicy
from agents.roles import RoleMap
from trainers.embedded import resolve_model


def build_role_map(
    model: str | None = None,
    role_models: Mapping[str, str] | None = None,
    generation_args: GenerationArguments | None = None,
) -> RoleMap:
    """A role map: `model` (default: the embedded model) for every agent, `role_models` overriding
    single roles (``{"critic": "path/to/critic"}``; different architectures are fine)."""
    shared = HFPolicy.from_pretrained(resolve_model(model), generation_args)
    policies = {"*": shared}
    for role, path in (role_models or {}).items():
        policies[role] = HFPolicy.from_pretrained(resolve_model(path), generation_args)
    return RoleMap(policies)
