"""The embedded tiny model: a locally trained byte-level BPE tokenizer and a random-weight LM.

Nothing here downloads. Tests and the project's offline default use these stand-ins for a real
checkpoint; users pass a hub name or a local folder to `HFPolicy.from_pretrained` instead.

Example:
    >>> tokenizer = build_tokenizer()
    >>> model = build_tiny_model(tokenizer, arch="qwen2", seed=0)
    >>> tokenizer.save_pretrained(path); model.save_pretrained(path)  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable, Iterator

import torch
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import (
    AutoModelForCausalLM,
    LlamaConfig,
    MistralConfig,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
    Qwen2Config,
)

logger = logging.getLogger(__name__)

PAD_TOKEN = "<|pad|>"
BOS_TOKEN = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"  # ends every chat turn; the tokenizer's eos, so generation stops there
SPECIAL_TOKENS = (PAD_TOKEN, BOS_TOKEN, IM_START, IM_END)

# Qwen2's pre-tokenization (digits split one by one). transformers 5 loads any folder whose
# config.json says model_type "qwen2" with its Qwen2Tokenizer, which rebuilds the pipeline with
# NFC, this regex and a regex-free ByteLevel; using the same pipeline here keeps encodings
# identical however the saved tokenizer is loaded (TokenizersBackend or Qwen2Tokenizer).
PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
# The same with runs of up to three digits kept together (`build_tokenizer(whole_numbers=True)`).
WHOLE_NUMBERS = 200  # and numbers below this are single tokens
WHOLE_NUMBERS_REGEX = PRETOKENIZE_REGEX.replace(r"|\p{N}|", r"|\p{N}{1,3}|")
# The same with a number's leading space kept on it (`build_tokenizer(spaced_numbers=True)`): ` 7`
# is one token, as ` A` is, where the pattern above makes the space a token of its own.
SPACED_NUMBERS_REGEX = PRETOKENIZE_REGEX.replace(r"|\p{N}|", r"| ?\p{N}{1,3}|")

# ChatML-like. The assistant content and its closing IM_END sit inside {% generation %} markers so
# `apply_chat_template(..., return_assistant_tokens_mask=True)` (TRL's assistant-only loss) works.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['role'] == 'assistant' -%}"
    "{% generation %}{{- message['content'] + '<|im_end|>' -}}{% endgeneration %}"
    "{{- '\\n' -}}"
    "{%- else -%}"
    "{{- message['content'] + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)

_WORD_LIST = """
the answer is what how many much total sum difference product quotient remainder of and to
a an in on for with each per more less than twice half times plus minus divided by equals
step first then next finally so therefore because let us think solve problem question
number numbers value result compute calculate check verify correct incorrect wrong right
critic solver refiner feedback revise improve final answer agree disagree debate vote
apples books dollars cents hours minutes days weeks people students cars miles price cost
system user assistant instruction premise hypothesis entailment neutral contradiction if
then not is are was were has have had will would can could should must
"""
_WORDS = _WORD_LIST.split()
_SNIPPETS = (
    "Let's think step by step.",
    "The final answer is \\boxed{",
    "Put your final answer in \\boxed{}.",
    "You are a careful math solver.",
    "You are a critic. Point out any mistake in the solution.",
    "Rewrite the solution, fixing the mistakes the critic found.",
    "\\frac{1}{2} \\sqrt{2} x^2 + y^2 = z^2 \\pi \\cdot \\times \\le \\ge",
    "#### 42",
)


def builtin_corpus(num_lines: int = 400, seed: int = 0) -> Iterator[str]:
    """Yields a small, deterministic corpus of math-flavoured English and arithmetic.

    Args:
        num_lines (`int`, defaults to `400`): Number of generated lines (snippets come on top).
        seed (`int`, defaults to `0`): Seed of the local RNG; the corpus depends only on it.

    Returns:
        An iterator of text lines.
    """
    rng = random.Random(seed)
    yield from _SNIPPETS
    yield " ".join(_WORDS)
    yield "0 1 2 3 4 5 6 7 8 9 10 100 1000 + - * / = ( ) [ ] { } < > . , ; : ? ! % $ ^ _"
    for _ in range(num_lines):
        a, b = rng.randint(0, 999), rng.randint(1, 99)
        op = rng.choice("+-*/")
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 9)))
        yield f"What is {a} {op} {b}? {words.capitalize()}. The answer is \\boxed{{{a + b}}}."


def build_tokenizer(
    corpus: Iterable[str] | None = None,
    vocab_size: int = 1024,
    model_max_length: int = 4096,
    whole_numbers: bool = False,
    spaced_numbers: bool = False,
    single_tokens: tuple[str, ...] = (),
) -> PreTrainedTokenizerFast:
    """Trains a byte-level BPE tokenizer and wraps it for transformers.

    Byte-level means every string, odd unicode included, encodes and decodes back to itself up
    to NFC normalization (as Qwen2's tokenizer does). The pipeline is Qwen2's, so a folder saved
    with a qwen2 model loads back with identical encodings. The built-in corpus is always added,
    so the tokenizer works with no corpus at all. Training is deterministic: the same corpus and
    size give the same vocabulary.

    Args:
        corpus (`Iterable[str]` or `None`, defaults to `None`): Extra training text.
        vocab_size (`int`, defaults to `1024`): Target vocabulary size, special tokens included;
            a small corpus may stop short of it.
        model_max_length (`int`, defaults to `4096`): Recorded on the tokenizer.
        whole_numbers (`bool`, defaults to `False`): Pre-tokenize runs of up to three digits as
            one piece instead of Qwen2's digit by digit, and make every number below
            `WHOLE_NUMBERS` a single token (the training text gets each of them often enough
            for BPE to merge it).
            transformers 5 rebuilds the pipeline of a folder whose model_type is "qwen2" or
            "llama" with digits split; pair it with `build_tiny_model(arch="mistral")`, whose
            folders load the saved pipeline as is.
        spaced_numbers (`bool`, defaults to `False`): With `whole_numbers`, a number keeps the
            space before it (` 17` is one token, and so is `17`), as a word does: a list of
            vertex numbers reads one token per number, not two.
        single_tokens (`tuple[str, ...]`, defaults to `()`): Strings that must each be one token
            (` A`, ` B`, ` C`: every colour alike); the training text gets each often enough.

    Returns:
        A `PreTrainedTokenizerFast` with pad (`<|pad|>`), bos (`<|endoftext|>`), eos (`<|im_end|>`),
        a ChatML-like chat template with `{% generation %}` markers, and left padding.

    Raises:
        ValueError: If `vocab_size` cannot hold the 256 byte symbols and the special tokens (and
            the numbers and `single_tokens` asked for), or `spaced_numbers` comes without
            `whole_numbers`.
    """
    if spaced_numbers and not whole_numbers:
        raise ValueError("spaced_numbers=True needs whole_numbers=True (it spaces whole numbers)")
    _check_vocab_size(vocab_size, whole_numbers)
    lines = _training_lines(corpus, whole_numbers, spaced_numbers, single_tokens)
    tokenizer = _train_bpe(lines, vocab_size, whole_numbers, spaced_numbers)
    if whole_numbers:
        spellings = ("{}", " {}") if spaced_numbers else ("{}",)
        wanted = [form.format(n) for n in range(WHOLE_NUMBERS) for form in spellings]
        _check_single_tokens(tokenizer, vocab_size, wanted, f"numbers below {WHOLE_NUMBERS}")
    if single_tokens:
        _check_single_tokens(tokenizer, vocab_size, list(single_tokens), "single_tokens")
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token=PAD_TOKEN,
        bos_token=BOS_TOKEN,
        eos_token=IM_END,
        additional_special_tokens=[IM_START],
        model_max_length=model_max_length,
        padding_side="left",
        chat_template=CHAT_TEMPLATE,
    )
    logger.debug("built tiny tokenizer with %d tokens", len(wrapped))
    return wrapped


def _check_vocab_size(vocab_size: int, whole_numbers: bool) -> None:
    """Raises unless `vocab_size` holds the 256 byte symbols, the special tokens and, with
    `whole_numbers`, every number below `WHOLE_NUMBERS` beyond the ten digits."""
    minimum = 256 + len(SPECIAL_TOKENS) + (WHOLE_NUMBERS - 10 if whole_numbers else 0)
    if vocab_size < minimum:
        numbers = f" + {WHOLE_NUMBERS - 10} numbers" if whole_numbers else ""
        raise ValueError(
            f"vocab_size={vocab_size} is too small: a byte-level BPE needs at least {minimum} "
            f"entries (256 bytes + {len(SPECIAL_TOKENS)} special tokens{numbers}); "
            f"pass vocab_size>={minimum}."
        )


def _training_lines(
    corpus: Iterable[str] | None,
    whole_numbers: bool,
    spaced_numbers: bool = False,
    single_tokens: tuple[str, ...] = (),
) -> list[str]:
    """The BPE's training text: the built-in corpus, `corpus`, and with `whole_numbers` a line
    of every number below `WHOLE_NUMBERS` (with `spaced_numbers` also one of them unspaced: a
    number a line), and a line of the `single_tokens`, repeated often enough for BPE to merge
    each."""
    lines = list(builtin_corpus())
    if corpus is not None:
        lines.extend(corpus)
    repeats = max(1000, len(lines))
    if whole_numbers:
        numbers = " ".join(map(str, range(WHOLE_NUMBERS)))
        lines.extend([f" {numbers}" if spaced_numbers else numbers] * repeats)
    if spaced_numbers:
        lines.extend([str(n) for n in range(WHOLE_NUMBERS)] * (repeats // 10))
    if single_tokens:
        lines.extend(["".join(single_tokens)] * repeats)
    return lines


def _train_bpe(
    lines: list[str], vocab_size: int, whole_numbers: bool, spaced_numbers: bool = False
) -> Tokenizer:
    """A byte-level BPE with Qwen2's pipeline (NFC, the pre-tokenizing regex, a regex-free
    ByteLevel; runs of up to three digits kept together with `whole_numbers`, with their
    leading space with `spaced_numbers`) trained on `lines`."""
    pattern = WHOLE_NUMBERS_REGEX if whole_numbers else PRETOKENIZE_REGEX
    if spaced_numbers:
        pattern = SPACED_NUMBERS_REGEX
    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(lines, trainer=trainer)
    return tokenizer


def _check_single_tokens(
    tokenizer: Tokenizer, vocab_size: int, wanted: list[str], what: str
) -> None:
    """Raises when a string of `wanted` is not a single token of `tokenizer`."""
    split = [text for text in wanted if len(tokenizer.encode(text).ids) != 1]
    if split:
        raise ValueError(
            f"vocab_size={vocab_size} leaves {len(split)} of the {what} split (e.g. "
            f"{split[0]!r}); pass a larger vocab_size."
        )


def build_tiny_model(
    tokenizer: PreTrainedTokenizerBase,
    arch: str = "qwen2",
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int | None = None,
    max_position_embeddings: int = 4096,
    initializer_range: float = 0.2,
    seed: int = 0,
    tie_embeddings: bool = True,
) -> PreTrainedModel:
    """Builds a small causal LM with random weights from a config (no download).

    Args:
        tokenizer (`PreTrainedTokenizerBase`): Sets the vocabulary size and special token ids.
        arch (`str`, defaults to `"qwen2"`): `"qwen2"`, `"llama"` or `"mistral"`.
        hidden_size (`int`, defaults to `64`): Model width; a multiple of `num_heads`.
        num_layers (`int`, defaults to `2`): Number of decoder layers.
        num_heads (`int`, defaults to `4`): Attention heads.
        num_kv_heads (`int`, defaults to `2`): Key/value heads (grouped-query attention).
        intermediate_size (`int` or `None`, defaults to `None`): MLP width; `2 * hidden_size`
            when `None`.
        max_position_embeddings (`int`, defaults to `4096`): Longest sequence.
        initializer_range (`float`, defaults to `0.2`): Std of the random init. Larger than a real
            model's 0.02 so the untrained model's next-token distribution is peaked and varied
            rather than near uniform, which makes greedy-decoding tests meaningful.
        seed (`int`, defaults to `0`): The weights depend only on the seed and the arguments.
        tie_embeddings (`bool`, defaults to `True`): The output layer shares the input
            embeddings' weights; `False` gives it its own.

    Returns:
        The model in eval mode, float32, with tied input/output embeddings unless
        `tie_embeddings` is False.

    Raises:
        ValueError: On an unknown `arch` or inconsistent head counts.
    """
    config_classes = {"qwen2": Qwen2Config, "llama": LlamaConfig, "mistral": MistralConfig}
    if arch not in config_classes:
        raise ValueError(f"arch={arch!r} is not supported; pass one of {sorted(config_classes)}.")
    if hidden_size % num_heads or num_heads % num_kv_heads:
        raise ValueError(
            f"hidden_size={hidden_size}, num_heads={num_heads}, num_kv_heads={num_kv_heads}: "
            "hidden_size must be divisible by num_heads and num_heads by num_kv_heads."
        )
    config = config_classes[arch](
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or 2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        max_position_embeddings=max_position_embeddings,
        initializer_range=initializer_range,
        tie_word_embeddings=tie_embeddings,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    model.eval()
    return model


def number_embeddings(model: torch.nn.Module, tokenizer: object, features: int) -> None:
    """Overwrite the first ``2 * features`` dims of each single-token number's embedding with
    cos/sin of the number at periods from 2 to 400, scaled like the random init."""
    import math

    import torch

    weight = model.get_input_embeddings().weight
    if 2 * features > weight.shape[1]:
        raise ValueError(
            f"number_features={features} needs {2 * features} of the {weight.shape[1]} dims"
        )
    periods = torch.logspace(math.log10(2), math.log10(400), features, dtype=torch.float64)
    scale = weight.std().item() * math.sqrt(2.0)  # keeps each dim's spread as initialised
    with torch.no_grad():
        for n in range(WHOLE_NUMBERS):
            ids = tokenizer.encode(str(n), add_special_tokens=False)
            if len(ids) != 1:
                continue
            angle = 2 * math.pi * n / periods
            weight[ids[0], : 2 * features] = (
                torch.cat([angle.cos(), angle.sin()]).to(weight.dtype) * scale
            )
