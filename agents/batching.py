"""Continuous batching for a `StepwisePolicy` (an `HFPolicy`, or any policy offering what
`agents.base.StepwisePolicy` declares): rows join the batch when submitted, leave when done.

`model.generate` runs a fixed batch to the end of its longest row: rows that finished early
keep their seats and their compute, and a row submitted meanwhile waits for the whole call.
`ContinuousBatcher` decodes step by step instead. Each `step()` first admits waiting rows (one
prefill forward for all of them, their key/value states moved into the running batch's cache),
then runs one decode forward for every running row, and hands back the rows that finished: an
eos token (kept, as `generate` keeps it), a stop string, or the token budget. Finished rows are
dropped from the cache at once, so the batch only computes for rows still going.

The key/value cache (`agents.kv_cache.RowCache`) is one preallocated buffer per layer written in
place. Rows are left-padded, as `generate` pads them: every row writes its next token at the same
column, and a row admitted later is placed so that its prompt ends at that column; columns no
running row uses any more are dropped from the left, before the buffer would grow. An
admission's prefill writes its states straight into the buffer, and runs in chunks of rows of
similar prompt length (`agents.decoding.length_chunks`) when that saves padding; rows that share
a prompt prefix (a role's instructions) have it run once, and the states of every prompt run are
kept for the batcher's life (`agents.prefix_store`): a prompt admitted later runs only past its
longest prefix already run.

The records are the ones `HFPolicy.generate` makes (`Generation`: prompt and completion token
ids, one log-probability per token from the raw logits at the policy's temperature, the finish
reason), with the same decoding settings (temperature, top-k, top-p, stop strings, eos ids,
`max_new_tokens`) and peft adapters per row. Under greedy decoding the completions are those of
`HFPolicy.generate` (tested); sampled ones are drawn from the same distributions (inverse-CDF
sampling from the warped logits), each row with uniform numbers of its own, drawn once from a
stream seeded from its key, so a row samples the same tokens whichever rows share its batch
(tested).

Supported models: decoder-only transformers models whose attention layers are all full
attention (Llama, Mistral, Qwen2 and most others); `supports_model` (`agents.kv_cache`) says.
Others fall back to the policy's own `generate` in the rollout engine.

Example:
    >>> batcher = ContinuousBatcher(policy)  # doctest: +SKIP
    >>> batcher.submit("a", policy.encode([obs])[0])  # doctest: +SKIP
    >>> while batcher.busy:  # doctest: +SKIP
    ...     for key, generation in batcher.step():
    ...         print(key, generation.text)
"""

from __future__ import annotations

import zlib
from collections import deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import Cache

from agents.base import Generation, StepwisePolicy
from agents.decoding import (
    SHARED_PREFIX_MIN,
    eval_mode,
    left_pad,
    length_chunks,
    sampling_processors,
    shared_prefixes,
)
from agents.fused_decode import fused_decoder
from agents.hf import is_peft_model
from agents.kv_cache import BufferLayer, RowCache, supports_model
from agents.prefix_store import PREFIX_STORE_TOKENS, PrefixStore

__all__ = ["SHARED_PREFIX_MIN", "ContinuousBatcher", "supports_model"]


@dataclass
class _Row:
    key: Hashable
    prompt_ids: list[int]
    adapter_name: str | None
    uniforms: list[float] | None = None  # its own sampling stream, one number per token
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    done: bool = False

    @property
    def position(self) -> int:
        """The position id of the next token fed (the last one sampled)."""
        return len(self.prompt_ids) + len(self.completion_ids) - 1


