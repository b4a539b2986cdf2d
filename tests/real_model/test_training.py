"""Training SmolLM2-135M-Instruct with each of the project's trainers, one step at a time and on
tiny budgets: GRPO on the whole model and with a LoRA adapter per role (rollouts by the model
itself, in math/reflection-v0), SFT on chat rows, DPO on preference pairs, and (``-m slow``) the
SFT -> DPO rounds of ``mathteams train reflection dpo``. Each trainer loads its own copy from the
cache folder; the session's model is never trained.

SmolLM2's chat template has no ``{% generation %}`` markers and TRL ships no marked copy of it:
SFT confines its loss to the replies through prompt-completion rows instead
(`trainers.algorithms.sft.marks_replies`), which the SFT test checks token by token."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import AutoModelForCausalLM

from agents import GenerationArguments, HFPolicy, OraclePolicy, RoleMap, ScriptedPolicy
from agents.prompts import build_messages
from envs.roles import role_of
from tests.real_model.helpers import NAME, forward_logprobs, solve_problems
from tests.trainers.helpers import check_rollout_matches_per_role_loss, grpo_config
from trainers.algorithms.dpo import CPUDPOConfig, build_dpo_trainer
from trainers.algorithms.grpo import build_grpo_trainer
from trainers.algorithms.rows import turn_reward as turn_rewards
from trainers.algorithms.sft import CPUSFTConfig, build_sft_trainer, marks_replies
from trainers.roles.adapters import load_role_adapters, saved_roles
from trainers.rollout.engine import RolloutEngine

AGENTS = ("solver_0", "critic_0", "refiner_0")
ROLES = ["solver", "critic", "refiner"]


def weights(model, keep=lambda name: True) -> dict[str, torch.Tensor]:
    """A copy of the model's parameters (those whose names `keep` accepts)."""
    return {n: p.detach().clone() for n, p in model.named_parameters() if keep(n)}


def changed(model, before: dict[str, torch.Tensor]) -> set[str]:
    """The names of the parameters in `before` whose values moved."""
    now = dict(model.named_parameters())
    return {n for n, p in before.items() if not torch.equal(now[n], p)}


def step_log(trainer) -> dict[str, float]:
    """The log entry of the trainer's (one) optimizer step."""
    (log,) = [row for row in trainer.state.log_history if "loss" in row]
    return log


def spread(completions, completion_ids, turn_reward, **kwargs):
    """The turn rewards plus a spread any two different replies get (the sum of their token ids
    mod 97, in hundredths): the model is seldom right at this size, and a group of equal
    rewards has no advantage to train on."""
    base = turn_rewards(completions, turn_reward, completion_ids=completion_ids, **kwargs)
    return [
        None if r is None else r + sum(ids) % 97 / 100
        for r, ids in zip(base, completion_ids, strict=True)
    ]


def reflection_trainer(path, tmp_path, role_adapters=False, **config):
    """A one-step GRPO trainer on reflection (1 round: 3 turn slots), 1 problem, G = 2, replies
    of 16 tokens, rewarded by `spread`."""
    trainer = build_grpo_trainer(
        path,
        "math/reflection-v0",
        {"rounds": 1},
        grpo_config(tmp_path, per_device_train_batch_size=6, max_completion_length=16, **config),
        train_problems=1,
        num_envs=2,
        role_adapters=role_adapters,
    )
    trainer.reward_funcs[0] = spread
    return trainer


def test_one_grpo_step_trains_the_whole_model(real_model, tmp_path):
    """One GRPO step on 2 episodes of the model's own reflection play: a finite loss, a finite
    non-zero gradient norm, every weight moved, every agent's figures logged; the session's
    model is untouched."""
    trainer = reflection_trainer(real_model.path, tmp_path, learning_rate=1e-5)
    assert trainer.model is not real_model.model
    kept = weights(real_model.model, lambda name: name.endswith("norm.weight"))
    before = weights(trainer.model)
    trainer.train()
    log = step_log(trainer)
    assert math.isfinite(log["loss"]) and math.isfinite(log["grad_norm"]) and log["grad_norm"] > 0
    assert changed(trainer.model, before) == set(before)
    for agent in AGENTS:
        assert math.isfinite(log[f"agents/{agent}/reward"])
        assert 0 < log[f"agents/{agent}/completion_length"] <= 16
    assert not changed(real_model.model, kept)


