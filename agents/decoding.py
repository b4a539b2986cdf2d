"""Decoding helpers shared by `HFPolicy` and `HiddenStateEnsemble`.

Padding, seeding, eval mode, the logprob recorder, stop strings and cutting padded generate
output back into exact per-row token lists.
"""

from __future__ import annotations

import contextlib
from collections.abc import Hashable, Iterator, Sequence
from typing import Any

import torch
from transformers import (
    LogitsProcessor,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    StoppingCriteria,
    StopStringCriteria,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from agents.base import GenerationArguments

CHUNK_SAVING = 0.05
"""A batch's forward pass (a training micro-batch's, a batched prefill) is split into one more
chunk only where that saves at least this share of its padded cells (each chunk is one more
forward call, with its fixed cost)."""

CHUNK_ROWS_MAX = 256
"""The most rows `length_chunks` puts in one chunk."""

SHARED_PREFIX_MIN = 16
"""Leading tokens rows must share for `shared_prefixes` to run their common prefix once."""


class LogprobRecorder(LogitsProcessor):
    """Records `log_softmax(raw_logits / temperature)` of each sampled token during `generate`.

    Placed first in the processor list it sees the raw logits. The token sampled at step t is only
    known at step t + 1 (as `input_ids[:, -1]`), so one step's log-softmax is kept until then:
    memory is one `(batch, vocab)` tensor, not one per step like `output_logits=True`.
    """

    def __init__(self, temperature: float) -> None:
        self.temperature = temperature
        self._pending: torch.Tensor | None = None
        self._steps: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self._pending is not None:
            self._steps.append(self._pending.gather(1, input_ids[:, -1:]).squeeze(1))
        self._pending = torch.log_softmax(scores.float() / self.temperature, dim=-1)
        return scores

    def finish(self, last_tokens: torch.Tensor) -> torch.Tensor:
        """Gathers the final step and returns the `(batch, steps)` log-probabilities."""
        if self._pending is not None:
            self._steps.append(self._pending.gather(1, last_tokens[:, None]).squeeze(1))
            self._pending = None
        if not self._steps:
            return torch.zeros(last_tokens.shape[0], 0)
        return torch.stack(self._steps, dim=1).cpu()


class CompletionStopCriteria(StoppingCriteria):
    """Stop strings matched in the completion only.

    transformers' `StopStringCriteria` looks at the whole sequence, so a stop string spanning the
    end of the prompt (say `"\\n\\n"` after a template's trailing newline) would end a row
    after one token. This wrapper shows it only the tokens generated after `prompt_width`.
    """

    def __init__(self, inner: StopStringCriteria, prompt_width: int) -> None:
        self.inner = inner
        self.prompt_width = prompt_width

    def __call__(self, input_ids: torch.LongTensor, scores: Any, **kwargs: Any) -> torch.Tensor:
        completion = input_ids[:, self.prompt_width :]
        if completion.shape[1] == 0:
            return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        return self.inner(completion, scores)


@contextlib.contextmanager
def seeded(seed: int | None, device: torch.device) -> Iterator[None]:
    """Runs the block under `torch.manual_seed(seed)` without touching the caller's RNG state."""
    if seed is None:
        yield
        return
    devices = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        yield


@contextlib.contextmanager
def eval_mode(model: torch.nn.Module) -> Iterator[None]:
    """Eval mode and no grad for the block, restoring the model's training flag afterwards."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


def left_pad(
    rows: Sequence[Sequence[int]], pad_id: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-pads token rows into `(input_ids, attention_mask)` tensors."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):
        if row:
            ids[i, width - len(row) :] = torch.tensor(row, dtype=torch.long)
            mask[i, width - len(row) :] = 1
    return ids.to(device), mask.to(device)


def length_chunks(
    prompt_lengths: Sequence[int],
    completion_lengths: Sequence[int],
    max_rows: int | None = None,
    min_saving: float = CHUNK_SAVING,
) -> list[list[int]]:
    """Rows split into chunks whose forward passes waste the fewest padded cells.

    A chunk costs its rows times (its longest prompt + its longest completion) cells, plus
    `min_saving` times the unsplit batch's cells for being one more forward call. Chunks are runs
    of the rows sorted by length, longest first, found by dynamic programming; each holds at most
    `max_rows` rows (TRL's memory chunking) when given, and at most `CHUNK_ROWS_MAX` (which bounds
    the search to linear time). Returns row indices, chunk by chunk.
    """
    rows = len(prompt_lengths)
    if rows != len(completion_lengths):
        raise ValueError(
            f"{rows} prompt lengths but {len(completion_lengths)} completion lengths; expected "
            "one of each per row"
        )
    if rows == 0:
        return []
    order = sorted(range(rows), key=lambda i: (-(prompt_lengths[i] + completion_lengths[i]), i))
    limit = rows if max_rows is None else max(1, max_rows)
    widest = max(prompt_lengths) + max(completion_lengths)
    penalty = min_saving * rows * widest
    best = [0.0] + [float("inf")] * rows  # best[j]: the cheapest split of order[:j]
    start = [0] * (rows + 1)
    for end in range(1, rows + 1):
        prompt = completion = 0
        for first in range(end - 1, max(-1, end - 1 - min(limit, CHUNK_ROWS_MAX)), -1):
            prompt = max(prompt, prompt_lengths[order[first]])
            completion = max(completion, completion_lengths[order[first]])
            cost = best[first] + (end - first) * (prompt + completion) + penalty
            if cost < best[end]:
                best[end], start[end] = cost, first
    chunks = []
    end = rows
    while end:
        chunks.append(order[start[end] : end])
        end = start[end]
    return chunks[::-1]


def shared_prefixes(
    sequences: Sequence[Sequence[int]],
    keys: Sequence[Hashable] | None = None,
    min_shared: int = SHARED_PREFIX_MIN,
) -> list[tuple[list[int], int]]:
    """Groups of `sequences` whose common prefix is worth running once, as (indices, prefix
    length): two sequences or more with the same key (`keys`, one per sequence, e.g. the adapter
    that reads them) and the same first `min_shared` tokens; the prefix is their longest common
    one, leaving each of them at least one token of its own. Sequences in no group are left out.
    """
    if keys is not None and len(keys) != len(sequences):
        raise ValueError(f"{len(keys)} keys for {len(sequences)} sequences; expected one each")
    candidates: dict[tuple[Any, ...], list[int]] = {}
    for i, sequence in enumerate(sequences):
        if len(sequence) > min_shared:
            key = None if keys is None else keys[i]
            candidates.setdefault((key, *sequence[:min_shared]), []).append(i)
    groups = []
    for members in candidates.values():
        if len(members) < 2:
            continue
        chosen = [sequences[i] for i in members]
        shared = min(len(s) - 1 for s in chosen)
        first = chosen[0]
        for other in chosen[1:]:
            k = min_shared
            while k < shared and other[k] == first[k]:
                k += 1
            shared = k
        groups.append((members, shared))
    return groups


def eos_token_ids(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase) -> list[int]:
    """The union of the tokenizer's eos and the model's generation-config eos ids."""
    ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    if isinstance(configured, int):
        ids.add(configured)
    elif configured is not None:
        ids.update(configured)
    return sorted(ids)


def sampling_processors(args: GenerationArguments) -> list[LogitsProcessor]:
    """Temperature, top-k and top-p warpers for sampling (none for greedy decoding)."""
    if not args.do_sample:
        return []
    processors: list[LogitsProcessor] = []
    if args.temperature != 1.0:
        processors.append(TemperatureLogitsWarper(args.temperature))
    if args.top_k > 0:
        processors.append(TopKLogitsWarper(args.top_k))
    if args.top_p < 1.0:
        processors.append(TopPLogitsWarper(args.top_p))
    return processors


def completion_lengths(
    completions: torch.Tensor, eos_ids: Sequence[int], pad_id: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row completion length (through the first eos) and whether an eos was generated.

    Rows without eos lose their trailing pad tokens: `generate` pads rows that a stopping
    criterion finished early. When pad is an eos id, the first-eos rule already covers that.
    """
    steps = completions.shape[1]
    is_eos = torch.isin(completions, torch.tensor(list(eos_ids), dtype=completions.dtype))
    has_eos = is_eos.any(dim=1)
    first_eos = torch.where(has_eos, is_eos.int().argmax(dim=1) + 1, steps)
    if pad_id in eos_ids or steps == 0:
        return first_eos, has_eos
    not_pad = completions != pad_id
    trailing = not_pad.flip(dims=[1]).int().argmax(dim=1)
    no_pad_len = torch.where(not_pad.any(dim=1), steps - trailing, 0)
    return torch.where(has_eos, first_eos, no_pad_len), has_eos


def truncate_at_stop(
    text: str,
    ids: list[int],
    stop_strings: Sequence[str],
    tokenizer: PreTrainedTokenizerBase,
) -> tuple[str, int] | None:
    """Cuts a completion at its first stop string.

    Args:
        text (`str`): The decoded completion.
        ids (`list[int]`): Its tokens.
        stop_strings (`Sequence[str]`): Strings that end a completion.
        tokenizer (`PreTrainedTokenizerBase`): Decodes token prefixes.

    Returns:
        `None` when no stop string occurs, else the text before the first stop string to be
        completed (the earliest end) and the number of tokens up to and including the one that
        completes it (found by bisection over decoded prefixes: O(log n) decodes).
    """
    # The stop string generation meets first is the one whose first occurrence ends first.
    hits = [(text.find(s) + len(s), text.find(s)) for s in stop_strings if s in text]
    if not hits:
        return None
    _, index = min(hits)
    low, high = 1, len(ids)
    while low < high:  # smallest prefix whose decoding contains a stop string
        mid = (low + high) // 2
        prefix = tokenizer.decode(ids[:mid], skip_special_tokens=True)
        if any(s in prefix for s in stop_strings):
            high = mid
        else:
            low = mid + 1
    return text[:index], low
