"""The fused decode step (`agents.fused_decode`) on a real Llama model: SmolLM2-135M-Instruct's
30 layers, grouped-query attention (9 query heads, 3 key/value heads) and tied embeddings, on the
prompts solve-v0 really sends. At 135M parameters the decoder packs no weights (the packed copy
would exceed `PACK_MAX`): it reads the model's parameters at every call, the path tested here.

Two continuous batchers (`agents.batching.ContinuousBatcher`) decode the same 100 prompts
greedily in lockstep, one with the fused step and one calling the model's own forward: with the
same tokens they admit, prefill, decode and release alike, so every call's logits can be
compared row for row. Their difference is float rounding only (other kernels, the same
arithmetic): the largest measured here was 5.7e-5 over 17 calls (the shared prefix's prefill,
the prompts' prefill, 15 decode steps; logits of magnitude ~30), and `LOGIT_TOL` allows 17x
that. The test records the figure it measured (``max_logit_diff``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import torch

from agents import fused_decode
from agents.batching import ContinuousBatcher
from agents.fused_decode import fused_decoder
from tests.real_model.helpers import forward_logits, solve_observations

PROMPTS = 100
NEW_TOKENS = 16
LOGIT_TOL = 1e-3
"""Largest logit difference allowed between the fused step and the model's forward (module
docstring: 5.7e-5 measured)."""
LOGPROB_TOL = 1e-3  # the same margin for the records' log-probabilities (1.2e-5 measured)


@dataclass
class Lockstep:
    """What the two batchers decoded: each key's `Generation`, fused and not, the largest logit
    difference over the calls both made on the same inputs, and how many such calls."""

    fused: dict = field(default_factory=dict)
    plain: dict = field(default_factory=dict)
    max_logit_diff: float = 0.0
    compared_calls: int = 0


def _same_rows(a: ContinuousBatcher, b: ContinuousBatcher) -> bool:
    """Whether the two batchers hold the same rows with the same tokens so far, and the same
    rows waiting (then their next calls run on the same inputs)."""
    running = [(r.key, r.completion_ids) for r in a.rows] == [
        (r.key, r.completion_ids) for r in b.rows
    ]
    return running and [r.key for r in a.waiting] == [r.key for r in b.waiting]


def decode_in_lockstep(policy, prompts) -> Lockstep:
    """Steps a fused batcher and a plain one (the model's forward) in turn over `prompts`,
    capturing the logits of every call: the fused step's through a wrapper, the model's through
    a forward hook. Logits are compared while both hold the same rows and tokens."""
    fast = ContinuousBatcher(policy, fused=True)
    plain = ContinuousBatcher(policy, fused=False)
    assert fast.fused is not None and plain.fused is None
    seen: dict[str, list[torch.Tensor]] = {"fast": [], "plain": []}
    step = fast.fused

    def fused_call(*args):
        logits = step(*args)
        seen["fast"].append(logits)
        return logits

    fast.fused = fused_call
    hook = policy.model.register_forward_hook(
        lambda module, args, out: seen["plain"].append(out.logits[:, -1].detach())
    )
    for key, ids in enumerate(prompts):
        fast.submit(key, ids)
        plain.submit(key, ids)
    out, aligned = Lockstep(), True
    try:
        while fast.busy or plain.busy:
            done_fast, done_plain = fast.step(), plain.step()
            out.fused.update(done_fast)
            out.plain.update(done_plain)
            aligned = aligned and len(seen["fast"]) == len(seen["plain"])
            for a, b in zip(seen["fast"], seen["plain"], strict=True) if aligned else ():
                out.max_logit_diff = max(out.max_logit_diff, (a - b).abs().max().item())
                out.compared_calls += 1
            finished = [(k, g.completion_ids) for k, g in done_fast] == [
                (k, g.completion_ids) for k, g in done_plain
            ]
            aligned = aligned and finished and _same_rows(fast, plain)
            seen["fast"].clear()
            seen["plain"].clear()
    finally:
        hook.remove()
    return out


@pytest.fixture(scope="module")
def lockstep(real_model, real_policy) -> Lockstep:
    """100 distinct questions (the arithmetic task's first problems, levels 1-3) as solve-v0
    asks them, through the model's chat template, decoded greedily for 16 tokens both ways."""
    policy = real_policy(max_new_tokens=NEW_TOKENS)
    prompts = policy.encode(solve_observations(PROMPTS))
    assert len({len(p) for p in prompts}) > 1  # rows of several lengths: left padding
    return decode_in_lockstep(policy, prompts)


def test_the_fused_step_reads_the_parameters_of_a_model_this_size(real_model):
    """SmolLM2 is a `LlamaForCausalLM` the fused step serves, too large to pack: the batcher
    decodes it with the unpacked path (`FusedDecoder.packed` is None)."""
    fused = fused_decoder(real_model.model)
    assert fused is not None
    assert fused.packed is None and fused._pack_size() > fused_decode.PACK_MAX
    assert fused.groups == 3  # grouped-query attention: 9 query heads share 3 key/value heads


def test_fused_and_plain_decoding_give_the_same_greedy_tokens(real_model, lockstep):
    """Every one of the 100 rows gets the same greedy tokens and finish reason both ways, and
    log-probabilities within `LOGPROB_TOL`. A row whose tokens part would only be allowed at a
    tie: where they part, the model's own logits for the two tokens must lie within
    `LOGIT_TOL` (rounding can then pick either); it is not expected here."""
    assert sorted(lockstep.fused) == sorted(lockstep.plain) == list(range(PROMPTS))
    parted = []
    for key, plain in lockstep.plain.items():
        fast = lockstep.fused[key]
        if fast.completion_ids == plain.completion_ids:
            assert fast.finish_reason == plain.finish_reason and fast.text == plain.text
            torch.testing.assert_close(
                torch.tensor(fast.logprobs), torch.tensor(plain.logprobs), rtol=0, atol=LOGPROB_TOL
            )
            continue
        parted.append(key)
        at = next(
            i
            for i, (a, b) in enumerate(zip(fast.completion_ids, plain.completion_ids, strict=False))
            if a != b
        )
        logits = forward_logits(real_model.model, plain.prompt_ids, plain.completion_ids[: at + 1])
        gap = (logits[at, plain.completion_ids[at]] - logits[at, fast.completion_ids[at]]).abs()
        assert gap <= LOGIT_TOL, (key, at, gap)
    assert len(parted) <= PROMPTS // 20, parted
    assert any(g.completion_ids for g in lockstep.plain.values())


def test_fused_logits_are_the_models_within_tolerance(lockstep, record_property):
    """Every prefill and decode call both batchers made on the same rows and tokens (all of
    them unless a tie parted a row): the fused logits are the model's within `LOGIT_TOL`."""
    record_property("max_logit_diff", lockstep.max_logit_diff)
    assert lockstep.max_logit_diff <= LOGIT_TOL
    assert lockstep.compared_calls >= NEW_TOKENS  # the prefill(s) and every decode step
