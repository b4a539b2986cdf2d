"""The embedded tiny tokenizer and model: round trips, chat template, determinism, speed."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast

from agents.base import GenerationArguments
from agents.hf import HFPolicy
from agents.tiny import IM_END, PAD_TOKEN, WHOLE_NUMBERS, build_tiny_model, build_tokenizer

MESSAGES = [
    {"role": "system", "content": "You solve."},
    {"role": "user", "content": "What is 2 + 3?"},
]


@pytest.mark.parametrize(
    "text",
    [
        "What is 12 + 7? The answer is \\boxed{19}.",
        "",  # empty
        "  leading and trailing spaces \n\t",
        "é ü \u0301 ß 中文 ∑∫√ 😀 🧮 \u200b\u202e\ufeff",  # odd unicode, bidi, zero width
        "no such words zyxwv qqq",  # outside the training corpus
    ],
)
def test_tokenizer_round_trip(tokenizer: PreTrainedTokenizerFast, text: str) -> None:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tokenizer.decode(ids) == text


def test_tokenizer_normalizes_to_nfc(tokenizer: PreTrainedTokenizerFast) -> None:
    ids = tokenizer("cafe\u0301", add_special_tokens=False)["input_ids"]  # decomposed é
    assert tokenizer.decode(ids) == "caf\u00e9"


def test_tokenizer_special_tokens(tokenizer: PreTrainedTokenizerFast) -> None:
    assert tokenizer.pad_token == PAD_TOKEN
    assert tokenizer.eos_token == IM_END
    assert tokenizer.pad_token_id != tokenizer.eos_token_id
    assert tokenizer.padding_side == "left"
    assert 300 < len(tokenizer) <= 1024  # the built-in corpus stops short of the target


def test_tokenizer_is_deterministic_and_uses_corpus() -> None:
    assert build_tokenizer().get_vocab() == build_tokenizer().get_vocab()
    corpus = ["zyxwvut zyxwvut zyxwvut"] * 50
    custom = build_tokenizer(corpus)
    # A word repeated in the corpus becomes one token.
    assert len(custom("zyxwvut", add_special_tokens=False)["input_ids"]) == 1
    assert len(build_tokenizer()("zyxwvut", add_special_tokens=False)["input_ids"]) > 1


def test_tokenizer_rejects_tiny_vocab() -> None:
    with pytest.raises(ValueError, match="vocab_size>=260"):
        build_tokenizer(vocab_size=100)


def test_chat_template(tokenizer: PreTrainedTokenizerFast) -> None:
    text = tokenizer.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=False)
    assert text == (
        "<|im_start|>system\nYou solve.<|im_end|>\n"
        "<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n"
    )
    no_prompt = tokenizer.apply_chat_template(MESSAGES, tokenize=False)
    assert not no_prompt.endswith("assistant\n")


def test_chat_template_assistant_mask(tokenizer: PreTrainedTokenizerFast) -> None:
    conversation = [*MESSAGES, {"role": "assistant", "content": "It is \\boxed{5}."}]
    out = tokenizer.apply_chat_template(
        conversation, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    ids, mask = out["input_ids"], out["assistant_masks"]
    masked = [i for i, m in zip(ids, mask, strict=True) if m]
    # Exactly the assistant content and its closing eos are trained on.
    assert tokenizer.decode(masked) == "It is \\boxed{5}." + IM_END
    assert masked[-1] == tokenizer.eos_token_id


def test_save_and_load(tokenizer: PreTrainedTokenizerFast, tmp_path: Path) -> None:
    model = build_tiny_model(tokenizer, seed=3)
    tokenizer.save_pretrained(tmp_path)
    model.save_pretrained(tmp_path)
    loaded_tok = AutoTokenizer.from_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert loaded_tok.get_vocab() == tokenizer.get_vocab()
    assert loaded_tok.chat_template == tokenizer.chat_template
    assert loaded_tok.pad_token == PAD_TOKEN
    assert loaded_tok.eos_token == IM_END
    ids = torch.tensor([tokenizer("What is 2 + 3?")["input_ids"]])
    with torch.no_grad():
        torch.testing.assert_close(loaded(ids).logits, model(ids).logits)


@pytest.mark.parametrize("arch", ["qwen2", "llama", "mistral"])
def test_auto_tokenizer_beside_model_config_encodes_the_same(
    tokenizer: PreTrainedTokenizerFast, tmp_path: Path, arch: str
) -> None:
    # transformers 5 picks a tokenizer class from config.json's model_type (Qwen2Tokenizer for
    # qwen2), which rebuilds the pre-tokenizer; encodings must not change.
    build_tiny_model(tokenizer, arch=arch).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    conversation = [*MESSAGES, {"role": "assistant", "content": "12 + 7 = 19 é😀 \\boxed{19}"}]
    text = tokenizer.apply_chat_template(conversation, tokenize=False)
    assert loaded(text)["input_ids"] == tokenizer(text)["input_ids"]
    assert loaded.apply_chat_template(conversation, tokenize=False) == text
    assert (loaded.pad_token, loaded.eos_token) == (PAD_TOKEN, IM_END)


def test_whole_numbers_are_single_tokens_and_survive_reloading(tmp_path: Path) -> None:
    tokenizer = build_tokenizer(["Check 17: 17 + 2 = 19?"], vocab_size=512, whole_numbers=True)
    assert all(len(tokenizer.tokenize(str(n))) == 1 for n in range(WHOLE_NUMBERS))
    assert tokenizer.tokenize("1234") == ["123", "4"]  # longer runs split in threes
    assert tokenizer.decode(tokenizer("x - 153 = -7")["input_ids"]) == "x - 153 = -7"
    build_tiny_model(tokenizer, arch="mistral").save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    text = "Check 17: 17 + 2 + 6 = 21? 17 + 2 + 6 = 19 + 6 = 25."
    assert loaded(text)["input_ids"] == tokenizer(text)["input_ids"]
    assert len(tokenizer("x + 150")["input_ids"]) < len(build_tokenizer()("x + 150")["input_ids"])


def test_whole_numbers_need_room_in_the_vocabulary() -> None:
    with pytest.raises(ValueError, match=r"vocab_size=300 is too small.*numbers"):
        build_tokenizer(vocab_size=300, whole_numbers=True)


def test_model_deterministic_per_seed(tokenizer: PreTrainedTokenizerFast) -> None:
    a, b, c = (build_tiny_model(tokenizer, seed=s) for s in (0, 0, 1))
    for (name, p), q in zip(a.named_parameters(), b.parameters(), strict=True):
        assert torch.equal(p, q), name
    assert not all(torch.equal(p, r) for p, r in zip(a.parameters(), c.parameters(), strict=True))


def test_model_leaves_global_rng_alone(tokenizer: PreTrainedTokenizerFast) -> None:
    state = torch.get_rng_state()
    build_tiny_model(tokenizer, seed=5)
    assert torch.equal(state, torch.get_rng_state())


@pytest.mark.parametrize("arch", ["qwen2", "llama", "mistral"])
def test_model_archs(tokenizer: PreTrainedTokenizerFast, arch: str) -> None:
    model = build_tiny_model(tokenizer, arch=arch)
    assert model.config.model_type == arch
    assert model.config.vocab_size == len(tokenizer)
    assert model.config.tie_word_embeddings
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight
    assert sum(p.numel() for p in model.parameters()) < 500_000
    assert not model.training


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"arch": "gpt2"}, "arch='gpt2'"), ({"hidden_size": 66}, "divisible")],
)
def test_model_rejects_bad_arguments(
    tokenizer: PreTrainedTokenizerFast, kwargs: dict, match: str
) -> None:
    with pytest.raises(ValueError, match=match):
        build_tiny_model(tokenizer, **kwargs)


def time_batch_of_32(tokenizer: PreTrainedTokenizerFast) -> float:
    """Seconds to sample 64 tokens for 32 prompts with the default tiny model."""
    model = build_tiny_model(tokenizer)
    policy = HFPolicy(model, tokenizer, GenerationArguments(max_new_tokens=64, seed=0))
    observations = [
        {"instruction": "Solve.", "prompt": f"What is {i} * {i + 1}?"} for i in range(32)
    ]
    policy.generate(observations[:2])  # warm up
    start = time.perf_counter()
    generations = policy.generate(observations)
    elapsed = time.perf_counter() - start
    assert len(generations) == 32
    return elapsed


def test_batch_of_32_generates_64_tokens(tokenizer: PreTrainedTokenizerFast, report_time) -> None:
    # About 0.3 s on 2 idle cores; reported at the end of the run, not asserted (a busy machine
    # takes far longer). The `slow` test below asserts a bound.
    report_time("tiny model: batch of 32 x 64 tokens", time_batch_of_32(tokenizer), 2.0)


@pytest.mark.slow
def test_batch_of_32_generates_64_tokens_fast(tokenizer: PreTrainedTokenizerFast) -> None:
    best = min(time_batch_of_32(tokenizer) for _ in range(3))
    assert best < 2.0, f"batch-32 x 64-token generate took {best:.2f}s at best"


@pytest.mark.slow
def test_trl_assistant_only_loss_uses_generation_markers(tokenizer, tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    trl = pytest.importorskip("trl")
    rows = [
        {"messages": [*MESSAGES, {"role": "assistant", "content": f"\\boxed{{{i}}}"}]}
        for i in range(4)
    ]
    config = trl.SFTConfig(
        output_dir=str(tmp_path),
        max_steps=1,
        per_device_train_batch_size=2,
        report_to=[],
        assistant_only_loss=True,
        use_cpu=True,
        save_strategy="no",
    )
    trainer = trl.SFTTrainer(
        model=build_tiny_model(tokenizer),
        args=config,
        processing_class=tokenizer,
        train_dataset=datasets.Dataset.from_list(rows),
    )
    batch = next(iter(trainer.get_train_dataloader()))
    labels, ids = batch["labels"][0], batch["input_ids"][0]
    assert tokenizer.decode(ids[labels != -100]).endswith("}" + IM_END)
    assert "user" not in tokenizer.decode(ids[labels != -100])


def test_spaced_numbers_keep_their_space_and_colours_are_one_token_each(tmp_path: Path) -> None:
    edges = "Colour vertices 0-9 with A B C. 0 is A and 1 is B. Edges: 0 1, 0 12, 3 9."
    tokenizer = build_tokenizer(
        [edges], vocab_size=1024, whole_numbers=True, spaced_numbers=True,
        single_tokens=(" A", " B", " C"),
    )  # fmt: skip
    for n in range(WHOLE_NUMBERS):
        assert len(tokenizer.tokenize(f" {n}")) == 1 and len(tokenizer.tokenize(str(n))) == 1
    assert [len(tokenizer.tokenize(c)) for c in (" A", " B", " C")] == [1, 1, 1]
    assert tokenizer.tokenize(" 0 12,") == ["Ġ0", "Ġ12", ","]  # an edge: three tokens
    plain = build_tokenizer([edges], vocab_size=1024, whole_numbers=True)
    assert len(tokenizer(edges)["input_ids"]) < len(plain(edges)["input_ids"])
    build_tiny_model(tokenizer, arch="mistral").save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert loaded(edges)["input_ids"] == tokenizer(edges)["input_ids"]
    assert loaded.decode(loaded(edges)["input_ids"]) == edges


def test_spaced_numbers_need_whole_numbers_and_single_tokens_need_room() -> None:
    with pytest.raises(ValueError, match=r"spaced_numbers=True needs whole_numbers=True"):
        build_tokenizer(vocab_size=512, spaced_numbers=True)
    with pytest.raises(ValueError, match=r"leaves \d+ of the single_tokens split"):
        build_tokenizer(vocab_size=300, single_tokens=(" Alpha Beta Gamma Delta",))
