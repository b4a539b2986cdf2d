"""HFPolicy: batched generation, left padding, logprobs, stop strings, eos, seeds, loading."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch
from transformers import PreTrainedTokenizerFast

from agents.base import GenerationArguments
from agents.decoding import truncate_at_stop
from agents.hf import HFPolicy
from agents.tiny import build_tokenizer
from tests.agents.helpers import GREEDY, count_generate_calls, teacher_forced_logprobs


def test_batched_generation_shapes(model, tokenizer, observations, monkeypatch) -> None:
    policy = HFPolicy(model, tokenizer, GenerationArguments(max_new_tokens=12, seed=0))
    calls = count_generate_calls(model, monkeypatch)
    generations = policy.generate(observations)
    assert calls == [len(observations)]  # one generate call for the whole batch
    assert len(generations) == len(observations)
    for obs, g in zip(observations, generations, strict=True):
        assert g.prompt_ids == policy.encode([obs])[0]  # unpadded, exactly as encoded
        assert tokenizer.pad_token_id not in g.prompt_ids
        assert tokenizer.pad_token_id not in g.completion_ids
        assert 1 <= len(g.completion_ids) <= 12
        assert len(g.logprobs) == len(g.completion_ids)
        assert all(isinstance(x, float) and x <= 0 for x in g.logprobs)
        assert all(isinstance(x, int) for x in g.completion_ids)
        assert g.text == tokenizer.decode(g.completion_ids, skip_special_tokens=True)
        expected = "stop" if g.completion_ids[-1] == tokenizer.eos_token_id else "length"
        assert g.finish_reason == expected
    assert policy.act(observations[:2]) and policy.act([]) == []


def test_prompt_format(model, tokenizer, observations) -> None:
    policy = HFPolicy(model, tokenizer, GREEDY)
    text = tokenizer.decode(policy.encode(observations[:1])[0])
    assert text == (
        "<|im_start|>system\nYou are a careful math solver.<|im_end|>\n"
        "<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n"
    )
    override = HFPolicy(model, tokenizer, GREEDY, system_prompt_override="Be terse.")
    assert "Be terse." in tokenizer.decode(override.encode(observations[:1])[0])
    assert "system" not in tokenizer.decode(policy.encode(observations[2:3])[0])  # empty: none


def test_left_padding_equivalence(model, tokenizer, observations) -> None:
    policy = HFPolicy(model, tokenizer, dataclasses.replace(GREEDY, max_new_tokens=24))
    batched = policy.generate(observations)
    shortest = min(range(len(observations)), key=lambda i: len(batched[i].prompt_ids))
    alone = policy.generate([observations[shortest]])[0]
    assert alone.completion_ids == batched[shortest].completion_ids
    assert alone.logprobs == pytest.approx(batched[shortest].logprobs, abs=1e-4)
    for i, obs in enumerate(observations):
        assert policy.generate([obs])[0].completion_ids == batched[i].completion_ids


@pytest.mark.parametrize(
    "args",
    [
        GenerationArguments(max_new_tokens=20, do_sample=False),
        GenerationArguments(max_new_tokens=20, temperature=0.7, top_k=20, top_p=0.9, seed=1),
        GenerationArguments(max_new_tokens=20, temperature=1.3, seed=2),
    ],
    ids=["greedy", "t0.7-topk-topp", "t1.3"],
)
def test_logprobs_match_teacher_forcing(model, tokenizer, observations, args) -> None:
    policy = HFPolicy(model, tokenizer, args)
    for g in policy.generate(observations):
        expected = teacher_forced_logprobs(model, g.prompt_ids, g.completion_ids, args.temperature)
        torch.testing.assert_close(torch.tensor(g.logprobs), expected, atol=1e-4, rtol=1e-4)


def test_stop_strings(model, tokenizer, observations) -> None:
    free = HFPolicy(model, tokenizer, dataclasses.replace(GREEDY, max_new_tokens=32))
    reference = free.generate(observations[:1])[0]
    assert len(reference.text) > 12
    stop = reference.text[6:9]
    index = reference.text.find(stop)
    args = dataclasses.replace(GREEDY, max_new_tokens=32, stop_strings=["NEVER-SEEN", stop])
    g = HFPolicy(model, tokenizer, args).generate(observations[:1])[0]
    assert g.text == reference.text[:index]  # text cut before the stop string
    assert g.finish_reason == "stop"
    n = len(g.completion_ids)
    assert g.completion_ids == reference.completion_ids[:n]  # tokens: a prefix of the free run
    assert g.logprobs == pytest.approx(reference.logprobs[:n], abs=1e-5)
    assert stop in tokenizer.decode(g.completion_ids)  # ... up to and including the stop
    assert stop not in tokenizer.decode(g.completion_ids[:-1])


def test_eos_ends_rows_independently(model, tokenizer, observations) -> None:
    free = HFPolicy(model, tokenizer, dataclasses.replace(GREEDY, max_new_tokens=20))
    reference = free.generate(observations)
    eos = reference[0].completion_ids[3]  # make a token row 0 emits an end-of-sequence token
    model.generation_config.eos_token_id = [tokenizer.eos_token_id, eos]
    stopped = HFPolicy(model, tokenizer, free.generation_args).generate(observations)
    first = stopped[0]
    assert first.finish_reason == "stop"
    assert first.completion_ids == reference[0].completion_ids[: len(first.completion_ids)]
    assert first.completion_ids[-1] == eos  # the eos token is kept in the ids
    assert eos not in first.completion_ids[:-1]
    for ref, g in zip(reference[1:], stopped[1:], strict=True):
        if eos not in ref.completion_ids:  # rows that never meet it run to the limit unchanged
            assert g.completion_ids == ref.completion_ids and g.finish_reason == "length"


def test_seed_determinism(model, tokenizer, observations) -> None:
    args = GenerationArguments(max_new_tokens=16, seed=123)
    state = torch.get_rng_state()
    a, b = HFPolicy(model, tokenizer, args), HFPolicy(model, tokenizer, args)
    first = [g.completion_ids for g in a.generate(observations)]
    assert first == [g.completion_ids for g in b.generate(observations)]
    assert first != [g.completion_ids for g in a.generate(observations)]  # the RNG advances
    other = HFPolicy(model, tokenizer, dataclasses.replace(args, seed=124))
    assert first != [g.completion_ids for g in other.generate(observations)]
    assert torch.equal(state, torch.get_rng_state())  # the caller's RNG is untouched


def test_max_batch_size_chunks(model, tokenizer, observations, monkeypatch) -> None:
    whole = HFPolicy(model, tokenizer, GREEDY).generate(observations)
    chunked = HFPolicy(model, tokenizer, dataclasses.replace(GREEDY, max_batch_size=3))
    calls = count_generate_calls(model, monkeypatch)
    result = chunked.generate(observations)
    assert calls == [3, 1]
    assert [g.completion_ids for g in result] == [g.completion_ids for g in whole]


def test_restores_training_mode_without_grad(model, tokenizer, observations) -> None:
    model.train()
    g = HFPolicy(model, tokenizer, GREEDY).generate(observations[:1])[0]
    assert model.training
    assert g.completion_ids


def test_pad_token_falls_back_to_eos(model, observations) -> None:
    tokenizer = build_tokenizer()
    tokenizer.pad_token = None
    policy = HFPolicy(model, tokenizer, GREEDY)
    assert tokenizer.pad_token_id == tokenizer.eos_token_id
    generations = policy.generate(observations)
    assert all(1 <= g.num_tokens <= GREEDY.max_new_tokens for g in generations)


def test_errors(model, tokenizer: PreTrainedTokenizerFast) -> None:
    with pytest.raises(ValueError, match="needs a peft model"):
        HFPolicy(model, tokenizer, GREEDY, adapter_name="solver")
    policy = HFPolicy(model, tokenizer, GREEDY)
    with pytest.raises(KeyError, match="no 'prompt'"):
        policy.generate([{"instruction": "x"}])
    with pytest.raises(ValueError, match="one adapter name per prompt"):
        policy.generate_from_ids([[1, 2]], adapter_names=["a", "b"])
    bare = build_tokenizer()
    bare.chat_template = None
    with pytest.raises(ValueError, match="no chat template"):
        HFPolicy(model, bare, GREEDY)


def test_from_pretrained(model, tokenizer, observations, tmp_path: Path) -> None:
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded = HFPolicy.from_pretrained(str(tmp_path), GREEDY, system_prompt_override="Solve.")
    original = HFPolicy(model, tokenizer, GREEDY, system_prompt_override="Solve.")
    assert loaded.model is not model
    assert [g.completion_ids for g in loaded.generate(observations)] == [
        g.completion_ids for g in original.generate(observations)
    ]


@pytest.mark.parametrize(
    ("text", "stops", "expected_text", "expected_piece"),
    [
        ("The answer is 42. Then more words", ["."], "The answer is 42", "."),
        ("abc</answer>def</answer>", ["</answer>", "def"], "abc", "</answer>"),  # first wins
        ("x abcdef y", ["abcdef", "cd"], "x ab", "cd"),  # the first to be completed wins
        ("no stop here", ["STOP"], None, None),
    ],
)
def test_truncate_at_stop(tokenizer, text, stops, expected_text, expected_piece) -> None:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    cut = truncate_at_stop(text, ids, stops, tokenizer)
    if expected_text is None:
        assert cut is None
        return
    assert cut is not None
    cut_text, n = cut
    assert cut_text == expected_text
    assert tokenizer.decode(ids[:n]).startswith(expected_text + expected_piece)
    assert not any(s in tokenizer.decode(ids[: n - 1]) for s in stops)


def test_stop_string_spanning_the_prompt_does_not_stop(model, tokenizer, observations) -> None:
    free = HFPolicy(model, tokenizer, GREEDY).generate(observations[:1])[0]
    first_piece = tokenizer.decode(free.completion_ids[:1])
    assert first_piece and first_piece not in free.text[1:]
    # The generation prompt ends with "assistant\n": this stop string spans prompt and completion.
    args = dataclasses.replace(GREEDY, stop_strings=["assistant\n" + first_piece])
    g = HFPolicy(model, tokenizer, args).generate(observations[:1])[0]
    assert g.completion_ids == free.completion_ids
    assert g.finish_reason == free.finish_reason
