"""Length-grouped micro-batches: multi-turn GRPO and PPO without training on padding.

A multi-agent generation batch mixes rows of very different lengths: a solver's prompt is the
problem, a refiner's holds the problem, an answer and a review. TRL pads the whole generation
batch to its longest prompt and its longest completion, shuffles the rows and splits them into
``steps_per_generation`` micro-batches, so every micro-batch's forward and backward pass runs at
the width of the widest row of the whole batch. `LengthGroupedMixin` re-splits the buffered
generation batch once TRL has built it: rows sorted by length, so each micro-batch holds rows of
similar length, and each micro-batch cut to the columns its own rows use (the left-padding columns
of its prompts and the right-padding columns of its completions that no row of it needs).

The accumulated gradient is the same (up to float rounding) whenever one optimizer step consumes
the whole generation batch and the loss does not depend on which rows share a micro-batch:
``steps_per_generation == gradient_accumulation_steps``, ``num_iterations == 1``, ``loss_type`` one
of `GROUPABLE_LOSSES` (per-sequence means over equal-sized micro-batches, or one normaliser over
the generation batch), no per-micro-batch entropy quantile and no Liger loss. Dropping padding
columns at the left of left-padded prompts shifts every position of a row by the same amount,
which rotary position embeddings do not see. In any other configuration TRL's shuffled split is
kept unchanged.

Within a micro-batch, every forward pass (the loss's, and the old and reference log-probabilities')
runs in chunks of rows of similar length, each cut to the columns its own rows use
(`length_chunks`): a micro-batch of one problem's solver, critic and refiner turns holds prompts
of very different lengths even after regrouping. The log-probabilities are the same per token (up
to float rounding), so the loss and its gradient are too, for any loss type; this holds in every
configuration, so it is on whenever ``length_grouped`` is asked for (not only when the regrouping
above is allowed).

With ``shared_prefix`` (on by default on CPU, where it is measured faster) that pass runs each
prompt prefix the rows share once and scores completion positions only
(`trainers.algorithms.shared_prefix`): the same log-probabilities and gradient, for fewer tokens.

With ``skip_silent_rows`` (the default), where the regrouping is allowed and rows of zero
advantage add nothing to the update (`skips_silent_rows`: a ``dapo`` or ``cispo`` loss, whose
normaliser counts the whole generation batch's tokens, and no KL term or entropy mask), the
regrouped micro-batches leave those rows out, but for the shortest of them that keep the
micro-batches equal and none empty. The update is the same; the loss's logged metrics (entropy,
clip ratios) are over the rows trained, and ``silent_rows_skipped`` logs the share left out.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import torch

from agents.decoding import length_chunks
from trainers import compat
from trainers.algorithms.shared_prefix import eligible, shared_prefix_logps
from trainers.precision import guard_attention

logger = logging.getLogger(__name__)

GROUPABLE_LOSSES = ("grpo", "dr_grpo", "dapo", "cispo")
"""Loss types whose accumulated gradient does not depend on how rows are split into
micro-batches (``bnpo`` normalises by each micro-batch's own token count)."""


SILENT_LOSSES = ("dapo", "cispo")
"""Loss types under which a row of zero advantage adds nothing to the loss or its gradient: a
per-token loss that is a multiple of the advantage, over one normaliser counted on the whole
generation batch (``num_items_in_batch``, the silent rows' tokens included)."""


def groupable(args: Any, num_iterations: int) -> bool:
    """Whether re-splitting the generation batch leaves the optimizer step unchanged."""
    return (
        args.steps_per_generation == args.gradient_accumulation_steps
        and num_iterations == 1
        and args.loss_type in GROUPABLE_LOSSES
        and getattr(args, "top_entropy_quantile", 1.0) == 1.0
        and not getattr(args, "use_liger_kernel", False)
    )


def _concat(values: Sequence[Any]) -> Any:
    first = values[0]
    if first is None:
        return None
    if isinstance(first, torch.Tensor):
        return first if first.ndim == 0 else torch.cat(list(values))
    if isinstance(first, list):
        return [item for value in values for item in value]
    raise TypeError(
        f"cannot regroup a micro-batch value of type {type(first).__name__}; expected a tensor, "
        "a list or None"
    )


def _take(value: Any, order: torch.Tensor) -> Any:
    if value is None or (isinstance(value, torch.Tensor) and value.ndim == 0):
        return value
    if isinstance(value, torch.Tensor):
        return value[order.to(value.device)]
    return [value[i] for i in order.tolist()]


def trim_padding(batch: dict[str, Any]) -> dict[str, Any]:
    """`batch` without the prompt columns (at the left) and completion columns (at the right)
    that none of its rows uses, for every prompt- or completion-aligned 2-D tensor."""
    prompt_mask, completion_mask = batch["prompt_mask"], batch["completion_mask"]
    prompt_width, completion_width = prompt_mask.shape[1], completion_mask.shape[1]
    used = prompt_mask.bool().any(0).nonzero()
    start = int(used[0]) if len(used) else prompt_width - 1
    used = completion_mask.bool().any(0).nonzero()
    end = int(used[-1]) + 1 if len(used) else 1
    out = {}
    for key, value in batch.items():
        if isinstance(value, torch.Tensor) and value.ndim >= 2:
            if key.startswith("prompt_") and value.shape[1] == prompt_width:
                value = value[:, start:]
            elif not key.startswith("prompt_") and value.shape[1] == completion_width:
                value = value[:, :end]
        out[key] = value
    return out


def row_aligned(batch: dict[str, Any]) -> bool:
    """Whether every tensor (but scalars) and list of `batch` has one entry per row, so rows can
    move between micro-batches (image tensors of vision models, for one, do not)."""
    rows = len(batch["prompt_ids"])
    return all(
        value is None
        or (isinstance(value, torch.Tensor) and (value.ndim == 0 or len(value) == rows))
        or (isinstance(value, list) and len(value) == rows)
        for value in batch.values()
    )


def silent_rows(batch: dict[str, Any]) -> torch.Tensor:
    """The rows of `batch` whose advantage is zero at every completion token (one per row, or one
    per token as the multi-turn trainers give them)."""
    advantages = batch["advantages"]
    if advantages.ndim == 1:
        return advantages == 0
    return ~((advantages != 0) & batch["completion_mask"].bool()).any(1)


def skips_silent_rows(args: Any, beta: float) -> bool:
    """Whether rows of zero advantage add nothing to the update, so the loss may leave them out
    (`regroup_by_length`): a loss in `SILENT_LOSSES`, no KL term, no entropy mask (a quantile
    over the micro-batch), no Liger loss."""
    return (
        args.loss_type in SILENT_LOSSES
        and beta == 0.0
        and getattr(args, "top_entropy_quantile", 1.0) == 1.0
        and not getattr(args, "use_liger_kernel", False)
    )


def regroup_by_length(
    batches: Sequence[dict[str, Any]], skip_silent: bool = False
) -> tuple[list[dict[str, Any]], int]:
    """The rows of `batches` (TRL's micro-batches of one generation batch, equal widths) re-split
    into as many micro-batches of equal rows, longest rows first, each trimmed of padding; with
    `skip_silent`, without the rows of zero advantage (`silent_rows`), but for the shortest of
    them that keep the micro-batches equal and none empty. Returns them and the rows left out."""
    merged = {key: _concat([batch[key] for batch in batches]) for key in batches[0]}
    if not row_aligned(merged):
        raise ValueError(
            f"cannot regroup micro-batches whose values are not one per row: {sorted(merged)}; "
            "pass length_grouped=False"
        )
    lengths = (merged["prompt_mask"].sum(1) + merged["completion_mask"].sum(1)).cpu()
    skipped = 0
    if skip_silent:
        silent = silent_rows(merged).cpu()
        keep = ~silent
        kept = int(keep.sum())
        pad = (-kept) % len(batches) if kept else len(batches)
        shortest = silent.nonzero()[:, 0][torch.argsort(lengths[silent], stable=True)]
        keep[shortest[:pad]] = True
        index = keep.nonzero()[:, 0]
        skipped = len(keep) - len(index)
        merged = {key: _take(value, index) for key, value in merged.items()}
        lengths = lengths[index]
    order = torch.argsort(lengths, descending=True, stable=True)
    merged = {key: _take(value, order) for key, value in merged.items()}
    split = compat.split_tensor_dict(merged, len(batches))
    return [trim_padding(batch) for batch in split], skipped


def chunked_forward(
    forward: Any,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    batch_size: int | None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None, None]:
    """TRL's ``_get_per_token_logps_and_entropies`` (`forward`) run on `length_chunks` of the
    rows, each cut to the prompt columns (left) and completion columns (right) its rows use; the
    outputs are put back in row order, zero where a chunk was cut (padding, which every loss
    masks). Returns (log-probabilities, entropies or ``None``, ``None``): not for MoE aux losses."""
    prompt_width = input_ids.size(1) - logits_to_keep
    mask = attention_mask.bool()
    columns = torch.arange(input_ids.size(1), device=mask.device)
    first = torch.where(mask, columns, input_ids.size(1)).min(1).values.clamp(max=prompt_width)
    last = torch.where(mask, columns + 1, prompt_width).max(1).values.clamp(min=prompt_width + 1)
    prompts = (prompt_width - first).tolist()
    completions = (last - prompt_width).tolist()
    chunks = length_chunks(prompts, completions, batch_size)
    logps, entropies = [], []
    for chunk in chunks:
        keep_prompt = max(prompts[i] for i in chunk)
        keep_completion = max(completions[i] for i in chunk)
        index = torch.tensor(chunk, device=input_ids.device)
        cols = slice(prompt_width - keep_prompt, prompt_width + keep_completion)
        out_logps, out_entropies, _ = forward(
            input_ids[index, cols], attention_mask[index, cols], keep_completion, None, **kwargs
        )
        pad = (0, logits_to_keep - keep_completion)
        logps.append(torch.nn.functional.pad(out_logps, pad))
        if out_entropies is not None:
            entropies.append(torch.nn.functional.pad(out_entropies, pad))
    order = torch.tensor([i for chunk in chunks for i in chunk], device=input_ids.device)
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(len(order), device=order.device)
    merged_logps = torch.cat(logps)[inverse]
    merged_entropies = torch.cat(entropies)[inverse] if entropies else None
    return merged_logps, merged_entropies, None


class LengthGroupedMixin:
    """Mixed into a `GRPOTrainer` subclass: length-grouped, trimmed micro-batches (see the module
    docstring). ``length_grouped=False`` keeps TRL's shuffled split; ``skip_silent_rows=False``
    trains every row."""

    def __init__(
        self,
        *args: Any,
        length_grouped: bool = True,
        shared_prefix: bool | None = None,
        skip_silent_rows: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        compat.check_trainer(self)
        guard_attention(self.args, self.accelerator.device)  # bf16 on CUDA: trainers.precision
        self.chunked_forwards = length_grouped
        if shared_prefix is None:  # measured faster on CPU; on CUDA not yet measured
            shared_prefix = self.accelerator.device.type == "cpu"
        self.shared_prefix = length_grouped and shared_prefix
        self.length_grouped = length_grouped and groupable(self.args, self.num_iterations)
        self.skip_silent = (
            self.length_grouped and skip_silent_rows and skips_silent_rows(self.args, self.beta)
        )
        if length_grouped and not self.length_grouped:
            logger.info(
                "micro-batches keep TRL's shuffled split: regrouping them by length would change "
                "the update (it needs steps_per_generation == gradient_accumulation_steps, "
                "num_iterations 1 and loss_type in %s)",
                GROUPABLE_LOSSES,
            )

    @compat.hook
    def _prepare_inputs(self, generation_batch: Any) -> Any:
        buffered = compat.buffered_inputs(self)
        inputs = super()._prepare_inputs(generation_batch)
        # TRL replaces its buffer only when it generated a new training batch (never in eval).
        if not self.length_grouped or compat.buffered_inputs(self) is buffered:
            return inputs
        if not all(row_aligned(batch) for batch in compat.buffered_inputs(self)):
            logger.warning("micro-batches hold values that are not one per row: not regrouped")
            self.length_grouped = False
            return inputs
        regrouped, skipped = regroup_by_length(compat.buffered_inputs(self), self.skip_silent)
        if self.skip_silent:
            rows = sum(len(batch["prompt_ids"]) for batch in regrouped) + skipped
            compat.log_metric(self, "train", "silent_rows_skipped", skipped / rows)
        compat.set_buffered_inputs(self, regrouped)
        return regrouped[compat.micro_step(self) % self.args.steps_per_generation]

    @compat.hook
    def _get_per_token_logps_and_entropies(
        self, model, input_ids, attention_mask, logits_to_keep, batch_size=None, **kwargs
    ):
        parent = super()._get_per_token_logps_and_entropies
        # images and MoE aux losses are not cut into chunks: TRL's own pass
        other_inputs = any(
            v is not None
            for k, v in kwargs.items()
            if k not in ("compute_entropy", "compute_aux_loss")
        )
        if not self.chunked_forwards or other_inputs or kwargs.get("compute_aux_loss"):
            return parent(model, input_ids, attention_mask, logits_to_keep, batch_size, **kwargs)
        if self.shared_prefix and eligible(model) and not self.args.cast_lm_head_to_fp32:
            with self.accelerator.autocast():
                logps, entropies = shared_prefix_logps(
                    model,
                    input_ids,
                    attention_mask,
                    logits_to_keep,
                    self.temperature,
                    compute_entropy=bool(kwargs.get("compute_entropy")),
                    max_rows=batch_size,
                )
            return logps, entropies, None
        return chunked_forward(
            lambda *a, **k: parent(model, *a, **k),
            input_ids,
            attention_mask,
            logits_to_keep,
            batch_size,
            **kwargs,
        )
