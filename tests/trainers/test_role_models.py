"""A full model per role: rollouts, the loss's forward passes, gradients, saving and resuming."""

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
from trainers.roles.models import ROLE_MODULES, RoleModelMixin, detached

ROLES = ["solver", "critic", "refiner"]


def role_model(trainer, role):
    return trainer.role_module(role)


def weights(trainer):
    """A copy of every role model's own weights: {role: {name: tensor}}."""
    main = trainer.model
    modules = {role: role_model(trainer, role) for role in ROLES}
    with detached(main):
        return {
            r: {n: p.detach().clone() for n, p in m.named_parameters()} for r, m in modules.items()
        }


def moved(trainer, before):
    after = weights(trainer)
    return {
        role: any(not torch.equal(p, before[role][n]) for n, p in after[role].items())
        for role in ROLES
    }


def jitter(module, gen, scale=0.05):
    """Add seeded noise to every weight of `module`."""
    with torch.no_grad():
        for param in module.parameters():
            param.add_(torch.randn(param.shape, generator=gen) * scale)


def perturb(trainer, scale=0.05):
    """Distinct models per role (every role starts as a copy of the same start model)."""
    gen = torch.Generator().manual_seed(0)
    for role in ROLES[1:]:
        jitter(role_model(trainer, role), gen, scale)


def trainer_for(tiny_model, tmp_path, role_weights=None, role_models=True, **kwargs):
    return build_grpo_trainer(
        tiny_model,
        "math/reflection-v0",
        {"rounds": 1},
        grpo_config(tmp_path, **kwargs),
        role_weights=role_weights,
        train_problems=4,
        num_envs=8,
        role_models=role_models,
    )


def test_every_role_gets_its_own_copy_of_the_start_model(tiny_model, tmp_path):
    trainer = trainer_for(tiny_model, tmp_path)
    assert isinstance(trainer, RoleModelMixin) and trainer.role_models == ROLES
    modules = [role_model(trainer, role) for role in ROLES]
    assert modules[0] is trainer.model and len({id(m) for m in modules}) == 3
    ids = torch.tensor([[5, 6, 7, 8]])
    expected = AutoModelForCausalLM.from_pretrained(tiny_model)(ids).logits
    for module in modules:
        assert torch.allclose(module(ids).logits, expected, atol=1e-6)
    embeds = [m.get_input_embeddings().weight for m in modules]
    assert len({e.data_ptr() for e in embeds}) == 3  # no shared storage between roles
    names = {n for n, p in trainer.model.named_parameters() if p.requires_grad}
    assert any(n.startswith(f"{ROLE_MODULES}.critic.") for n in names)
    assert any(n.startswith(f"{ROLE_MODULES}.refiner.") for n in names)


def test_bad_role_model_arguments_are_refused(tiny_model, tmp_path):
    with pytest.raises(ValueError, match=r"role\(s\) \['judge'\].*roles are"):
        trainer_for(tiny_model, tmp_path, role_models={"judge": tiny_model})
    with pytest.raises(ValueError, match="not both"):
        build_grpo_trainer(
            tiny_model,
            "math/reflection-v0",
            {"rounds": 1},
            grpo_config(tmp_path),
            train_problems=4,
            role_models=True,
            role_adapters=True,
        )
    with pytest.raises(ValueError, match="sync_ref_model"):
        trainer_for(tiny_model, tmp_path, beta=0.1, sync_ref_model=True)