def recorded_rewards(trainer) -> list[tuple[str, float]]:
    """Makes the trainer's reward `spread` and records each turn's ``(agent, reward)``."""
    seen: list[tuple[str, float]] = []

    def turn_reward(completions, completion_ids, turn_reward, **kwargs):
        rewards = spread(completions, completion_ids, turn_reward, **kwargs)
        seen.extend(
            (agent, reward)
            for agent, reward in zip(kwargs["agent"], rewards, strict=True)
            if agent is not None and reward is not None
        )
        return rewards

    trainer.reward_funcs[0] = turn_reward
    return seen


def perturb_adapters(model, scale: float = 0.02) -> None:
    """Distinct random adapters (each starts as the identity, LoRA's B = 0)."""
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=generator) * scale)


def test_one_grpo_step_with_a_lora_adapter_per_role(real_model, tmp_path):
    """A LoRA adapter per role on the frozen model: the rollout's sampled log-probabilities
    (each row under its role's adapter) equal the loss's per-role forward passes. One step
    moves the adapter of each role whose two samples earned different rewards (a non-zero
    advantage), and only those, and no base weight; the saved adapters load back onto a fresh
    copy of the model."""
    trainer = reflection_trainer(real_model.path, tmp_path, role_adapters=True, learning_rate=1e-3)
    model = trainer.model
    assert sorted(model.peft_config) == sorted(ROLES)
    perturb_adapters(model)
    check_rollout_matches_per_role_loss(trainer)
    base = weights(model, lambda name: "lora_" not in name)
    lora = weights(model, lambda name: "lora_" in name)
    rewards = recorded_rewards(trainer)
    trainer.train()
    log = step_log(trainer)
    assert math.isfinite(log["loss"]) and math.isfinite(log["grad_norm"])
    spread_roles = {
        role for role in ROLES if len({r for agent, r in rewards if role_of(agent) == role}) > 1
    }
    assert spread_roles, rewards  # `spread` tells apart any two different replies
    moved = {role for role in ROLES if any(f".{role}." in n for n in changed(model, lora))}
    assert moved == spread_roles
    assert not changed(model, base)
    trainer.save_model(str(tmp_path / "final"))
    assert saved_roles(tmp_path / "final") == sorted(ROLES)
    fresh = AutoModelForCausalLM.from_pretrained(real_model.path)
    loaded = dict(load_role_adapters(fresh, tmp_path / "final", ROLES).named_parameters())
    for name, param in model.named_parameters():
        if "lora_" in name:
            assert torch.equal(loaded[name], param), name


def reference_rows(count: int) -> list[dict]:
    """`count` solve-v0 problems: each one's observation, its chat messages, a right reply (the
    reference answer) and a wrong one (the answer plus one)."""
    rows = []
    for observation, answer in solve_problems(count):
        wrong = str(int(answer) + 1) if answer.lstrip("-").isdigit() else f"{answer}1"
        rows.append(
            {
                "observation": observation,
                "messages": build_messages(observation),
                "right": f"The answer is \\boxed{{{answer}}}.",
                "wrong": f"The answer is \\boxed{{{wrong}}}.",
            }
        )
    return rows


def test_one_sft_step_trains_on_the_replies_only(real_model, real_policy, tmp_path):
    """SFT on 4 chat rows (solve-v0 prompts, right answers): SmolLM2's template marks no reply,
    so the rows go prompt-completion, the caller's config untouched. Each row's tokens are the
    policy's own prompt tokens then the reply and its end of turn, and the loss covers exactly
    the latter. One step: a finite loss, weights moved, the replies likelier than before."""
    rows = reference_rows(4)
    chats = [
        {"messages": [*row["messages"], {"role": "assistant", "content": row["right"]}]}
        for row in rows
    ]
    args = CPUSFTConfig(
        output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=4, learning_rate=1e-5
    )
    assert not marks_replies(real_model.path)
    trainer = build_sft_trainer(real_model.path, chats, args)
    assert args.assistant_only_loss and not trainer.args.assistant_only_loss
    assert trainer.args.completion_only_loss
    tokenizer, policy = real_model.tokenizer, real_policy()
    replies = []
    for example, row in zip(trainer.train_dataset, rows, strict=True):
        prompt = policy.encode([row["observation"]])[0]
        ids, labels, n = example["input_ids"], example["labels"], len(prompt)
        assert ids[:n] == prompt and set(labels[:n]) == {-100}
        assert labels[n:] == ids[n:]
        assert tokenizer.decode(ids[n:], skip_special_tokens=True).strip() == row["right"]
        assert tokenizer.eos_token_id in ids[n:]  # <|im_end|>: the model learns to stop
        replies.append((prompt, ids[n:]))
    before = weights(trainer.model)
    trainer.train()
    log = step_log(trainer)
    assert math.isfinite(log["loss"]) and math.isfinite(log["grad_norm"])
    assert changed(trainer.model, before)
    trainer.model.eval()
    for prompt, reply in replies:
        start = forward_logprobs(real_model.model, prompt, reply).sum()
        trained = forward_logprobs(trainer.model, prompt, reply).sum()
        assert trained > start