class ContinuousBatcher:
    """Decodes rows of one stepwise policy's model step by step, admitting and releasing rows as
    they come and go (module docstring).

    Args:
        policy (`StepwisePolicy`): Its model, tokenizer and decoding settings are used, and it
            builds the records (an `HFPolicy`, or any policy `agents.base.as_stepwise` accepts);
            rows arrive as token ids (`policy.encode` or that of another stepwise policy of the
            same `stepwise_key`).
        max_rows (`int` or `None`, defaults to `None`): Rows decoded at once; `None` uses the
            policy's `max_batch_size`, else no limit. Further rows wait their turn.
        seed (`int` or `None`, defaults to `None`): Seeds the sampling stream (`None`: the
            policy's next seed, itself from `GenerationArguments.seed`; without one, a seed drawn
            from torch's global RNG, so a run that restores that RNG samples alike).
        admit_fraction (`float`, defaults to 0.25): Waiting rows are admitted (one prefill for
            all) when the batch is empty, when they number at least this fraction of the running
            rows, or after `admit_wait` steps; fewer, larger prefills cost less than one per row.
        admit_wait (`int`, defaults to 4): The steps a row waits at most before admission.
        fused (`bool` or `None`, defaults to `None`): Decode and prefill with
            `agents.fused_decode.FusedDecoder` (the model's arithmetic on its own weights,
            without transformers' per-call overhead) where it serves the model (Llama, Mistral,
            Qwen2; no adapters); else, or with False, call the model. `None`: on a CPU, where it
            is measured faster (rollouts 6.3x -> 7.4x naive, ``bench.py rollout``), not yet on
            an accelerator, where it is unmeasured.
        prefix_budget (`int`, defaults to `PREFIX_STORE_TOKENS`): Prompt tokens whose states
            the batcher keeps between admissions (`agents.prefix_store.PrefixStore`), so a
            prompt admitted later runs only past its longest prefix already run (a role's
            instructions, a problem other rows read); past the budget the store is emptied.
            0 shares prefixes within an admission only.

    Raises:
        ValueError: the policy's model is not one `supports_model` accepts.
    """

    def __init__(
        self,
        policy: StepwisePolicy,
        max_rows: int | None = None,
        seed: int | None = None,
        admit_fraction: float = 0.25,
        admit_wait: int = 4,
        fused: bool | None = None,
        prefix_budget: int = PREFIX_STORE_TOKENS,
    ) -> None:
        if not supports_model(policy.model):
            raise ValueError(
                f"{type(policy.model).__name__} has attention layers other than full attention "
                "(sliding window or linear); use the policy's own generate for it"
            )
        self.policy = policy
        self.model = policy.model
        self.args = policy.generation_args
        self.max_rows = max_rows or self.args.max_batch_size or None
        self.admit_fraction, self.admit_wait = admit_fraction, admit_wait
        self.device = self.model.device
        seed = policy.next_seed() if seed is None else seed
        if seed is None:  # unseeded: drawn from torch's global RNG, as `generate` samples from it
            seed = int(torch.randint(0, 2**62, (1,)).item())
        self.seed = seed
        self.processors = sampling_processors(self.args)
        self.eos = torch.tensor(policy.eos_ids, device=self.device)
        self.pad_id = policy.tokenizer.pad_token_id
        self.kv = RowCache(
            self.model.config.get_text_config(),
            self.model.dtype,
            self.device,
            self.args.max_new_tokens,
        )
        self.rows: list[_Row] = []
        self.waiting: deque[_Row] = deque()
        self.waited = 0  # steps the oldest waiting row has waited
        self.peft = is_peft_model(self.model)
        if fused is None:
            fused = self.device.type == "cpu"
        self.fused = None if self.peft or not fused else fused_decoder(self.model)
        self.stats = dict.fromkeys(
            ("steps", "prefills", "admitted", "row_steps", "generated", "prefill_tokens"), 0
        )
        self.stats.update(prefill_padded=0, prefill_reused=0, cache_cells=0, cache_used=0)
        self.prefixes = PrefixStore(prefix_budget)

    def counts(self) -> dict[str, int]:
        """What ran so far: ``steps`` (decode forwards), ``prefills`` (admission forwards),
        ``forwards`` (both), ``admitted`` rows, ``decode_slots`` (a row's seat for one token: each
        decode row and each admitted row's first token), ``generated`` tokens, the prompt tokens
        and padded prompt cells of the prefills (``prefill_tokens``, ``prefill_padded``), the
        prompt tokens taken from the prefix store instead (``prefill_reused``), and the
        key/value columns attended over by decode rows, all and in use (``cache_cells``,
        ``cache_used``)."""
        stats = dict(self.stats)
        stats["forwards"] = stats["steps"] + stats["prefills"]
        stats["decode_slots"] = stats.pop("row_steps") + stats["admitted"]
        return stats

    @property
    def busy(self) -> bool:
        """Whether any row is running or waiting."""
        return bool(self.rows or self.waiting)

    def submit(
        self, key: Hashable, prompt_ids: Sequence[int], adapter_name: str | None = None
    ) -> None:
        """Queue a row: `key` comes back with its `Generation` from `step()`.

        A sampled row draws from its own random stream, seeded by the batcher's seed and
        ``repr(key)``: give rows distinct keys whose ``repr`` is stable, and the same row samples
        the same tokens whenever it is submitted and whichever rows share its batch (up to
        floating-point differences between batch shapes).

        Raises:
            ValueError: `prompt_ids` is empty.
        """
        if len(prompt_ids) == 0:
            raise ValueError(f"row {key!r}: an empty prompt cannot be generated from")
        name = adapter_name if adapter_name is not None else self.policy.adapter_name
        uniforms = None
        if self.args.do_sample:
            generator = torch.Generator()
            mixed = (self.seed * 0x9E3779B97F4A7C15 + zlib.crc32(repr(key).encode())) % 2**63
            generator.manual_seed(mixed)
            uniforms = torch.rand(self.args.max_new_tokens, generator=generator).tolist()
        self.waiting.append(_Row(key, list(prompt_ids), name, uniforms))

    def step(self) -> list[tuple[Hashable, Generation]]:
        """Admit waiting rows (when due), decode one token for every running row, and return the
        rows that finished, as ``(key, Generation)`` in the order they finished."""
        finished: list[tuple[Hashable, Generation]] = []
        # (eval mode is set only when needed: toggling it walks every module)
        mode = eval_mode(self.model) if self.model.training else torch.no_grad()
        with mode:
            if self._admission_due():
                finished += self._admit()
            if self.rows:
                finished += self._decode()
        if self.waiting:
            self.waited += 1
        return finished

    def _admission_due(self) -> bool:
        if not self.waiting:
            return False
        free = None if self.max_rows is None else self.max_rows - len(self.rows)
        if free is not None and free <= 0:
            return False
        return (
            not self.rows
            or len(self.waiting) >= max(1.0, self.admit_fraction * len(self.rows))
            or self.waited >= self.admit_wait
        )

    def _adapter_kwargs(self, rows: Sequence[_Row]) -> dict[str, Any]:
        if not self.peft:
            return {}
        active = self.model.active_adapter
        active = active if isinstance(active, str) else active[0]
        return {"adapter_names": [r.adapter_name or active for r in rows]}

    def _admit(self) -> list[tuple[Hashable, Generation]]:
        """Prefills the waiting rows due (in chunks of similar prompt length), their states
        written straight into the running cache, and samples their first tokens. Each row runs
        past its longest stored prefix (`agents.prefix_store`): prefixes the rows share are run
        and stored first, and every prompt run is stored for the rows admitted later."""
        count = len(self.waiting)
        if self.max_rows is not None:
            count = min(count, self.max_rows - len(self.rows))
        new = [self.waiting.popleft() for _ in range(count)]
        self.waited = 0
        self.prefixes.fit()
        self._prefill_shared(new)
        hits = [self._stored(r.adapter_name, r.prompt_ids, len(r.prompt_ids) - 1) for r in new]
        prefixes = [n for _, n in hits]
        suffixes = [len(r.prompt_ids) - n for r, n in zip(new, prefixes, strict=True)]
        chunks = length_chunks(suffixes, [0] * len(new))
        plans = [
            (chunk, max(prefixes[i] for i in chunk), max(suffixes[i] for i in chunk))
            for chunk in chunks
        ]
        end = self.kv.place(len(new), max(past + suffix for _, past, suffix in plans))
        seat, logits, masks = len(self.rows), [], []
        for chunk, past, suffix in plans:
            rows = [new[i] for i in chunk]
            window = self.kv.windows(slice(seat, seat + len(rows)), end - past - suffix)
            past_mask = self._copy_past(window, past, [hits[i] for i in chunk])
            last, mask = self._prefill(rows, [prefixes[i] for i in chunk], window, past_mask)
            self._store(rows, window, mask)
            logits.append(last)
            masks.append(mask)
            self.rows += rows
            seat += len(rows)
        self.stats["admitted"] += len(new)
        self.kv.seat(masks, end)
        return self._sample(torch.cat(logits), start=len(self.rows) - len(new))

    def _stored(
        self, adapter: str | None, ids: Sequence[int], limit: int
    ) -> tuple[torch.Tensor, int]:
        """The store's longest prefix of `ids` (at most `limit` tokens) when it is worth a copy
        (`SHARED_PREFIX_MIN` tokens or more): its states and length, else ``(empty, 0)``."""
        states, n = self.prefixes.lookup(adapter, ids, limit)
        return (states, n) if n >= SHARED_PREFIX_MIN else (states[:0], 0)

    def _prefill_shared(self, new: Sequence[_Row]) -> None:
        """Runs once, and stores, each prefix that rows of this admission share
        (`agents.decoding.shared_prefixes`) past what the store holds of it, when that is
        `SHARED_PREFIX_MIN` tokens or more: one forward for all such prefixes."""
        groups = shared_prefixes([r.prompt_ids for r in new], [r.adapter_name for r in new])
        jobs, hits = [], []
        for members, shared in groups:
            first = new[members[0]]
            hit = self._stored(first.adapter_name, first.prompt_ids[:shared], shared)
            if shared - hit[1] >= SHARED_PREFIX_MIN:
                jobs.append(_Row(None, first.prompt_ids[:shared], first.adapter_name))
                hits.append(hit)
        if not jobs:
            return
        past = max(n for _, n in hits)
        width = past + max(len(job.prompt_ids) - n for job, (_, n) in zip(jobs, hits, strict=True))
        layers = self.kv.fresh_layers()
        for layer in layers:
            layer.reserve(len(jobs), width, self.kv.like)
        past_mask = self._copy_past(layers, past, hits)
        _, mask = self._prefill(jobs, [n for _, n in hits], layers, past_mask)
        self._store(jobs, layers, mask)

    def _prefill(
        self,
        rows: Sequence[_Row],
        prefixes: Sequence[int],
        window: list[BufferLayer],
        past_mask: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Runs the prompts of one chunk of admitted `rows` past their stored prefixes (the
        first `prefixes` tokens of each, already in `window`, marked by `past_mask`), writing
        their states into `window`; returns their last logits and their attention mask."""
        ids, suffix_mask = left_pad(
            [r.prompt_ids[n:] for r, n in zip(rows, prefixes, strict=True)],
            self.pad_id,
            self.device,
        )
        start = torch.tensor(list(prefixes), device=self.device)[:, None]
        mask = torch.cat([past_mask, suffix_mask], dim=1)
        positions = (start + suffix_mask.cumsum(-1) - 1).clamp(min=0)
        if self.fused is not None:
            logits = self.fused(ids, positions, mask, window)
        else:
            logits = self.model(
                input_ids=ids,
                attention_mask=mask,
                position_ids=positions,
                past_key_values=Cache(layers=list(window)),
                use_cache=True,
                logits_to_keep=1,
                **self._adapter_kwargs(rows),
            ).logits[:, -1, :]
        self.stats["prefills"] += 1
        self.stats["prefill_tokens"] += int(suffix_mask.sum())
        self.stats["prefill_padded"] += suffix_mask.numel()
        self.stats["prefill_reused"] += sum(prefixes)
        return logits, mask

    def _copy_past(
        self, window: list[BufferLayer], past: int, hits: Sequence[tuple[torch.Tensor, int]]
    ) -> torch.Tensor:
        """Copies each row's stored prefix states (`hits`: states and length, one per row of
        `window`) into its first `past` columns, right-aligned; returns their attention mask
        (rows x `past`)."""
        past_mask = torch.zeros((len(hits), past), dtype=torch.long, device=self.device)
        for row, (states, n) in enumerate(hits):
            if not n:
                continue
            past_mask[row, past - n :] = 1
            for target, stored in zip(window, states, strict=True):
                assert target.key_buffer is not None and target.value_buffer is not None
                target.key_buffer[row, :, past - n : past] = stored[0, :, :n]
                target.value_buffer[row, :, past - n : past] = stored[1, :, :n]
        for target in window:
            target.length = past
        return past_mask

    def _store(self, rows: Sequence[_Row], window: list[BufferLayer], mask: torch.Tensor) -> None:
        """Stores the prompt states of `rows` (their columns of `window`, where `mask` is 1)
        that the store does not hold whole."""
        for row, (prompt, columns) in enumerate(zip(rows, mask, strict=True)):
            if self.prefixes.covers(prompt.adapter_name, prompt.prompt_ids):
                continue
            used = columns.nonzero()[:, 0]
            states = []
            for layer in window:
                assert layer.key_buffer is not None and layer.value_buffer is not None
                keys, values = layer.key_buffer[row], layer.value_buffer[row]
                states.append(torch.stack([keys[:, used], values[:, used]]))
            self.prefixes.add(prompt.adapter_name, prompt.prompt_ids, torch.stack(states))

    def _decode(self) -> list[tuple[Hashable, Generation]]:
        rows = self.rows
        last = torch.tensor([[r.completion_ids[-1]] for r in rows], device=self.device)
        positions = torch.tensor([[r.position] for r in rows], device=self.device)
        self.kv.extend()
        if self.fused is not None:
            logits = self.fused(last, positions, self.kv.mask, self.kv.layers)
        else:
            logits = self.model(
                input_ids=last,
                attention_mask=self.kv.mask,
                position_ids=positions,
                past_key_values=self.kv.cache,
                use_cache=True,
                **self._adapter_kwargs(rows),
            ).logits[:, -1, :]
        self.stats["steps"] += 1
        self.stats["row_steps"] += len(rows)
        self.stats["cache_cells"] += self.kv.mask.numel()
        self.stats["cache_used"] += int(self.kv.mask.sum())
        return self._sample(logits, start=0)

    def _sample(self, logits: torch.Tensor, start: int) -> list[tuple[Hashable, Generation]]:
        """Samples the next token of rows ``start ..`` from their last logits, records it, and
        releases the rows that finished."""
        scores = logits.float()
        logprobs = torch.log_softmax(scores / self.args.temperature, dim=-1)
        if self.args.do_sample:
            # Inverse-CDF sampling from the warped distribution, each row with the next number
            # of its own stream: a row's tokens depend on that stream, not on which rows share
            # its batch or when it was admitted.
            warped = scores
            for processor in self.processors:
                warped = processor(None, warped)
            probs = torch.softmax(warped, dim=-1)
            cdf = probs.cumsum(dim=-1)
            rows = self.rows[start:]
            uniform = torch.tensor(
                [row.uniforms[len(row.completion_ids)] for row in rows],  # type: ignore[index]
                dtype=cdf.dtype,
                device=self.device,
            )
            total = cdf[:, -1]
            # strictly below the total (float rounding could reach it), so the token found is
            # one with probability mass
            target = torch.minimum(uniform * total, torch.nextafter(total, torch.zeros_like(total)))
            tokens = torch.searchsorted(cdf, target[:, None], right=True)[:, 0]
        else:
            tokens = scores.argmax(dim=-1)
        chosen = logprobs.gather(1, tokens[:, None]).squeeze(1)
        is_eos = torch.isin(tokens, self.eos)
        finished: list[tuple[Hashable, Generation]] = []
        for row, token, logprob, eos in zip(
            self.rows[start:], tokens.tolist(), chosen.tolist(), is_eos.tolist(), strict=True
        ):
            row.completion_ids.append(token)
            row.logprobs.append(logprob)
            self.stats["generated"] += 1
            if eos or len(row.completion_ids) >= self.args.max_new_tokens or self._stopped(row):
                row.done = True
                finished.append((row.key, self._generation(row)))
        if finished:
            self._release()
        return finished

    def _stopped(self, row: _Row) -> bool:
        stops = self.args.stop_strings
        if not stops:
            return False
        # Checked after every token, so a stop string can only have ended in the last one: the
        # reply's tail is decoded, with margin for tokens that decode to nothing or to part of
        # a character (decoding the whole reply every step would cost its length squared).
        window = 4 * max(len(s) for s in stops) + 8
        text = self.policy.tokenizer.decode(row.completion_ids[-window:], skip_special_tokens=True)
        return any(s in text for s in stops)

    def _generation(self, row: _Row) -> Generation:
        (generation,) = self.policy.build_generations(
            [row.prompt_ids],
            torch.tensor([row.completion_ids], dtype=torch.long),
            torch.tensor([row.logprobs], dtype=torch.float),
        )
        return generation

    def _release(self) -> None:
        """Drops finished rows from the batch and the cache: the last running rows move into
        the seats the finished ones leave (only they are copied)."""
        seats = [i for i, r in enumerate(self.rows) if not r.done]
        count = len(seats)
        holes = [i for i in range(count) if self.rows[i].done]
        movers = [i for i in seats if i >= count]
        self.kv.release(holes, movers, count)
        for hole, mover in zip(holes, movers, strict=True):
            self.rows[hole] = self.rows[mover]
        self.rows = self.rows[:count]