def test_beta_gives_each_role_its_own_start_model_as_reference(tiny_model, tmp_path):
    """With beta > 0 the reference pass runs each role's rows through that role's start model,
    however far the trained role models have moved."""
    from transformers import AutoTokenizer

    critic_start = tmp_path / "critic_start"
    other = AutoModelForCausalLM.from_pretrained(tiny_model)
    jitter(other, torch.Generator().manual_seed(1))
    other.save_pretrained(critic_start)
    AutoTokenizer.from_pretrained(tiny_model).save_pretrained(critic_start)
    trainer = trainer_for(
        tiny_model, tmp_path, role_models={"critic": str(critic_start)}, beta=0.1, max_steps=1
    )
    refs = trainer.ref_role_models
    assert refs["solver"] is trainer.ref_model is refs["refiner"]
    assert refs["critic"] is not trainer.ref_model
    trained = {id(p) for p in trainer.model.parameters()}  # what the optimizer holds
    assert not any(id(p) in trained for ref in refs.values() for p in ref.parameters())

    # Untrained, every role's model is its start: the reference equals the sampled logprobs.
    inputs = [dict(row) for row in trainer.train_dataset.select(range(3)) for _ in range(2)]
    out = trainer._generate_and_score_completions(inputs)
    assert out["role_index"].tolist() == [0, 0, 1, 1, 2, 2]
    mask = (out["completion_mask"] * out["tool_mask"]).bool()
    sampled = out["sampling_per_token_logps"]
    assert torch.allclose(out["ref_per_token_logps"][mask], sampled[mask], atol=1e-4)

    # The trained models move; the reference pass still gives the start models' logprobs.
    perturb(trainer)
    with detached(trainer.model):  # the solver's own weights
        jitter(trainer.model, torch.Generator().manual_seed(2))
    ids = torch.cat([out["prompt_ids"], out["completion_ids"]], dim=1)
    attention = torch.cat([out["prompt_mask"], out["completion_mask"]], dim=1)
    keep = out["completion_ids"].size(1)
    trainer._row_roles = out["role_index"]
    ref, _, _ = trainer._get_per_token_logps_and_entropies(trainer.ref_model, ids, attention, keep)
    now, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, attention, keep)
    assert torch.allclose(ref[mask], sampled[mask], atol=1e-4)
    for r in range(3):
        rows = mask & (out["role_index"] == r).unsqueeze(1)
        assert not torch.allclose(now[rows], sampled[rows], atol=1e-3)  # every role moved
    critic_rows = mask & (out["role_index"] == 1).unsqueeze(1)
    trainer._row_roles = torch.zeros_like(out["role_index"])  # every row as the solver
    as_solver, _, _ = trainer._get_per_token_logps_and_entropies(
        trainer.ref_model, ids, attention, keep
    )
    assert not torch.allclose(as_solver[critic_rows], ref[critic_rows], atol=1e-3)
    trainer._row_roles = None

    trainer.train()  # a step with the KL term runs, and logs it
    kls = [log["kl"] for log in trainer.state.log_history if "kl" in log]
    assert kls and all(torch.isfinite(torch.tensor(kls)))


def test_rollout_and_loss_run_each_row_through_its_role_model(tiny_model, tmp_path):
    """The logprobs sampled by the per-role rollout equal the loss's per-role forward passes."""
    trainer = trainer_for(tiny_model, tmp_path)
    perturb(trainer)
    check_rollout_matches_per_role_loss(trainer)


def test_each_model_learns_from_its_own_role_only(tiny_model, tmp_path):
    """Critic and refiner rewards weighted 0 -> no advantage -> only the solver's model moves."""
    trainer = trainer_for(
        tiny_model,
        tmp_path,
        role_weights={"critic": 0.0, "refiner": 0.0},
        max_steps=2,
        learning_rate=5e-2,
    )
    trainer.reward_funcs[0] = solver_only_reward
    before = weights(trainer)
    trainer.train()
    assert moved(trainer, before) == {"solver": True, "critic": False, "refiner": False}