def test_one_dpo_step_on_right_and_wrong_answers(real_model, tmp_path):
    """DPO on 2 pairs (a solve-v0 prompt, its right answer chosen over a wrong one), with the
    pipeline's losses (DPO's sigmoid plus the chosen reply's NLL): one step gives finite
    losses and log-probabilities and moves the weights."""
    pairs = [
        {
            "prompt": row["messages"],
            "chosen": [{"role": "assistant", "content": row["right"]}],
            "rejected": [{"role": "assistant", "content": row["wrong"]}],
        }
        for row in reference_rows(2)
    ]
    args = CPUDPOConfig(
        output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=2, learning_rate=1e-5
    )
    trainer = build_dpo_trainer(real_model.path, pairs, args)
    before = weights(trainer.model)
    trainer.train()
    log = step_log(trainer)
    for key in ("loss", "grad_norm", "rewards/margins", "logps/chosen", "logps/rejected"):
        assert math.isfinite(log[key]), key
    assert log["logps/chosen"] < 0 and log["logps/rejected"] < 0
    assert changed(trainer.model, before)


def scripted_rollouts(job, model_path, config, seed=None, offset=0):
    """Stands in for the rounds' `rollout_episodes`: per training problem, two reflection
    episodes played by scripted roles (the start model's own play is seldom right at this
    size, so a round would have nothing to train on): a wrong first answer that the critic
    rejects and the refiner fixes, and a right one that the critic accepts."""
    engine = RolloutEngine(job.env_id, ScriptedPolicy(["x"]), job.protocol("train").env_kwargs())
    source = engine.task.source
    count = config.rollout_problems
    answers = {source[i]["question"]: source[i]["answer"] for i in range(offset, offset + count)}
    oracle = OraclePolicy(lambda observation: answers[observation["question"]])
    wrong = {"solver": ScriptedPolicy(["I get \\boxed{-1}."]), "refiner": oracle}
    wrong["critic"] = ScriptedPolicy(["The answer is wrong.\nVerdict: incorrect"])
    right = {"solver": oracle, "critic": ScriptedPolicy(["Verdict: correct"]), "refiner": oracle}
    episodes = []
    for sample, team in enumerate((wrong, right)):
        engine.policies = RoleMap(team)
        for episode in engine.run(engine.problem_ids(count, offset)):
            episode.sample = sample
            episodes.append(episode)
    return sorted(episodes, key=lambda e: (e.group, e.sample))


@pytest.mark.slow
def test_the_sft_then_dpo_rounds_train_and_evaluate_the_model(real_model, tmp_path, monkeypatch):
    """``mathteams train reflection dpo`` on the model by its catalog name: one SFT round, then
    one DPO round (one step each, on the scripted rollouts' good turns and pairs), evaluated
    by the model before and after. The final model differs from the start, and loads and plays
    as a policy."""
    from trainers.algorithms import rounds
    from trainers.run.args import Job
    from trainers.run.train import train_dpo

    monkeypatch.setattr(rounds, "rollout_episodes", scripted_rollouts)
    job = Job.of(
        env_id="math/reflection-v0",
        model_name_or_path=NAME,
        eval_problems=1,
        eval_samples=1,
        rounds=1,
        task="arithmetic",
        difficulty=[1],
    )
    out = tmp_path / "run"
    config = CPUDPOConfig(
        output_dir=str(out),
        max_steps=1,
        sft_steps=1,
        sft_iterations=1,
        select_on_validation=False,
        rollout_problems=2,
        max_completion_length=16,
    )
    metrics = train_dpo(job, config)
    sft, dpo = metrics["rounds"]
    assert (sft["stage"], dpo["stage"], sft["steps"], dpo["steps"]) == ("sft", "dpo", 1, 1)
    assert sft["rows_per_case"]["solver/first"] == 2 and dpo["pairs_per_kind"]["solver"] == 2
    for when in ("before", "after"):
        assert metrics[when]["metrics"]["episodes"] == 1, when
    final = out / "final"
    start = AutoModelForCausalLM.from_pretrained(real_model.path)
    trained = AutoModelForCausalLM.from_pretrained(final)
    assert changed(trained, weights(start))
    policy = HFPolicy.from_pretrained(str(final), GenerationArguments(max_new_tokens=8))
    (observation, _), *_ = solve_problems(1)
    (generation,) = policy.generate([observation])
    assert generation.completion_ids and generation.prompt_ids == policy.encode([observation])[0]
