"""A LoRA adapter per role: rollouts, the loss's forward passes, gradients, saving and resuming."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from tests.trainers.helpers import (
    build_ppo,
    check_rollout_matches_per_role_loss,
    grpo_config,
    solver_only_reward,
)
from trainers.algorithms.checkpoint import checkpoint_problems
from trainers.algorithms.grpo import build_grpo_trainer
from trainers.roles.adapters import (
    RoleAdapterMixin,
    add_role_adapters,
    load_role_adapters,
    saved_roles,
)

ROLES = ["solver", "critic", "refiner"]


def lora_params(model, role):
    return {n: p for n, p in model.named_parameters() if "lora_" in n and f".{role}." in n}


def adapters(model):
    """A copy of every role's adapter weights: {role: {name: tensor}}."""
    return {r: {n: p.detach().clone() for n, p in lora_params(model, r).items()} for r in ROLES}


def moved(model, before):
    """Which roles' adapters differ from `before`."""
    return {
        role: any(not torch.equal(p, before[role][n]) for n, p in lora_params(model, role).items())
        for role in ROLES
    }


def base_params(model):
    return {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" not in n}


def perturb(model, scale=0.5):
    """Distinct random adapters (peft starts every adapter at the identity, B = 0)."""
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for role in ROLES:
            for name, param in lora_params(model, role).items():
                if "lora_B" in name:
                    param.copy_(torch.randn(param.shape, generator=gen) * scale)


def trainer_for(tiny_model, tmp_path, role_weights=None, **kwargs):
    return build_grpo_trainer(
        tiny_model,
        "math/reflection-v0",
        {"rounds": 1},
        grpo_config(tmp_path, **kwargs),
        role_weights=role_weights,
        train_problems=4,
        num_envs=8,
        role_adapters=True,
    )


def test_add_role_adapters_starts_as_the_base_model_with_every_adapter_trainable(tiny_model):
    base = AutoModelForCausalLM.from_pretrained(tiny_model)
    ids = torch.tensor([[5, 6, 7, 8]])
    expected = base(ids).logits
    model = add_role_adapters(base, ROLES)
    assert sorted(model.peft_config) == sorted(ROLES)
    for role in ROLES:
        params = lora_params(model, role)
        assert params and all(p.requires_grad for p in params.values())
    for role in ROLES:
        model.set_adapter(role)
        assert torch.allclose(model(ids).logits, expected, atol=1e-6)
    assert not any(p.requires_grad for n, p in model.named_parameters() if "lora_" not in n)
    with pytest.raises(ValueError, match="duplicates"):
        add_role_adapters(AutoModelForCausalLM.from_pretrained(tiny_model), ["a", "a"])


def test_rollout_and_loss_run_each_row_under_its_role_adapter(tiny_model, tmp_path):
    """The logprobs sampled by the mixed-role rollout equal the loss's per-role forward passes."""
    trainer = trainer_for(tiny_model, tmp_path)
    assert isinstance(trainer, RoleAdapterMixin) and trainer.role_adapters == ROLES
    perturb(trainer.model)
    ids, attention, keep = check_rollout_matches_per_role_loss(trainer)
    with pytest.raises(RuntimeError, match="row roles"):
        trainer._get_per_token_logps_and_entropies(trainer.model, ids, attention, keep)


def test_each_adapter_learns_from_its_own_role_only(tiny_model, tmp_path):
    """Critic and refiner rewards weighted 0 -> no advantage -> only the solver adapter moves."""
    trainer = trainer_for(
        tiny_model,
        tmp_path,
        role_weights={"critic": 0.0, "refiner": 0.0},
        max_steps=2,
        learning_rate=5e-2,
    )
    trainer.reward_funcs[0] = solver_only_reward
    model = trainer.model
    before = adapters(model)
    frozen = base_params(model)
    trainer.train()
    assert moved(model, before) == {"solver": True, "critic": False, "refiner": False}
    for name, param in base_params(model).items():
        assert torch.equal(param, frozen[name]), name


def test_role_adapters_save_reload_and_resume(tiny_model, tmp_path):
    out = tmp_path / "run"
    trainer = trainer_for(
        tiny_model, tmp_path, output_dir=str(out), save_strategy="steps", save_steps=1
    )
    perturb(trainer.model)
    trainer.train()
    checkpoint = out / "checkpoint-1"
    assert saved_roles(checkpoint) == sorted(ROLES)
    assert checkpoint_problems(checkpoint) == []
    trained = adapters(trainer.model)
    final = tmp_path / "final"
    trainer.save_model(str(final))
    assert saved_roles(final) == sorted(ROLES)

    loaded = load_role_adapters(AutoModelForCausalLM.from_pretrained(tiny_model), final, ROLES)
    for role in ROLES:
        got = lora_params(loaded, role)
        for name, param in trained[role].items():
            assert torch.allclose(got[name], param), name

    fresh = trainer_for(tiny_model, tmp_path / "again")
    fresh._load_from_checkpoint(str(checkpoint))
    for role in ROLES:
        got = lora_params(fresh.model, role)
        assert all(p.requires_grad for p in got.values())
        for name, param in trained[role].items():
            assert torch.allclose(got[name], param), name

    # A checkpoint whose critic adapter was cut short is not resumable, and says which.
    weights = checkpoint / "critic" / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-8])
    (problem,) = checkpoint_problems(checkpoint)
    assert problem.startswith("critic/adapter_model.safetensors is damaged")

    with pytest.raises(FileNotFoundError, match="no adapter for role"):
        load_role_adapters(AutoModelForCausalLM.from_pretrained(tiny_model), final, ["judge"])


def test_ppo_with_role_adapters_trains_every_role(tiny_model, tmp_path):
    """Value features and the policy loss run under each row's adapter; every adapter moves."""
    trainer = build_ppo(tiny_model, tmp_path, role_adapters=True, learning_rate=5e-2)
    perturb(trainer.model, scale=0.05)
    before = adapters(trainer.model)
    trainer.train()
    assert moved(trainer.model, before) == dict.fromkeys(ROLES, True)
    assert any(p.abs().sum() > 0 for p in trainer.value_head.parameters())
