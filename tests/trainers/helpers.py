"""What the trainer tests share besides fixtures: the tiny embedded recipes, GRPO and PPO
configs and trainers for the tiny model, rewards with spread on any model, and the per-role
rollout-versus-loss check."""

from __future__ import annotations

import dataclasses

import torch
from trl import GRPOConfig

from trainers.algorithms import rows as turn_rows
from trainers.algorithms.grpo import TurnRollout
from trainers.algorithms.ppo import CPUPPOConfig, build_ppo_trainer
from trainers.embedded import EmbeddedRecipe

# The trainer tests' start model (tests/conftest.py): digit tokens and no drills, so two SFT steps
# leave it random enough to answer right now and then (the DPO and PPO tests need such turns).
TINY = EmbeddedRecipe(
    num_problems=12,
    reach_problems=0,
    max_steps=2,
    batch_size=4,
    hidden_size=32,
    intermediate_size=64,
    num_layers=1,
    num_heads=2,
    arch="qwen2",
    whole_numbers=False,
    number_features=0,
    vocab_size=300,
    drill_rows=0,
    drill_reach_share=0.0,
    calibration_problems=0,
    threads=1,
)
# The shipped recipe's features at a tiny size: whole-number tokens, number features, drills.
TINY_NUMBERS = dataclasses.replace(
    TINY,
    arch="mistral",
    whole_numbers=True,
    number_features=8,
    vocab_size=512,
    drill_rows=12,
    drill_facts=4,
    calibration_problems=6,
)


def grpo_config(tmp_path, **kwargs):
    """A one-step CPU GRPOConfig for the tiny model (no saving), `kwargs` overriding."""
    base = {
        "output_dir": str(tmp_path / "out"),
        "use_cpu": True,
        "bf16": False,
        "report_to": "none",
        "num_generations": 2,
        "per_device_train_batch_size": 6,
        "max_completion_length": 12,
        "max_steps": 1,
        "logging_steps": 1,
        "save_strategy": "no",
        "learning_rate": 1e-2,
        "seed": 0,
    }
    return GRPOConfig(**{**base, **kwargs})


def shaped(completions, completion_ids, turn_reward, **kwargs):
    """The turn rewards (logged per agent) plus a spread that any model's samples get."""
    base = turn_rows.turn_reward(completions, turn_reward, completion_ids=completion_ids, **kwargs)
    return [
        None if r is None else r + len(set(c)) / 10
        for r, c in zip(base, completion_ids, strict=True)
    ]


def ppo_config(tmp_path, **kwargs):
    """A one-step CPU PPO config for the tiny model (no saving), `kwargs` overriding."""
    base = {
        "output_dir": str(tmp_path / "out"),
        "num_generations": 2,
        "per_device_train_batch_size": 6,
        "gradient_accumulation_steps": 1,
        "max_completion_length": 8,
        "max_steps": 1,
        "learning_rate": 1e-2,
        "value_learning_rate": 1e-1,
        "save_strategy": "no",
        "seed": 0,
    }
    return CPUPPOConfig(**{**base, **kwargs})


class ShapedRollout(TurnRollout):
    """Varied rewards on any model: the turn reward plus the share of distinct tokens and a
    tenth of the first token's id mod 10 (replies that all run to the token budget with distinct
    tokens would otherwise tie)."""

    def __call__(self, prompts, trainer):
        rows = super().__call__(prompts, trainer)
        shaped = [
            None
            if r is None
            else r + len(set(ids)) / (1 + len(ids)) + (ids[:1] or [0])[0] % 10 / 10
            for r, ids in zip(rows["turn_reward"], rows["completion_ids"], strict=True)
        ]
        rows["turn_reward"] = shaped
        return rows


def build_ppo(tiny_model, tmp_path, role_adapters=False, role_models=False, **kwargs):
    """A PPO trainer on reflection (1 round, 4 problems) with `ShapedRollout` rewards."""
    return build_ppo_trainer(
        tiny_model,
        "math/reflection-v0",
        {"rounds": 1},
        ppo_config(tmp_path, **kwargs),
        train_problems=4,
        num_envs=8,
        role_adapters=role_adapters,
        role_models=role_models,
        rollout_cls=ShapedRollout,
    )


def check_rollout_matches_per_role_loss(trainer):
    """The per-role rollout's sampled logprobs equal the loss's per-role forward passes, and differ
    from running every row as the first role (the roles' weights really differ).

    Returns the (ids, attention, keep) it scored, for further checks."""
    model = trainer.model
    inputs = [dict(row) for row in trainer.train_dataset.select(range(3)) for _ in range(2)]
    out = trainer._generate_and_score_completions(inputs)
    assert out["role_index"].tolist() == [0, 0, 1, 1, 2, 2]
    ids = torch.cat([out["prompt_ids"], out["completion_ids"]], dim=1)
    attention = torch.cat([out["prompt_mask"], out["completion_mask"]], dim=1)
    keep = out["completion_ids"].size(1)
    mask = (out["completion_mask"] * out["tool_mask"]).bool()
    trainer._row_roles = out["role_index"]
    logps, _, _ = trainer._get_per_token_logps_and_entropies(model, ids, attention, keep)
    assert torch.allclose(logps[mask], out["sampling_per_token_logps"][mask], atol=1e-4)
    trainer._row_roles = torch.zeros_like(out["role_index"])
    single, _, _ = trainer._get_per_token_logps_and_entropies(model, ids, attention, keep)
    assert not torch.allclose(single[mask], logps[mask], atol=1e-3)
    trainer._row_roles = None
    return ids, attention, keep


def solver_only_reward(completions, completion_ids, turn_reward, **kwargs):
    """Reward spread on any model, for the solver's turns only (critic/refiner weighted 0)."""
    return [
        None if r is None else r + (sum(c) % 97) / 100 * (r != 0 or a.startswith("solver"))
        for r, c, a in zip(turn_reward, completion_ids, kwargs["agent"], strict=True)
    ]


def oracle_solver_team(config):
    """Reflection's roles for an evaluation `config`: a solver right on every problem it plays
    (the same as the model alone's solve-v0), a critic that accepts, a refiner that answers -1."""
    import envs
    from agents import OraclePolicy, RoleMap, ScriptedPolicy

    env = envs.make("math/solve-v0", **config.protocol.env_kwargs("math/solve-v0"))
    answers = {p["question"]: p["answer"] for p in env.unwrapped.task.source}
    return RoleMap(
        {
            "solver": OraclePolicy.from_answers(answers),
            "critic": ScriptedPolicy(["Verdict: correct"]),
            "refiner": ScriptedPolicy(["\\boxed{-1}"]),
        }
    )


class Counted:
    """A scripted policy that reports `tokens` completion tokens per reply, as a model would."""

    def __init__(self, policy, tokens):
        self.policy, self.tokens = policy, tokens

    def act(self, observations):
        return self.policy.act(observations)

    def generate(self, observations):
        from agents.base import Generation

        n = self.tokens
        return [Generation(t, [], [1] * n, [0.0] * n, "stop") for t in self.act(observations)]
