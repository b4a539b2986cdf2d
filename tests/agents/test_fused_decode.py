"""The fused decode step (`agents.fused_decode`): the model's own arithmetic, the same tokens and
log-probabilities as calling the model, within float tolerance; refused where it would differ."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import Cache

from agents import fused_decode
from agents.base import GenerationArguments
from agents.batching import ContinuousBatcher
from agents.fused_decode import fused_decoder
from agents.hf import HFPolicy
from agents.kv_cache import RowCache
from agents.tiny import build_tiny_model

pytestmark = pytest.mark.filterwarnings("ignore:`is_gradient_checkpointing`:FutureWarning")

SAMPLED = GenerationArguments(max_new_tokens=20, temperature=1.0, do_sample=True, seed=3)


@pytest.mark.parametrize("packed", [True, False])
@pytest.mark.parametrize("kv_heads", [2, 4])
@pytest.mark.parametrize("arch", ["qwen2", "llama", "mistral"])
def test_fused_prefill_and_steps_give_the_models_logits_on_left_padded_rows(
    tokenizer, arch, kv_heads, packed, monkeypatch
):
    # 2 key/value heads for 4 query heads: grouped-query attention; 4: one each. Packed
    # weights (small models) or the model's parameters read at every step (large ones).
    monkeypatch.setattr(fused_decode, "PACK_MAX", 1 << 30 if packed else 0)
    torch.manual_seed(0)
    model = build_tiny_model(tokenizer, arch=arch, num_kv_heads=kv_heads, seed=1).eval()
    fused = fused_decoder(model)
    assert fused is not None and (fused.packed is not None) == packed
    rows, width = 3, 9
    ids = torch.randint(5, 60, (rows, width))
    mask = torch.ones((rows, width), dtype=torch.long)
    mask[0, :4], mask[2, :2] = 0, 0  # left padding, as generate pads
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    caches = [RowCache(model.config, model.dtype, model.device, 8) for _ in range(2)]
    with torch.no_grad():
        # the prompt, as the batcher prefills it: into the cache's window, after a stored
        # prefix of 4 tokens (its states already in the window's first columns)
        prefix, windows = 4, []
        for kv in caches:
            end = kv.place(rows, width)
            kv.seat([mask], end)
            windows.append(kv.windows(slice(0, rows), end - width))
        for model_call, window in zip((True, False), windows, strict=True):
            for part in (slice(0, prefix), slice(prefix, width)):
                if model_call or part.start == 0:  # the prefix: the model's states, both
                    logits = model(
                        input_ids=ids[:, part],
                        attention_mask=mask[:, : part.stop],
                        position_ids=positions[:, part],
                        past_key_values=Cache(layers=list(window)),
                        use_cache=True,
                    ).logits[:, -1, :]
                else:
                    logits = fused(ids[:, part], positions[:, part], mask, window)
            if model_call:
                want = logits
        torch.testing.assert_close(logits, want, rtol=1e-4, atol=1e-5)
        for a, b in zip(caches[0].layers, caches[1].layers, strict=True):
            torch.testing.assert_close(a.key_buffer, b.key_buffer, rtol=1e-4, atol=1e-5)
            torch.testing.assert_close(a.value_buffer, b.value_buffer, rtol=1e-4, atol=1e-5)
        for step in range(3):
            last = torch.randint(5, 60, (rows, 1))
            where = positions[:, -1:] + 1 + step
            for kv in caches:
                kv.extend()
            want = model(
                input_ids=last,
                attention_mask=caches[0].mask,
                position_ids=where,
                past_key_values=caches[0].cache,
                use_cache=True,
            ).logits[:, -1, :]
            got = fused(last, where, caches[1].mask, caches[1].layers)
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
            for a, b in zip(caches[0].layers, caches[1].layers, strict=True):
                torch.testing.assert_close(a.keys, b.keys, rtol=1e-4, atol=1e-5)
                torch.testing.assert_close(a.values, b.values, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("arch", ["qwen2", "mistral"])
def test_sampled_rows_get_the_same_tokens_and_logprobs_fused_or_not(tokenizer, arch):
    model = build_tiny_model(tokenizer, arch=arch, seed=2)
    policy = HFPolicy(model, tokenizer, SAMPLED)
    prompts = policy.encode(
        [
            {"instruction": "Solve.", "prompt": f"What is {i} + {3 * i}?" * (1 + i % 3)}
            for i in range(10)
        ]
    )
    out = {}
    for fused in (True, False):
        batcher = ContinuousBatcher(policy, seed=7, admit_wait=1, fused=fused)
        assert (batcher.fused is not None) == fused
        got, pending, steps = {}, list(enumerate(prompts)), 0
        while pending or batcher.busy:
            if pending and steps % 2 == 0:
                batcher.submit(*pending.pop(0))
            got.update(batcher.step())
            steps += 1
        out[fused] = got
    for key, plain in out[False].items():
        fast = out[True][key]
        assert fast.completion_ids == plain.completion_ids, key
        torch.testing.assert_close(
            torch.tensor(fast.logprobs), torch.tensor(plain.logprobs), rtol=1e-4, atol=1e-4
        )


def test_models_whose_forward_it_does_not_repeat_are_called_as_before(tokenizer):
    model = build_tiny_model(tokenizer, arch="qwen2", seed=0)
    lora = get_peft_model(model, LoraConfig(r=2, target_modules=["q_proj"]))
    assert fused_decoder(lora) is None and fused_decoder(lora.base_model.model) is None
    other = build_tiny_model(tokenizer, arch="llama", seed=0)
    other.config.hidden_act = "gelu"
    assert fused_decoder(other) is None
    plain = build_tiny_model(tokenizer, arch="llama", seed=0)
    policy = HFPolicy(plain, tokenizer, dataclasses.replace(SAMPLED, max_new_tokens=4))
    assert ContinuousBatcher(policy).fused is not None
    assert ContinuousBatcher(policy, fused=False).fused is None
