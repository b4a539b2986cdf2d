"""`HiddenStateEnsemble`: K instruction variants decoded as one agent through averaged states.

The original multi-agent GRPO design: K agents read the same problem under different
instructions. At every decoding step each agent's last-layer hidden state (after the final norm,
before `lm_head`) is averaged, plainly or with weights, and decoded once through `lm_head`; every
agent appends the chosen token. Each variant keeps its own KV cache, batched as rows of one
`DynamicCache` (problems x K rows, left-padded), so a step is one forward over all rows.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import DynamicCache, PreTrainedModel, PreTrainedTokenizerBase, StopStringCriteria

from agents.base import Generation, GenerationArguments, Observation
from agents.decoding import eval_mode, left_pad, sampling_processors, seeded
from agents.hf import HFPolicy
from agents.prompts import expand_instructions

MODES = ("mean", "weighted")


@dataclass(frozen=True)
class EnsembleGeneration(Generation):
    """A `Generation` shared by K instruction variants.

    `prompt_ids` is variant 0's prompt; `variant_prompt_ids[k]` is variant k's. The completion and
    its logprobs (of the combined distribution) are the same for every variant.
    """

    variant_prompt_ids: tuple[list[int], ...] = ()

    def variants(self) -> list[Generation]:
        """One plain `Generation` per variant (its own prompt, the shared completion)."""
        return [
            Generation(self.text, list(p), self.completion_ids, self.logprobs, self.finish_reason)
            for p in self.variant_prompt_ids
        ]


class HiddenStateEnsemble:
    """Decodes K instruction variants of each observation as one sequence.

    Args:
        model (`PreTrainedModel`): A decoder-only causal LM whose `get_decoder()` output is the
            normed last hidden state (Llama, Qwen2, Mistral and most others); a peft model's
            active adapter applies.
        tokenizer (`PreTrainedTokenizerBase`): Its tokenizer, with a chat template.
        instructions (`Sequence[str]`): The K system prompts; each replaces the observation's
            `"instruction"`.
        weights (`Sequence[float]` or `None`, defaults to `None`): One non-negative weight per
            instruction for `mode="weighted"`; normalized to sum to 1.
        mode (`str`, defaults to `"mean"`): `"mean"` or `"weighted"`.
        generation_args (`GenerationArguments` or `None`, defaults to `None`): Decoding settings;
            `max_batch_size` counts rows (problems x K).

    Raises:
        ValueError: On an unknown mode, no instructions, or weights that do not fit the mode.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        instructions: Sequence[str],
        weights: Sequence[float] | None = None,
        mode: str = "mean",
        generation_args: GenerationArguments | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode={mode!r}; pass one of {MODES}.")
        if not instructions:
            raise ValueError("instructions is empty; pass at least one instruction variant.")
        self.instructions = list(instructions)
        self.mode = mode
        self.weights = _normalized_weights(mode, weights, len(self.instructions))
        # The plain policy formats prompts and turns tokens into records; its model is ours.
        self.policy = HFPolicy(model, tokenizer, generation_args)
        self.model = model
        self.tokenizer = tokenizer
        self.generation_args = self.policy.generation_args
        seed = self.generation_args.seed
        self._rng = random.Random(seed) if seed is not None else None
        self._stop: StopStringCriteria | None = None

    @property
    def num_variants(self) -> int:
        """K, the number of instruction variants."""
        return len(self.instructions)

    def act(self, observations: Sequence[Observation]) -> list[str]:
        """One text per observation."""
        return [g.text for g in self.generate(observations)]

    def generate(self, observations: Sequence[Observation]) -> list[EnsembleGeneration]:
        """One `EnsembleGeneration` per observation, batching problems x K rows per step."""
        k = self.num_variants
        prompts = self.policy.encode(expand_instructions(observations, self.instructions))
        rows = self.generation_args.max_batch_size or max(len(prompts), 1)
        per_chunk = max(rows // k, 1)
        results: list[EnsembleGeneration] = []
        for start in range(0, len(observations), per_chunk):
            chunk = prompts[start * k : (start + per_chunk) * k]
            results.extend(self._generate_chunk(chunk))
        return results

    def _generate_chunk(self, prompts: list[list[int]]) -> list[EnsembleGeneration]:
        k = self.num_variants
        seed = self._rng.randrange(2**63) if self._rng is not None else None
        with eval_mode(self.model), seeded(seed, self.model.device):
            tokens, logprobs = self._decode(prompts)
        plain = self.policy.build_generations(prompts[::k], tokens, logprobs)
        return [
            EnsembleGeneration(
                text=g.text,
                prompt_ids=g.prompt_ids,
                completion_ids=g.completion_ids,
                logprobs=g.logprobs,
                finish_reason=g.finish_reason,
                variant_prompt_ids=tuple(prompts[i * k : (i + 1) * k]),
            )
            for i, g in enumerate(plain)
        ]

    def _decode(self, prompts: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        """Runs the shared decoding loop; returns `(problems, steps)` tokens and logprobs."""
        args = self.generation_args
        device = self.model.device
        pad_id = self.tokenizer.pad_token_id
        k, n = self.num_variants, len(prompts) // self.num_variants
        input_ids, mask = left_pad(prompts, pad_id, device)
        positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
        cache = DynamicCache(config=self.model.config)
        hidden = self._forward(input_ids, mask, positions, cache)
        weights = self.weights.to(device=device, dtype=hidden.dtype)
        eos = torch.tensor(self.policy.eos_ids, device=device)
        finished = torch.zeros(n, dtype=torch.bool, device=device)
        tokens: list[torch.Tensor] = []
        logprobs: list[torch.Tensor] = []
        for _ in range(args.max_new_tokens):
            combined = torch.einsum("nkh,k->nh", hidden.view(n, k, -1), weights)
            logits = self._logits(combined)
            token = self._choose(logits, tokens)
            token = torch.where(finished, pad_id, token)
            logprobs.append(
                torch.log_softmax(logits / args.temperature, -1).gather(1, token[:, None])
            )
            tokens.append(token)
            finished |= torch.isin(token, eos) | self._hit_stop(tokens)
            if bool(finished.all()):
                break
            mask = torch.cat([mask, mask.new_ones(n * k, 1)], dim=1)
            positions = positions[:, -1:] + 1
            step_ids = token.repeat_interleave(k)[:, None]
            hidden = self._forward(step_ids, mask, positions, cache)
        return torch.stack(tokens, 1).cpu(), torch.cat(logprobs, 1).cpu()

    def _forward(
        self, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, cache: DynamicCache
    ) -> torch.Tensor:
        out = self.model.get_decoder()(
            input_ids=ids,
            attention_mask=mask,
            position_ids=positions,
            past_key_values=cache,
            use_cache=True,
        )
        return out.last_hidden_state[:, -1]

    def _logits(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = self.model.get_output_embeddings()(hidden).float()
        softcap = getattr(self.model.config, "final_logit_softcapping", None)
        if softcap:  # Gemma-style models cap logits in forward(); mirror it here
            logits = torch.tanh(logits / softcap) * softcap
        return logits

    def _choose(self, logits: torch.Tensor, tokens: list[torch.Tensor]) -> torch.Tensor:
        if not self.generation_args.do_sample:
            return logits.argmax(dim=-1)
        so_far = torch.stack(tokens, 1) if tokens else logits.new_zeros(len(logits), 0).long()
        scores = logits
        for processor in sampling_processors(self.generation_args):
            scores = processor(so_far, scores)
        return torch.multinomial(torch.softmax(scores, dim=-1), num_samples=1).squeeze(1)

    def _hit_stop(self, tokens: list[torch.Tensor]) -> torch.Tensor:
        """Which rows' completions (not prompts) now end with a stop string."""
        stop_strings = self.generation_args.stop_strings
        if not stop_strings:
            return torch.zeros_like(tokens[-1], dtype=torch.bool)
        if self._stop is None:
            self._stop = StopStringCriteria(tokenizer=self.tokenizer, stop_strings=stop_strings)
        return self._stop(torch.stack(tokens, 1), None).to(tokens[-1].device)


def _normalized_weights(mode: str, weights: Sequence[float] | None, k: int) -> torch.Tensor:
    if mode == "mean":
        if weights is not None:
            raise ValueError(
                "weights were given with mode='mean'; pass mode='weighted' to use them."
            )
        return torch.full((k,), 1.0 / k)
    if weights is None or len(weights) != k:
        got = None if weights is None else len(weights)
        raise ValueError(
            f"mode='weighted' needs one weight per instruction: {k} expected, got {got}."
        )
    tensor = torch.tensor([float(w) for w in weights])
    if bool((tensor < 0).any()) or not float(tensor.sum()) > 0:
        raise ValueError(f"weights={list(weights)}; pass non-negative weights with a positive sum.")
    return tensor / tensor.sum()
