"""Multi-agent PPO: turn-level GAE, per-token advantages, value head training and checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from tests.trainers.helpers import build_ppo
from trainers.algorithms.ppo import (
    CPUPPOConfig,
    episode_gae,
    trajectories,
    turn_gae,
)
from trainers.algorithms.rows import slot_prompt


def test_turn_gae_matches_a_hand_computation():
    adv, ret = turn_gae([1.0, 0.0, 2.0], [0.5, 0.2, 0.1], gamma=0.9, lam=0.8)
    # t=2: 2 - 0.1 = 1.9; t=1: 0 + 0.09 - 0.2 + 0.72 * 1.9; t=0: 1 + 0.18 - 0.5 + 0.72 * A1
    assert adv == pytest.approx([1.58576, 1.258, 1.9])
    assert ret == pytest.approx([2.08576, 1.458, 2.0])
    assert turn_gae([1.0], [0.25], 1.0, 1.0) == ([0.75], [1.0])


def test_episode_gae_chains_each_agents_turns_and_skips_padding():
    # reflection with 2 rounds: slots solver, critic, refiner, critic, refiner; G = 2.
    agents_of = ["solver_0", "critic_0", "refiner_0", "critic_0", "refiner_0"]
    prompts, agents, rewards = [], [], []
    for slot, agent in enumerate(agents_of):
        for sample in range(2):
            prompts.append(slot_prompt("p", slot))
            ended = sample == 1 and slot >= 3  # sample 1 stopped after its first refiner
            agents.append(None if ended else agent)
            rewards.append(None if ended else float(slot % 2))
    values = [0.1 * i for i in range(len(prompts))]
    adv, ret, trainable = episode_gae(prompts, agents, rewards, values, 2, gamma=1.0, lam=1.0)
    assert trajectories(prompts, 2)[("p", 0)] == [0, 2, 4, 6, 8]
    assert trainable == [True] * 7 + [False, True, False]
    # sample 0's critic turns are rows 2 and 6 (rewards 1 and 1): A = returns-to-go - V.
    assert adv[6] == pytest.approx(1.0 - values[6])
    assert adv[2] == pytest.approx(1.0 + 1.0 - values[2])
    # sample 1's critic had one turn (row 3); its padding rows get 0.
    assert adv[3] == pytest.approx(1.0 - values[3])
    assert adv[7] == adv[9] == 0.0 and ret[7] == 0.0
    # the solver (one turn, reward 0) is not credited with the others' rewards.
    assert adv[0] == pytest.approx(-values[0])


def test_bad_ppo_settings_raise_clearly():
    with pytest.raises(ValueError, match=r"gamma=1.5; it must be in \[0, 1\]"):
        CPUPPOConfig(output_dir="x", gamma=1.5)
    with pytest.raises(ValueError, match="value_epochs"):
        CPUPPOConfig(output_dir="x", value_epochs=0)


def test_advantages_are_per_token_and_zero_where_masked(tiny_model, tmp_path):
    trainer = build_ppo(tiny_model, tmp_path)
    inputs = [dict(row) for row in trainer.train_dataset.select(range(3)) for _ in range(2)]
    out = trainer._generate_and_score_completions(inputs)
    adv = out["advantages"]
    assert adv.shape == out["completion_ids"].shape
    mask = (out["completion_mask"] * out["tool_mask"]).bool()
    assert (adv[~mask] == 0).all() and (adv[mask] != 0).any()
    for row in range(adv.shape[0]):  # one advantage per turn, on every one of its tokens
        assert len(set(adv[row][mask[row]].tolist())) <= 1


def test_a_step_trains_policy_and_value_head_and_logs_ppo_metrics(tiny_model, tmp_path):
    trainer = build_ppo(tiny_model, tmp_path, max_steps=2)
    before = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    head = trainer.value_head.weight.detach().clone()
    trainer.train()
    assert any(not torch.equal(before[k], v) for k, v in trainer.model.named_parameters())
    assert not torch.equal(head, trainer.value_head.weight)
    logs = {k: v for row in trainer.state.log_history for k, v in row.items()}
    for key in ("ppo/value_loss", "ppo/explained_variance", "ppo/advantage_mean", "loss"):
        assert key in logs and torch.isfinite(torch.tensor(logs[key])), key


def test_value_head_is_checkpointed_and_restored_on_resume(tiny_model, tmp_path):
    trainer = build_ppo(tiny_model, tmp_path, max_steps=1, save_strategy="steps", save_steps=1)
    trainer.train()
    checkpoint = Path(trainer.args.output_dir) / "checkpoint-1"
    assert (checkpoint / "value_head.pt").is_file()
    trained = trainer.value_head.weight.detach().clone()
    resumed = build_ppo(tiny_model, tmp_path / "again", max_steps=1)
    assert not torch.equal(resumed.value_head.weight, trained)
    resumed._load_from_checkpoint(str(checkpoint))  # the hook train(resume_from_checkpoint=) calls
    assert torch.equal(resumed.value_head.weight, trained)
    assert resumed.value_optimizer.state_dict()["state"]  # Adam moments came back too
    fresh = build_ppo(tiny_model, tmp_path / "fresh", max_steps=1)
    assert not fresh.load_value_head(tmp_path)  # no value_head.pt there: nothing loaded


def test_ppo_script_end_to_end(run_script, tiny_model, tmp_path):
    out = tmp_path / "run"
    result = run_script(
        "train_debate.py",
        "ppo",
        *("--model_name_or_path", tiny_model, "--max_steps", "1"),
        *("--eval_problems", "1", "--eval_samples", "1", "--train_problems", "2"),
        *("--max_completion_length", "4", "--rounds", "1", "--num_agents", "2"),
        *("--influence_discount", "0.5", "--num_generations", "2"),
        *("--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "1"),
        *("--output_dir", str(out)),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["algo"] == "ppo" and {"before", "after", "summary"} <= set(metrics)
    assert any("ppo/value_loss" in row for row in metrics["log_history"])
    assert (out / "final" / "value_head.pt").is_file()
