"""`HFPolicy`: a transformers causal LM as a batched, token-exact policy.

One `generate()` call formats every observation with the tokenizer's chat template, left-pads the
batch and runs one `model.generate` (per `max_batch_size` chunk). It returns `Generation` records
holding the prompt and completion token ids and one log-probability per completion token, so a
trainer never re-tokenizes text.

Log-probabilities are `log_softmax(logits / temperature)` at the sampled token, computed from the
model's raw logits before top-k / top-p filtering: the distribution TRL's trainers compute for
the policy ratio. The filtered distribution actually sampled from differs when top-k / top-p are
on (a truncated token has probability 0 there); TRL makes the same choice.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    GenerationConfig,
    LogitsProcessorList,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    StoppingCriteriaList,
    StopStringCriteria,
)

from agents.base import Generation, GenerationArguments, Observation
from agents.decoding import (
    CompletionStopCriteria,
    LogprobRecorder,
    completion_lengths,
    eos_token_ids,
    eval_mode,
    left_pad,
    sampling_processors,
    seeded,
    truncate_at_stop,
)
from agents.models import resolve_model_name
from agents.prompts import build_messages

logger = logging.getLogger(__name__)

BASE_ADAPTER = "__base__"  # peft's per-row name for "no adapter"


def is_peft_model(model: Any) -> bool:
    """Whether `model` is a peft `PeftModel` (which takes per-row `adapter_names`).

    transformers models with adapters loaded through `load_adapter` also carry `peft_config`
    but not `get_base_model`, and their `generate` does not accept `adapter_names`.
    """
    return isinstance(getattr(model, "peft_config", None), Mapping) and hasattr(
        model, "get_base_model"
    )


class HFPolicy:
    """A transformers causal LM as a batched policy.

    Args:
        model (`PreTrainedModel`): A causal LM, or a peft model (several named adapters allowed).
        tokenizer (`PreTrainedTokenizerBase`): Its tokenizer, with a chat template. A missing pad
            token falls back to eos.
        generation_args (`GenerationArguments` or `None`, defaults to `None`): Decoding settings;
            `GenerationArguments()` when `None`.
        system_prompt_override (`str` or `None`, defaults to `None`): Replaces every observation's
            `"instruction"` as the system message.
        adapter_name (`str` or `None`, defaults to `None`): For a peft model, the adapter this
            policy generates with (`"__base__"` means the base model); `None` uses the active one.

    Example:
        >>> policy = HFPolicy(model, tokenizer, GenerationArguments(max_new_tokens=32))
        >>> policy.act([{"instruction": "Solve.", "prompt": "What is 2 + 3?"}])  # doctest: +SKIP
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        generation_args: GenerationArguments | None = None,
        system_prompt_override: str | None = None,
        adapter_name: str | None = None,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.generation_args = generation_args or GenerationArguments()
        self.system_prompt_override = system_prompt_override
        self.adapter_name = adapter_name
        if adapter_name is not None:
            _check_adapter(model, adapter_name)
        if getattr(tokenizer, "chat_template", None) is None:
            raise ValueError(
                f"{type(tokenizer).__name__} has no chat template; set tokenizer.chat_template "
                "(e.g. agents.tiny.CHAT_TEMPLATE) or load an instruct model's tokenizer."
            )
        if tokenizer.pad_token_id is None:
            if tokenizer.eos_token is None:
                raise ValueError("the tokenizer has neither a pad nor an eos token; set one.")
            logger.info("tokenizer has no pad token; using eos %r", tokenizer.eos_token)
            tokenizer.pad_token = tokenizer.eos_token
        self.eos_ids = eos_token_ids(model, tokenizer)
        seed = self.generation_args.seed
        self._rng = random.Random(seed) if seed is not None else None
        self._stop_criteria: StopStringCriteria | None = None

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str,
        generation_args: GenerationArguments | None = None,
        *,
        adapter_path: str | None = None,
        model_kwargs: Mapping[str, Any] | None = None,
        tokenizer_kwargs: Mapping[str, Any] | None = None,
        **policy_kwargs: Any,
    ) -> HFPolicy:
        """Loads a model and its tokenizer from the hub or a local folder.

        Args:
            name_or_path (`str`): Hub id, local folder (from `save_pretrained`), or the name of a
                fetched catalog model (`agents.models`, ``mathteams models get NAME``).
            generation_args (`GenerationArguments` or `None`, defaults to `None`): Decoding settings.
            adapter_path (`str` or `None`, defaults to `None`): A saved peft adapter to load on top;
                it is named `policy_kwargs["adapter_name"]` or `"default"`.
            model_kwargs (`Mapping` or `None`, defaults to `None`): For
                `AutoModelForCausalLM.from_pretrained` (default `dtype="auto"`).
            tokenizer_kwargs (`Mapping` or `None`, defaults to `None`): For
                `AutoTokenizer.from_pretrained`.
            **policy_kwargs: `system_prompt_override`, `adapter_name`.

        Returns:
            The policy.
        """
        name_or_path = resolve_model_name(name_or_path)
        tokenizer = AutoTokenizer.from_pretrained(name_or_path, **dict(tokenizer_kwargs or {}))
        tokenizer.padding_side = "left"
        model = AutoModelForCausalLM.from_pretrained(
            name_or_path, **{"dtype": "auto", **dict(model_kwargs or {})}
        )
        if adapter_path is not None:
            from peft import PeftModel  # optional dependency, needed only here

            name = policy_kwargs.get("adapter_name") or "default"
            model = PeftModel.from_pretrained(model, adapter_path, adapter_name=name)
        return cls(model, tokenizer, generation_args, **policy_kwargs)

    def act(self, observations: Sequence[Observation]) -> list[str]:
        """Returns one completion text per observation."""
        return [g.text for g in self.generate(observations)]

    def generate(self, observations: Sequence[Observation]) -> list[Generation]:
        """Generates one completion per observation, with token ids and logprobs."""
        names = None if self.adapter_name is None else [self.adapter_name] * len(observations)
        return self.generate_from_ids(self.encode(observations), adapter_names=names)

    def encode(self, observations: Sequence[Observation]) -> list[list[int]]:
        """Formats observations with the chat template and tokenizes them (no padding)."""
        if not observations:
            return []
        conversations = [build_messages(o, self.system_prompt_override) for o in observations]
        texts = self.tokenizer.apply_chat_template(
            conversations, add_generation_prompt=True, tokenize=False
        )
        # The template already wrote any bos text, so the tokenizer must not add another.
        return self.tokenizer(list(texts), add_special_tokens=False)["input_ids"]

    def generate_from_ids(
        self,
        prompt_ids: Sequence[Sequence[int]],
        adapter_names: Sequence[str | None] | None = None,
    ) -> list[Generation]:
        """Generates from already tokenized prompts; the entry point for mixed-role batches.

        Args:
            prompt_ids (`Sequence[Sequence[int]]`): One token list per row, unpadded.
            adapter_names (`Sequence[str | None]` or `None`, defaults to `None`): For a peft model,
                the adapter of each row (`None` entries use the active adapter); rows with
                different adapters share one `model.generate` call.

        Returns:
            One `Generation` per row, in order.
        """
        if adapter_names is not None and len(adapter_names) != len(prompt_ids):
            raise ValueError(
                f"got {len(prompt_ids)} prompts but {len(adapter_names)} adapter names; "
                "pass one adapter name per prompt."
            )
        if not prompt_ids:
            return []
        if any(len(p) == 0 for p in prompt_ids):
            raise ValueError("an empty prompt cannot be generated from; every row needs a token.")
        size = self.generation_args.max_batch_size or len(prompt_ids)
        # Chunks of similar length waste less padding; results are scattered back to input order.
        order = sorted(range(len(prompt_ids)), key=lambda i: -len(prompt_ids[i]))
        if size >= len(prompt_ids):
            order = list(range(len(prompt_ids)))
        results: list[Generation | None] = [None] * len(prompt_ids)
        for start in range(0, len(order), size):
            chunk = order[start : start + size]
            names = None if adapter_names is None else [adapter_names[i] for i in chunk]
            outputs = self._generate_chunk([list(prompt_ids[i]) for i in chunk], names)
            for i, generation in zip(chunk, outputs, strict=True):
                results[i] = generation
        return [g for g in results if g is not None]

    def _generate_chunk(
        self, prompt_ids: list[list[int]], adapter_names: list[str | None] | None
    ) -> list[Generation]:
        args = self.generation_args
        device = self.model.device
        input_ids, attention_mask = left_pad(prompt_ids, self.tokenizer.pad_token_id, device)
        recorder = LogprobRecorder(args.temperature)
        extra: dict[str, Any] = {}
        if adapter_names is not None and is_peft_model(self.model):
            active = _active_adapter(self.model)
            extra["adapter_names"] = [name or active for name in adapter_names]
        seed = self.next_seed()
        with eval_mode(self.model), seeded(seed, device):
            out = self.model.generate(
                input_ids=input_ids,
                attention_mask=attention_mask,
                generation_config=self._generation_config(),
                logits_processor=self._processors(recorder),
                stopping_criteria=self._stopping_criteria(input_ids.shape[1]),
                **extra,
            )
        completions = out.sequences[:, input_ids.shape[1] :].cpu()
        logprobs = recorder.finish(out.sequences[:, -1])
        return self.build_generations(prompt_ids, completions, logprobs)

    def next_seed(self) -> int | None:
        """The seed of the next generation call, drawn from `GenerationArguments.seed`'s stream;
        `None` when no seed was set."""
        return self._rng.randrange(2**63) if self._rng is not None else None

    def _generation_config(self) -> GenerationConfig:
        # Every processor-relevant field is set explicitly: generate() fills fields left at None
        # from model.generation_config (e.g. a checkpoint's repetition_penalty or top_k=50), which
        # would change the logits the recorder sees and the distribution sampled from.
        args = self.generation_args
        return GenerationConfig(
            max_new_tokens=args.max_new_tokens,
            do_sample=args.do_sample,
            temperature=1.0,
            # Warpers run from our own processor list; 0 keeps generate() from adding top_k=50.
            # Greedy leaves it unset (unused there), as a set top_k warns under greedy.
            top_k=0 if args.do_sample else None,
            top_p=1.0,
            typical_p=1.0,
            repetition_penalty=1.0,
            no_repeat_ngram_size=0,
            min_length=0,
            num_beams=1,
            num_return_sequences=1,
            pad_token_id=self.tokenizer.pad_token_id,
            eos_token_id=self.eos_ids,
            return_dict_in_generate=True,
            use_cache=True,
        )

    def _processors(self, recorder: LogprobRecorder) -> LogitsProcessorList:
        return LogitsProcessorList([recorder, *sampling_processors(self.generation_args)])

    def _stopping_criteria(self, prompt_width: int) -> StoppingCriteriaList:
        if not self.generation_args.stop_strings:
            return StoppingCriteriaList()
        if self._stop_criteria is None:  # preprocesses the vocabulary once
            self._stop_criteria = StopStringCriteria(
                tokenizer=self.tokenizer, stop_strings=self.generation_args.stop_strings
            )
        return StoppingCriteriaList([CompletionStopCriteria(self._stop_criteria, prompt_width)])

    def build_generations(
        self, prompt_ids: list[list[int]], completions: torch.Tensor, logprobs: torch.Tensor
    ) -> list[Generation]:
        """Turns padded `(rows, steps)` completion ids and logprobs into `Generation` records.

        Cuts each row after its first eos (kept) or its trailing padding, then at its first stop
        string, decodes the texts in one batch call and sets the finish reasons.
        """
        lengths, has_eos = completion_lengths(
            completions, self.eos_ids, self.tokenizer.pad_token_id
        )
        max_new = self.generation_args.max_new_tokens
        ids = [row[:n] for row, n in zip(completions.tolist(), lengths.tolist(), strict=True)]
        lps = [row[:n] for row, n in zip(logprobs.tolist(), lengths.tolist(), strict=True)]
        texts = self.tokenizer.batch_decode(ids, skip_special_tokens=True)
        stopped = [
            bool(e) or n < max_new for e, n in zip(has_eos.tolist(), lengths.tolist(), strict=True)
        ]
        generations = []
        for i, text in enumerate(texts):
            cut = truncate_at_stop(text, ids[i], self.generation_args.stop_strings, self.tokenizer)
            if cut is not None:
                text, n = cut
                ids[i], lps[i], stopped[i] = ids[i][:n], lps[i][:n], True
            generations.append(
                Generation(
                    text=text,
                    prompt_ids=prompt_ids[i],
                    completion_ids=ids[i],
                    logprobs=lps[i],
                    finish_reason="stop" if stopped[i] else "length",
                )
            )
        return generations


def _active_adapter(model: Any) -> str:
    active = model.active_adapter
    return active if isinstance(active, str) else active[0]


def _check_adapter(model: Any, adapter_name: str) -> None:
    if not is_peft_model(model):
        raise ValueError(
            f"adapter_name={adapter_name!r} needs a peft model, got {type(model).__name__}; wrap it "
            "with peft.get_peft_model or leave adapter_name=None."
        )
    if adapter_name != BASE_ADAPTER and adapter_name not in model.peft_config:
        raise ValueError(
            f"adapter_name={adapter_name!r} is not loaded; the model has "
            f"{sorted(model.peft_config)} (or {BASE_ADAPTER!r} for the base model)."
        )
