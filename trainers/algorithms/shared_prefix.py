"""The loss's log-probabilities with each shared prompt prefix run once, and the LM head run on
completion tokens only.

A multi-agent micro-batch's rows begin alike: every prompt opens with the chat template and the
env's instructions, and most of a row's tokens are prompt (about 70% in the main job). TRL's pass
runs every row's whole prompt through the model, and on a CPU its fused LM head scores every
position, prompt and padding included (it keeps only the completion positions on Triton devices).
`shared_prefix_logps` gives the same per-token log-probabilities and entropies, and through them
the same gradient, for less:

- rows that share a prefix (`agents.decoding.shared_prefixes`: the same first tokens, their
  longest common prefix) have it run once, with gradients; its keys and values are handed to
  each row's forward as past states (`index_select`, so each row's gradient flows back into the
  one prefix pass, as it would into its own copy), and each row runs only the rest of its prompt
  and its completion, in `length_chunks` of similar lengths;
- the LM head, temperature, log-softmax and entropy run on the completion positions only.

Every token keeps its position relative to the row's first token (rotary embeddings see only
differences), so the arithmetic is the same up to float rounding:
``tests/trainers/test_shared_prefix.py`` compares log-probabilities, entropies and gradients with
TRL's own pass. `eligible` says which models it serves: a plain transformers causal LM (no
wrapper around it) with full attention and an LM head without logit scaling or soft-capping;
`trainers.algorithms.microbatch` keeps TRL's pass for any other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import Cache, DynamicLayer, PreTrainedModel

from agents.decoding import SHARED_PREFIX_MIN, left_pad, length_chunks, shared_prefixes
from agents.kv_cache import supports_model

__all__ = ["eligible", "shared_prefix_logps"]

# Config fields that change the LM head's logits (scaling, soft-capping): TRL's fused head reads
# them, this pass does not.
_HEAD_FIELDS = (
    "final_logit_softcapping",
    "logit_scale",
    "output_multiplier",
    "lm_head_multiplier",
    "logits_scaling",
)


def eligible(model: Any) -> bool:
    """Whether `shared_prefix_logps` computes `model`'s log-probabilities as its forward does: a
    transformers causal LM called directly (not through a DDP or PEFT wrapper), decoder-only with
    full attention, its backbone at ``base_model``, a linear LM head with no logit scaling, and no
    activation checkpointing (which turns off the past states the rows read their prefix from)."""
    if not isinstance(model, PreTrainedModel) or not supports_model(model):
        return False
    if any(getattr(module, "gradient_checkpointing", False) for module in model.modules()):
        return False
    text = model.config.get_text_config()
    if text is not model.config or any(getattr(text, f, None) for f in _HEAD_FIELDS):
        return False
    head = model.get_output_embeddings()
    return isinstance(head, torch.nn.Linear) and model.base_model is not model


def _past(layers: Sequence[Any], source: torch.Tensor, columns: int) -> Cache:
    """Past states for a chunk's rows: row i gets prefix row ``source[i]``'s last `columns`
    columns (the prefix rows are left-padded, so a prefix ends at the last column)."""
    past = []
    for layer in layers:
        entry = DynamicLayer()
        width = layer.keys.shape[2]
        entry.update(
            layer.keys[:, :, width - columns :].index_select(0, source),
            layer.values[:, :, width - columns :].index_select(0, source),
        )
        past.append(entry)
    return Cache(layers=past)


@dataclass(frozen=True)
class _Batch:
    """The micro-batch as the pass reads it: its tensors, each row's prompt tokens and how many
    completion columns it uses."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    prompt_width: int
    prompts: list[list[int]]
    completion_widths: list[int]
    pad_id: int

    @property
    def logits_to_keep(self) -> int:
        """The number of completion columns."""
        return self.input_ids.shape[1] - self.prompt_width


@dataclass(frozen=True)
class _Prefixes:
    """The shared prefixes, run once: each row's prefix length, the rest of its prompt and its
    group (``len(groups)`` for none), and the groups' past states and attention mask, with one
    zero row last for the rows without a prefix."""

    shared: list[int]
    rest: list[int]
    group_of: list[int]
    layers: list[Any]
    mask: torch.Tensor


