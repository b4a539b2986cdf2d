"""A policy that generates through a vLLM server (TRL's ``trl vllm-serve``) instead of `generate`.

`VLLMServerPolicy` is an `HFPolicy` whose sampling runs on the server: prompts are formatted and
tokenized here exactly as `HFPolicy` does (so the recorded prompt ids are the trainer's), sent as
token ids, and the server's completion ids and sampled-token logprobs come back unchanged. Eos
cuts, stop strings and finish reasons are then applied by the same code as local generation
(`HFPolicy.build_generations`), so the rollout engine and the trainers cannot tell them apart.

The client is any object with TRL's `VLLMClient.generate` signature (``prompts`` as token-id
lists, ``n``, ``temperature``, ``top_p``, ``top_k``, ``max_tokens``, ``logprobs``,
``generation_kwargs``; returns ``completion_ids`` and ``logprobs`` of shape (rows, tokens, k)).
The local model is still needed for its eos ids and, in training, is the one the trainer updates;
TRL pushes its weights to the server before each rollout (`GRPOTrainer._generate`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from agents.base import Generation, GenerationArguments
from agents.hf import HFPolicy


class VLLMServerPolicy(HFPolicy):
    """`HFPolicy` sampling on a vLLM server.

    Args:
        model, tokenizer, generation_args, system_prompt_override: as for `HFPolicy`.
        client: a `trl.generation.vllm_client.VLLMClient` (or an object with its `generate`).
    """

    # The server samples every reply: the rollout engine never decodes its rows on the local
    # model, although this class has everything a stepwise policy has (`agents.base.as_stepwise`).
    decodes_locally = False

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        generation_args: GenerationArguments | None = None,
        system_prompt_override: str | None = None,
        *,
        client: Any,
    ) -> None:
        super().__init__(model, tokenizer, generation_args, system_prompt_override)
        if not callable(getattr(client, "generate", None)):
            raise TypeError(
                f"client {type(client).__name__} has no generate(); pass a trl VLLMClient"
            )
        self.client = client

    def _generate_chunk(
        self, prompt_ids: list[list[int]], adapter_names: Sequence[str | None] | None
    ) -> list[Generation]:
        if adapter_names is not None and any(name is not None for name in adapter_names):
            raise ValueError(
                "VLLMServerPolicy cannot switch LoRA adapters per row; serve one merged model "
                "per role or generate locally with HFPolicy"
            )
        args = self.generation_args
        extra: dict[str, Any] = {}
        if self._rng is not None:
            extra["seed"] = self._rng.randrange(2**31)
        out = self.client.generate(
            prompts=[list(p) for p in prompt_ids],
            n=1,
            temperature=args.temperature if args.do_sample else 0.0,
            top_p=args.top_p,
            top_k=args.top_k,
            max_tokens=args.max_new_tokens,
            logprobs=0,
            generation_kwargs=extra or None,
        )
        ids, logprobs = out["completion_ids"], out["logprobs"]
        if len(ids) != len(prompt_ids) or len(logprobs) != len(prompt_ids):
            raise RuntimeError(
                f"the vLLM server answered {len(ids)} completions for {len(prompt_ids)} prompts"
            )
        width = max((len(row) for row in ids), default=0) or 1
        pad = self.tokenizer.pad_token_id
        completions = torch.full((len(ids), width), pad, dtype=torch.long)
        lps = torch.zeros((len(ids), width), dtype=torch.float32)
        for i, (row, row_lps) in enumerate(zip(ids, logprobs, strict=True)):
            if len(row_lps) != len(row):
                raise RuntimeError(
                    f"the vLLM server sent {len(row_lps)} logprobs for {len(row)} tokens"
                )
            completions[i, : len(row)] = torch.tensor(row, dtype=torch.long)
            # logprobs=0: one entry per token, the sampled token's (a list of one, or a float).
            lps[i, : len(row)] = torch.tensor(
                [lp[0] if isinstance(lp, list | tuple) else lp for lp in row_lps],
                dtype=torch.float32,
            )
        return self.build_generations([list(p) for p in prompt_ids], completions, lps)