def test_role_models_save_reload_and_resume(tiny_model, tmp_path):
    out = tmp_path / "run"
    trainer = trainer_for(
        tiny_model, tmp_path, output_dir=str(out), save_strategy="steps", save_steps=1
    )
    perturb(trainer)
    trainer.train()
    checkpoint = out / "checkpoint-1"
    for role in ROLES:
        assert (checkpoint / role / "model.safetensors").is_file()
        assert (checkpoint / role / "tokenizer_config.json").is_file()
    assert not (checkpoint / "model.safetensors").exists()
    assert checkpoint_problems(checkpoint) == []
    trained = weights(trainer)
    final = tmp_path / "final"
    trainer.save_model(str(final))

    ids = torch.tensor([[5, 6, 7, 8]])
    for role in ROLES:  # each role's folder is a complete model, without the other roles' weights
        loaded = AutoModelForCausalLM.from_pretrained(final / role)
        got = dict(loaded.named_parameters())
        assert set(got) == set(trained[role])
        for name, param in trained[role].items():
            assert torch.equal(got[name], param), (role, name)
        with torch.no_grad():
            assert torch.allclose(loaded(ids).logits, role_model(trainer, role)(ids).logits)

    fresh = trainer_for(tiny_model, tmp_path / "again")
    fresh._load_from_checkpoint(str(checkpoint))
    restored = weights(fresh)
    for role in ROLES:
        for name, param in trained[role].items():
            assert torch.equal(restored[role][name], param), (role, name)

    # A checkpoint whose critic model was cut short is not resumable, and says which.
    damaged = checkpoint / "critic" / "model.safetensors"
    damaged.write_bytes(damaged.read_bytes()[:-8])
    (problem,) = checkpoint_problems(checkpoint)
    assert problem.startswith("critic/model.safetensors is damaged")
    damaged.unlink()
    with pytest.raises(FileNotFoundError, match="critic"):
        fresh._load_from_checkpoint(str(checkpoint))


def test_ppo_with_a_model_per_role_trains_every_role(tiny_model, tmp_path):
    """Value features and the policy loss run through each row's role model; every model moves
    (with a KL term to each role's start)."""
    trainer = build_ppo(tiny_model, tmp_path, role_models=True, learning_rate=5e-2, beta=0.1)
    perturb(trainer)
    before = weights(trainer)
    trainer.train()
    assert moved(trainer, before) == dict.fromkeys(ROLES, True)
    assert any(log.get("kl", 0) > 0 for log in trainer.state.log_history)  # perturbed: KL > 0
    assert any(p.abs().sum() > 0 for p in trainer.value_head.parameters())


def test_ppo_value_head_is_one_head_per_role_model_on_its_own_features(tiny_model, tmp_path):
    from trainers.roles.models import RoleValueHead

    trainer = build_ppo(tiny_model, tmp_path, role_models=True)
    head = trainer.value_head
    assert isinstance(head, RoleValueHead) and list(head.heads) == ROLES
    with torch.no_grad():
        for r, role in enumerate(ROLES):
            head.heads[role].bias.fill_(float(r + 1))
            head.heads[role].weight.fill_(0.0)
    perturb(trainer)
    ids = torch.tensor([[5, 6, 7, 8]] * 3)
    trainer._row_roles = torch.tensor([2, 0, 1])
    features = trainer.turn_features(ids, torch.ones_like(ids))
    trainer._row_roles = None
    assert head(features).squeeze(-1).tolist() == [3.0, 1.0, 2.0]
    # Each row's features come from its own role's model.
    for row, role in zip(range(3), ["refiner", "solver", "critic"], strict=True):
        module = role_model(trainer, role)
        with torch.no_grad():
            hidden = module(input_ids=ids[:1], output_hidden_states=True).hidden_states[-1][0, -1]
        assert torch.allclose(features[row, : hidden.numel()], hidden, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["adapters", "models"])
def test_per_role_training_under_two_processes(tiny_model, tmp_path, layout):
    """`accelerate launch`, 2 gloo processes, each on its own problems: after two optimizer steps
    (two micro-batches each) both processes hold the same, moved weights. One forward pass per
    role runs outside DDP's wrapper (which refuses them), so the trainer averages the gradients
    itself; without that the processes drift apart (checked: weights differ by 0.15).

    Slow: three interpreters (the launcher and two processes), and one process cannot stand in
    for two."""
    import subprocess

    from tests.utils import ACCELERATE_2PROC, REPO

    result = subprocess.run(
        [
            *ACCELERATE_2PROC,
            "tests/trainers/per_role_ddp_check.py",
            tiny_model,
            str(tmp_path),
            layout,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "PER-ROLE DDP OK" in result.stdout
