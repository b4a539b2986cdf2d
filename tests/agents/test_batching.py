"""Continuous batching: rows admitted and released at any step decode exactly as `generate` does."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from peft import LoraConfig

from agents.base import GenerationArguments, as_stepwise, stepwise_key
from agents.batching import SHARED_PREFIX_MIN, ContinuousBatcher, supports_model
from agents.hf import HFPolicy
from agents.roles import build_lora_role_map
from agents.scripted import ScriptedPolicy
from agents.tiny import build_tiny_model
from tests.agents.helpers import GREEDY, Stepwise, teacher_forced_logprobs

pytestmark = pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing`:FutureWarning")

LONG = dataclasses.replace(GREEDY, max_new_tokens=24)


def drain(batcher, rows, every=2, per=2):
    """Submits `rows` (key -> prompt ids) `per` at a time every `every` steps while stepping,
    so rows join a batch that is already running; returns key -> Generation."""
    pending = list(rows.items())
    out = {}
    step = 0
    while pending or batcher.busy:
        if pending and step % every == 0:
            for key, ids in pending[:per]:
                batcher.submit(key, ids)
            pending = pending[per:]
        for key, generation in batcher.step():
            assert key not in out
            out[key] = generation
        step += 1
        assert step < 1000
    return out


def shared_prompts(policy, count=6):
    """Prompts of one role (a shared instruction of more than SHARED_PREFIX_MIN tokens) and of
    another, of different lengths."""
    instruction = "You are a careful math solver. Think step by step and box the answer."
    obs = [
        {
            "instruction": instruction if i % 3 else "Critic.",
            "prompt": f"What is {i} + {i * 7}?" * (1 + i % 3),
        }
        for i in range(count)
    ]
    return dict(enumerate(policy.encode(obs)))


@pytest.mark.parametrize("arch", ["qwen2", "mistral"])
def test_greedy_rows_joining_a_running_batch_match_generate(tokenizer, arch) -> None:
    model = build_tiny_model(tokenizer, arch=arch, seed=0)
    policy = HFPolicy(model, tokenizer, LONG)
    rows = shared_prompts(policy, 8)
    assert max(len(p) for p in rows.values()) > SHARED_PREFIX_MIN
    reference = {k: policy.generate_from_ids([p])[0] for k, p in rows.items()}
    batcher = ContinuousBatcher(policy, admit_wait=1)
    out = drain(batcher, rows)
    for key, ref in reference.items():
        got = out[key]
        assert got.completion_ids == ref.completion_ids, key
        assert got.prompt_ids == ref.prompt_ids
        assert got.finish_reason == ref.finish_reason
        assert got.logprobs == pytest.approx(ref.logprobs, abs=1e-4)
    counts = batcher.counts()
    assert counts["admitted"] == len(rows)
    assert counts["generated"] == sum(len(g.completion_ids) for g in out.values())
    # every row's prompt is run, shared instructions once per admission: fewer prompt tokens
    assert counts["prefill_tokens"] < sum(len(p) for p in rows.values())
    assert not batcher.busy


def test_one_admission_of_very_different_lengths_prefills_in_chunks_as_generate(tokenizer):
    model = build_tiny_model(tokenizer, arch="qwen2", seed=1)
    policy = HFPolicy(model, tokenizer, LONG)
    obs = [
        {"instruction": "Solve it.", "prompt": f"What is {i} + {2 * i}? " * (1 + 9 * (i % 2))}
        for i in range(6)
    ]
    rows = dict(enumerate(policy.encode(obs)))
    lengths = sorted(len(p) for p in rows.values())
    assert lengths[-1] > 3 * lengths[0]
    reference = {k: policy.generate_from_ids([p])[0] for k, p in rows.items()}
    batcher = ContinuousBatcher(policy)
    out = drain(batcher, rows, per=len(rows))  # all in the first admission
    for key, ref in reference.items():
        assert out[key].completion_ids == ref.completion_ids, key
        assert out[key].logprobs == pytest.approx(ref.logprobs, abs=1e-4)
    counts = batcher.counts()
    # the shared instruction's forward, then the short prompts and the long ones in separate
    # forwards, with less padding than one
    assert counts["prefills"] >= 3
    assert counts["prefill_padded"] < len(rows) * lengths[-1]


def test_sampled_logprobs_match_teacher_forcing(model, tokenizer, observations) -> None:
    args = GenerationArguments(max_new_tokens=12, temperature=0.7, top_k=20, seed=3)
    policy = HFPolicy(model, tokenizer, args)
    rows = dict(enumerate(policy.encode(observations)))
    out = drain(ContinuousBatcher(policy), rows, every=3, per=1)
    for key, generation in out.items():
        expected = teacher_forced_logprobs(
            model, generation.prompt_ids, generation.completion_ids, args.temperature
        )
        torch.testing.assert_close(
            torch.tensor(generation.logprobs), expected, atol=1e-4, rtol=1e-4
        )
        assert generation.prompt_ids == rows[key]


def test_seeded_sampling_is_reproducible(model, tokenizer, observations) -> None:
    args = GenerationArguments(max_new_tokens=12, seed=5)
    policy = HFPolicy(model, tokenizer, args)
    rows = dict(enumerate(policy.encode(observations)))
    first = drain(ContinuousBatcher(policy, seed=11), rows)
    again = drain(ContinuousBatcher(policy, seed=11), rows)
    other = drain(ContinuousBatcher(policy, seed=12), rows)
    assert [first[k].completion_ids for k in rows] == [again[k].completion_ids for k in rows]
    assert [first[k].completion_ids for k in rows] != [other[k].completion_ids for k in rows]


def test_stop_strings_and_eos_end_rows_as_generate_does(model, tokenizer, observations) -> None:
    free = HFPolicy(model, tokenizer, LONG).generate(observations[:1])[0]
    stop = free.text[6:9]
    args = dataclasses.replace(LONG, stop_strings=[stop])
    policy = HFPolicy(model, tokenizer, args)
    reference = policy.generate(observations)
    out = drain(ContinuousBatcher(policy), dict(enumerate(policy.encode(observations))))
    assert out[0].finish_reason == "stop" and stop not in out[0].text
    for key, ref in enumerate(reference):
        assert (out[key].text, out[key].completion_ids, out[key].finish_reason) == (
            ref.text,
            ref.completion_ids,
            ref.finish_reason,
        )
    eos = free.completion_ids[2]
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, eos]
    policy = HFPolicy(model, tokenizer, LONG)
    (row,) = drain(ContinuousBatcher(policy), {0: free.prompt_ids}).values()
    assert row.completion_ids == free.completion_ids[:3] and row.finish_reason == "stop"


def test_max_rows_bounds_the_batch_and_the_rest_wait(model, tokenizer, observations) -> None:
    policy = HFPolicy(model, tokenizer, dataclasses.replace(LONG, max_batch_size=2))
    rows = dict(enumerate(policy.encode(observations * 2)))
    batcher = ContinuousBatcher(policy)
    for key, ids in rows.items():
        batcher.submit(key, ids)
    widest = 0
    out = {}
    while batcher.busy:
        out.update(batcher.step())
        widest = max(widest, len(batcher.rows))
    assert widest == 2
    reference = policy.generate(observations * 2)
    assert [out[k].completion_ids for k in rows] == [g.completion_ids for g in reference]


def lora_roles(model, tokenizer):
    """A solver and a critic on LoRA adapters of `model` that give different outputs."""
    lora = LoraConfig(
        r=4,
        lora_alpha=32,
        target_modules="all-linear",
        init_lora_weights=False,
        task_type="CAUSAL_LM",
    )
    roles = build_lora_role_map(model, tokenizer, ["solver", "critic"], lora, LONG)
    return roles["solver"], roles["critic"]


def test_rows_with_different_lora_adapters_share_the_batch(model, tokenizer, observations) -> None:
    solver, critic = lora_roles(model, tokenizer)
    obs = observations + observations
    prompts = solver.encode(obs)
    batcher = ContinuousBatcher(solver)
    for i, ids in enumerate(prompts):  # the same prompts, half of them on the critic adapter
        batcher.submit(i, ids, "critic" if i >= len(observations) else None)
    out = {}
    while batcher.busy:
        out.update(batcher.step())
    expected = solver.generate(observations) + critic.generate(observations)
    assert [out[i].completion_ids for i in range(len(obs))] == [g.completion_ids for g in expected]
    assert (
        solver.generate(observations)[0].completion_ids
        != expected[len(observations)].completion_ids
    )


def test_bad_input_and_unsupported_models(model, tokenizer) -> None:
    policy = HFPolicy(model, tokenizer, LONG)
    batcher = ContinuousBatcher(policy)
    with pytest.raises(ValueError, match="empty prompt"):
        batcher.submit("k", [])
    assert not batcher.busy  # nothing was queued
    assert batcher.step() == []
    assert supports_model(model)
    model.config.layer_types = ["sliding_attention"] * model.config.num_hidden_layers
    assert not supports_model(model)
    with pytest.raises(ValueError, match="full attention"):
        ContinuousBatcher(policy)


def test_a_sampled_row_draws_the_same_tokens_whoever_shares_its_batch(
    model, tokenizer, observations
) -> None:
    policy = HFPolicy(model, tokenizer, GenerationArguments(max_new_tokens=12, top_p=0.9))
    rows = dict(enumerate(policy.encode(observations)))
    alone = {k: drain(ContinuousBatcher(policy, seed=7), {k: ids})[k] for k, ids in rows.items()}
    together = drain(ContinuousBatcher(policy, seed=7), dict(reversed(rows.items())), per=3)
    assert {k: g.completion_ids for k, g in alone.items()} == {
        k: g.completion_ids for k, g in together.items()
    }
    assert len({tuple(g.completion_ids) for g in alone.values()}) > 1


def test_sampling_follows_the_policys_distribution(model, tokenizer) -> None:
    # One prompt, many rows: first-token frequencies match softmax(logits / T) of the model.
    args = GenerationArguments(max_new_tokens=1, temperature=1.5, top_k=5)
    policy = HFPolicy(model, tokenizer, args)
    (ids,) = policy.encode([{"instruction": "", "prompt": "2 + 2 ="}])
    batcher = ContinuousBatcher(policy, seed=0)
    for k in range(2000):
        batcher.submit(k, ids)
    firsts = torch.tensor([g.completion_ids[0] for _, g in batcher.step()])
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, -1] / args.temperature
    top = logits.topk(5)
    expected = torch.softmax(top.values, -1)
    counts = torch.stack([(firsts == t).float().mean() for t in top.indices])
    assert counts.sum() == 1  # nothing outside the top 5
    torch.testing.assert_close(counts, expected, atol=0.04, rtol=0)


def test_continuous_batching_runs_any_policy_offering_stepwise_decoding(
    model, tokenizer, observations
) -> None:
    policy = HFPolicy(model, tokenizer, LONG)
    other = Stepwise(policy)
    assert as_stepwise(policy) is policy and as_stepwise(other) is other
    assert as_stepwise(ScriptedPolicy(["x"])) is None  # no model to decode
    assert stepwise_key(other) == stepwise_key(policy)
    rows = dict(enumerate(policy.encode(observations)))
    got = drain(ContinuousBatcher(other), rows)
    assert {k: g.completion_ids for k, g in got.items()} == {
        k: policy.generate_from_ids([ids])[0].completion_ids for k, ids in rows.items()
    }


def test_prompts_admitted_later_run_past_their_stored_prefix(tokenizer) -> None:
    model = build_tiny_model(tokenizer, arch="qwen2", seed=2)
    policy = HFPolicy(model, tokenizer, LONG)
    rows = shared_prompts(policy, 9)
    reference = {k: policy.generate_from_ids([p])[0] for k, p in rows.items()}
    counts = {}
    for budget in (0, 1 << 16):
        batcher = ContinuousBatcher(policy, admit_wait=1, prefix_budget=budget)
        out = drain(batcher, rows, every=6, per=1)  # one row an admission
        for key, ref in reference.items():
            assert out[key].completion_ids == ref.completion_ids, (budget, key)
            assert out[key].logprobs == pytest.approx(ref.logprobs, abs=1e-4)
        counts[budget] = batcher.counts()
    # one row an admission: nothing to share within one, the store shares across them
    assert counts[0]["prefill_reused"] == 0
    assert counts[0]["prefill_tokens"] == sum(len(p) for p in rows.values())
    assert counts[1 << 16]["prefill_reused"] > 4 * SHARED_PREFIX_MIN
    assert (
        counts[1 << 16]["prefill_tokens"] + counts[1 << 16]["prefill_reused"]
        == counts[0]["prefill_tokens"]
    )


def test_stored_prefixes_are_kept_per_adapter(model, tokenizer, observations) -> None:
    solver, critic = lora_roles(model, tokenizer)
    prompts = solver.encode(observations)
    batcher = ContinuousBatcher(solver)
    for i, ids in enumerate(prompts):  # first the solver's rows, stored under its adapter
        batcher.submit(("solver", i), ids)
    out = dict(batcher.step())
    for i, ids in enumerate(prompts):  # then the same prompts under the critic's
        batcher.submit(("critic", i), ids, "critic")
    while batcher.busy:
        out.update(batcher.step())
    for name, policy in (("solver", solver), ("critic", critic)):
        got = [out[(name, i)].completion_ids for i in range(len(prompts))]
        assert got == [g.completion_ids for g in policy.generate(observations)], name
