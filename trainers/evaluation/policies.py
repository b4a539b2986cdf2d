"""Building role maps from model names: the embedded default, one shared model, or one per role,
optionally with an instruction-variant ensemble playing the answering roles."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from agents.base import GenerationArguments, Policy
from agents.ensemble import make_ensemble
from agents.hf import HFPolicy
from agents.roles import RoleMap
from envs.roles import answer_roles as builtin_answer_roles
from envs.tasks import prompts
from rewards import canonical_answer, extract_answer
from trainers.embedded import resolve_model


def vote_key(text: str) -> str | None:
    """The answer a reply votes for, normalised so equivalent answers vote together."""
    answer = extract_answer(text)
    return None if answer is None else canonical_answer(answer)


def build_ensemble(name: str, policy: HFPolicy, size: int, answer_format: str) -> Policy:
    """`majority_vote` or `hidden_state_mean|weighted` over the envs' first `size` variants."""
    variants = [v.replace("{answer_format}", answer_format) for v in prompts.VARIANTS]
    instructions = [variants[i % len(variants)] for i in range(size)]
    if name == "majority_vote":
        return make_ensemble(name, policy=policy, instructions=instructions, vote_fn=vote_key)
    return make_ensemble(
        name,
        model=policy.model,
        tokenizer=policy.tokenizer,
        instructions=instructions,
        generation_args=policy.generation_args,
    )


def build_role_map(
    model: str | None = None,
    role_models: Mapping[str, str] | None = None,
    generation_args: GenerationArguments | None = None,
    ensemble: str | None = None,
    ensemble_size: int = 3,
    answer_format: str = "give the final answer as \\boxed{...} at the end.",
    device: str | None = None,
    role_adapters: str | None = None,
    answer_roles: Sequence[str] | None = None,
    task: str | None = None,
) -> RoleMap:
    """A role map: `model` (default: the embedded model) for every agent, `role_models` overriding
    single roles (``{"critic": "path/to/critic"}``; different architectures are fine), and with
    `ensemble` an ensemble of `ensemble_size` instruction variants playing `answer_roles` (the
    env's answering roles, `envs.roles.answer_roles`; default: every built-in env's). `device` ("cuda", "cpu", ...) moves every model there.
    `role_adapters` is a folder holding one LoRA adapter per role (``<folder>/<role>/``, as a run
    with ``--role_adapters true`` saves) to put on `model`: each role plays under its adapter.
    """
    model_kwargs = {"device_map": device} if device else None
    shared = HFPolicy.from_pretrained(
        resolve_model(model, task), generation_args, model_kwargs=model_kwargs
    )
    policies: dict[str, Policy] = {"*": shared}
    if role_adapters:
        from agents.roles import build_lora_role_map
        from trainers.roles.adapters import load_role_adapters, saved_roles

        roles = saved_roles(role_adapters)
        if not roles:
            raise FileNotFoundError(
                f"{role_adapters} holds no role adapters (expected <role>/adapter_config.json)"
            )
        peft_model = load_role_adapters(shared.model, role_adapters, roles)
        lora = build_lora_role_map(peft_model, shared.tokenizer, roles, None, generation_args)
        policies = dict(lora)
    if ensemble:
        team = build_ensemble(ensemble, shared, ensemble_size, answer_format)
        roles = builtin_answer_roles() if answer_roles is None else answer_roles
        policies.update(dict.fromkeys(roles, team))
    for role, path in (role_models or {}).items():
        policies[role] = HFPolicy.from_pretrained(
            resolve_model(path), generation_args, model_kwargs=model_kwargs
        )
    return RoleMap(policies)