def shared_prefix_logps(
    model: PreTrainedModel,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    temperature: float = 1.0,
    compute_entropy: bool = False,
    max_rows: int | None = None,
    min_shared: int = SHARED_PREFIX_MIN,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The log-probabilities (rows x `logits_to_keep`) of the completion tokens, the last
    `logits_to_keep` columns of `input_ids` (left-padded prompts, then completions), under
    `model` at `temperature`, and their entropies when `compute_entropy`: TRL's
    ``_get_per_token_logps_and_entropies`` (module docstring). Positions the attention mask
    leaves out are 0, as TRL's are. A chunk holds at most `max_rows` rows when given.

    Prompts must be contiguous (left padding only): a prompt column masked out after a row's
    first token is refused, naming the row."""
    batch = _batch(model, input_ids, attention_mask, logits_to_keep)
    prefixes = _prefix_pass(model, batch, min_shared)
    out_logps: list[torch.Tensor] = []
    out_entropies: list[torch.Tensor] = []
    order: list[torch.Tensor] = []
    for chunk in length_chunks(prefixes.rest, batch.completion_widths, max_rows):
        index = torch.tensor(chunk, device=input_ids.device)
        logps, entropy = _chunk_logps(model, batch, prefixes, index, temperature, compute_entropy)
        out_logps.append(logps)
        if entropy is not None:
            out_entropies.append(entropy)
        order.append(index)
    inverse = _inverse(torch.cat(order))
    entropies = torch.cat(out_entropies)[inverse] if compute_entropy else None
    return torch.cat(out_logps)[inverse], entropies


def _batch(
    model: PreTrainedModel,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
) -> _Batch:
    """`input_ids` read as left-padded prompts then `logits_to_keep` completion columns."""
    width = input_ids.shape[1]
    prompt_width = width - logits_to_keep
    if prompt_width < 1:
        raise ValueError(
            f"logits_to_keep={logits_to_keep} leaves no prompt column of {width}; expected a "
            "prompt of at least one token before the completions"
        )
    mask = attention_mask.bool()
    starts = _prompt_starts(mask[:, :prompt_width])
    completion_mask = mask[:, prompt_width:]
    used = torch.where(completion_mask, torch.arange(logits_to_keep, device=mask.device) + 1, 1)
    completion_widths = used.max(1).values.tolist()
    prompts = [input_ids[i, s:prompt_width].tolist() for i, s in enumerate(starts.tolist())]
    pad_id = model.config.pad_token_id or 0
    return _Batch(input_ids, attention_mask, prompt_width, prompts, completion_widths, pad_id)


def _prompt_starts(prompt_mask: torch.Tensor) -> torch.Tensor:
    """Each row's first prompt column, refusing a prompt that is not one run of tokens."""
    prompt_width = prompt_mask.shape[1]
    lengths = prompt_mask.sum(1)
    starts = prompt_width - lengths
    columns = torch.arange(prompt_width, device=prompt_mask.device)
    contiguous = prompt_mask == (columns >= starts[:, None])
    if not bool(contiguous.all()) or bool((lengths == 0).any()):
        bad = int((~contiguous.all(1) | (lengths == 0)).nonzero()[0])
        raise ValueError(
            f"row {bad}'s prompt is not one run of tokens ending at column {prompt_width}; "
            "expected left-padded prompts of at least one token"
        )
    return starts


def _prefix_pass(model: PreTrainedModel, batch: _Batch, min_shared: int) -> _Prefixes:
    """Each group's shared prefix run once through the backbone, with gradients."""
    rows, prompts, device = len(batch.prompts), batch.prompts, batch.input_ids.device
    groups = shared_prefixes(prompts, min_shared=min_shared)
    shared, group_of = [0] * rows, [len(groups)] * rows  # len(groups): the zero "no prefix" row
    for g, (members, length) in enumerate(groups):
        for i in members:
            shared[i], group_of[i] = length, g
    prefix_layers: list[Any] = []
    prefix_mask = torch.zeros((len(groups) + 1, 0), dtype=torch.long, device=device)
    if groups:
        ids, group_mask = left_pad(
            [prompts[members[0]][:length] for members, length in groups],
            batch.pad_id,
            device,
        )
        cache = Cache(layers=[DynamicLayer() for _ in range(model.config.num_hidden_layers)])
        model.base_model(
            input_ids=ids,
            attention_mask=group_mask,
            position_ids=(group_mask.cumsum(-1) - 1).clamp(min=0),
            past_key_values=cache,
            use_cache=True,
        )
        prefix_layers = [_with_zero_row(layer) for layer in cache.layers]
        prefix_mask = torch.cat([group_mask, torch.zeros_like(group_mask[:1])])
    rest = [len(p) - n for p, n in zip(prompts, shared, strict=True)]
    return _Prefixes(shared, rest, group_of, prefix_layers, prefix_mask)


def _chunk_logps(
    model: PreTrainedModel,
    batch: _Batch,
    prefixes: _Prefixes,
    index: torch.Tensor,
    temperature: float,
    compute_entropy: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The log-probabilities (and entropies) of the rows at `index`, run on their prefixes."""
    chunk = index.tolist()
    past = max(prefixes.shared[i] for i in chunk)
    keep = max(batch.completion_widths[i] for i in chunk)
    ids, suffix_mask, positions, suffix_width = _chunk_inputs(batch, prefixes, index, keep)
    kwargs: dict[str, Any] = {}
    if past:
        source = torch.tensor([prefixes.group_of[i] for i in chunk], device=ids.device)
        width = prefixes.mask.shape[1]
        kwargs["past_key_values"] = _past(prefixes.layers, source, past)
        suffix_mask = torch.cat([prefixes.mask[source, width - past :], suffix_mask], dim=1)
    hidden = model.base_model(
        input_ids=ids,
        attention_mask=suffix_mask,
        position_ids=positions,
        use_cache=bool(past),
        **kwargs,
    ).last_hidden_state[:, suffix_width - 1 : suffix_width - 1 + keep]
    logits = model.get_output_embeddings()(hidden).float() / temperature
    completion = slice(batch.prompt_width, batch.prompt_width + keep)
    return _completion_scores(
        logits,
        batch.input_ids[index, completion],
        batch.attention_mask[index, completion].bool(),
        batch.logits_to_keep,
        compute_entropy,
    )


def _chunk_inputs(
    batch: _Batch, prefixes: _Prefixes, index: torch.Tensor, keep: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """The rows at `index`'s input ids, attention mask and positions (each prompt's rest after
    its prefix, left-padded, then `keep` completion columns) and the prompt rests' width."""
    chunk, prompt_width = index.tolist(), batch.prompt_width
    ids, suffix_mask = left_pad(
        [batch.prompts[i][prefixes.shared[i] :] for i in chunk], batch.pad_id, index.device
    )
    suffix_width = ids.shape[1]
    ids = torch.cat([ids, batch.input_ids[index, prompt_width : prompt_width + keep]], dim=1)
    completion_mask = batch.attention_mask[index, prompt_width:][:, :keep]
    suffix_mask = torch.cat([suffix_mask, completion_mask], 1)
    # positions from each row's first token: the prompt's rest after its prefix, then the
    # completion's columns as they stand (a masked column inside keeps its place)
    own = torch.tensor([prefixes.shared[i] for i in chunk], device=ids.device)[:, None]
    lead = torch.tensor([prefixes.rest[i] for i in chunk], device=ids.device)[:, None]
    step = torch.arange(ids.shape[1], device=ids.device)[None, :]
    positions = (own + step - (suffix_width - lead)).clamp(min=0)
    return ids, suffix_mask, positions, suffix_width


def _completion_scores(
    logits: torch.Tensor,
    targets: torch.Tensor,
    valid: torch.Tensor,
    width: int,
    compute_entropy: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`targets`' log-probabilities under `logits` (and the entropies when asked), 0 where not
    `valid`, padded to `width` columns."""
    log_softmax = torch.log_softmax(logits, dim=-1)
    chosen = log_softmax.gather(-1, targets[..., None]).squeeze(-1)
    logps = _pad(chosen.masked_fill(~valid, 0), width)
    if not compute_entropy:
        return logps, None
    entropy = -(log_softmax.exp() * log_softmax).sum(-1)
    return logps, _pad(entropy.masked_fill(~valid, 0), width)


def _inverse(row_order: torch.Tensor) -> torch.Tensor:
    """The permutation that puts rows taken in `row_order` back in their first order."""
    inverse = torch.empty_like(row_order)
    inverse[row_order] = torch.arange(len(row_order), device=row_order.device)
    return inverse


def _with_zero_row(layer: Any) -> Any:
    """`layer`'s keys and values with one more row of zeros (the rows without a prefix)."""
    layer.keys = torch.cat([layer.keys, torch.zeros_like(layer.keys[:1])])
    layer.values = torch.cat([layer.values, torch.zeros_like(layer.values[:1])])
    return layer


def _pad(values: torch.Tensor, width: int) -> torch.Tensor:
    """`values` padded with zero columns on the right to `width`."""
    return torch.nn.functional.pad(values, (0, width - values.shape[1]))
