"""The loss's log-probabilities with each shared prompt prefix run once, and the LM head run on
completion tokens only.

A multi-agent micro-batch's rows begin alike: every prompt opens with the chat template and the
env's instructions, and most of a row's tokens are prompt (about 70% in the main job). TRL's pass
runs every row's whole prompt through the model, and on a CPU its fused LM head scores every
position, prompt and padding included (it keeps only the completion positions on Triton devices).
`shared_prefix_logps` gives the same per-token log-probabilities and entropies, and through them
the same gradient, for less:

- the prompts become a tree of shared runs (`prefix_tree`): the template all rows open with, a
  problem that one episode's turns repeat, an answer that a critic's and a refiner's prompts
  both quote. Each run is one node, run once with gradients, level by level, in `length_chunks`
  of similar lengths; its keys and values are handed to the runs below it as past states
  (`index_select`, so each one's gradient flows back into the one pass, as it would into its own
  copy). Each row then runs only its prompt's own last tokens and its completion. In the main
  job's micro-batches the forwards' cells fall to 55% of the rows' tokens (70% with one shared
  prefix per row, 127% for TRL's padded pass);
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
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import Cache, DynamicLayer, PreTrainedModel

from agents.decoding import SHARED_PREFIX_MIN, left_pad, length_chunks
from agents.kv_cache import supports_model

__all__ = ["PrefixTree", "Segment", "eligible", "prefix_tree", "shared_prefix_logps"]

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
    width = input_ids.shape[1]
    prompt_width = width - logits_to_keep
    if prompt_width < 1:
        raise ValueError(
            f"logits_to_keep={logits_to_keep} leaves no prompt column of {width}; expected a "
            "prompt of at least one token before the completions"
        )
    mask = attention_mask.bool()
    prompt_mask = mask[:, :prompt_width]
    lengths = prompt_mask.sum(1)
    starts = prompt_width - lengths
    columns = torch.arange(prompt_width, device=mask.device)
    contiguous = prompt_mask == (columns >= starts[:, None])
    if not bool(contiguous.all()) or bool((lengths == 0).any()):
        bad = int((~contiguous.all(1) | (lengths == 0)).nonzero()[0])
        raise ValueError(
            f"row {bad}'s prompt is not one run of tokens ending at column {prompt_width}; "
            "expected left-padded prompts of at least one token"
        )
    completion_mask = mask[:, prompt_width:]
    used = torch.where(completion_mask, torch.arange(logits_to_keep, device=mask.device) + 1, 1)
    completion_widths = used.max(1).values.tolist()
    prompts = [input_ids[i, s:prompt_width].tolist() for i, s in enumerate(starts.tolist())]

    tree = prefix_tree(prompts, min_shared)
    runner = _Runner(model, input_ids.device, max_rows)
    for level in tree.levels:
        runner.run_nodes(level, [tree.nodes[i] for i in level])
    head = model.get_output_embeddings()
    out_logps: list[torch.Tensor] = []
    out_entropies: list[torch.Tensor] = []
    order: list[torch.Tensor] = []
    lengths = [len(leaf.tokens) for leaf in tree.leaves]
    for chunk in length_chunks(lengths, completion_widths, max_rows):
        index = torch.tensor(chunk, device=input_ids.device)
        keep = max(completion_widths[i] for i in chunk)
        tail = input_ids[index, prompt_width : prompt_width + keep]
        valid = attention_mask[index, prompt_width : prompt_width + keep]
        hidden, _ = runner.run([tree.leaves[i] for i in chunk], tail, valid)
        logits = head(hidden[:, -keep - 1 : -1]).float() / temperature
        log_softmax = torch.log_softmax(logits, dim=-1)
        valid = valid.bool()
        chosen = log_softmax.gather(-1, tail[..., None]).squeeze(-1)
        out_logps.append(_pad(chosen.masked_fill(~valid, 0), logits_to_keep))
        if compute_entropy:
            entropy = -(log_softmax.exp() * log_softmax).sum(-1)
            out_entropies.append(_pad(entropy.masked_fill(~valid, 0), logits_to_keep))
        order.append(index)
    inverse = _inverse(torch.cat(order))
    entropies = torch.cat(out_entropies)[inverse] if compute_entropy else None
    return torch.cat(out_logps)[inverse], entropies


@dataclass
class Segment:
    """A run of prompt tokens: `tokens`, after `start` tokens held by its ancestors (the
    segments up the tree from `parent`, -1 for none)."""

    tokens: list[int]
    start: int
    parent: int


@dataclass
class PrefixTree:
    """Prompts as a tree of shared segments: `nodes` (each run once, its states read by every
    segment below it), `levels` (node indices by depth: a level's parents are all in the ones
    before it) and `leaves` (one per prompt: its own last tokens, at least one)."""

    nodes: list[Segment] = field(default_factory=list)
    levels: list[list[int]] = field(default_factory=list)
    leaves: list[Segment] = field(default_factory=list)


def prefix_tree(
    prompts: Sequence[Sequence[int]], min_shared: int = SHARED_PREFIX_MIN
) -> PrefixTree:
    """`prompts` as a `PrefixTree`: where two prompts or more go on alike for a run of tokens
    that saves at least `min_shared` tokens (its length times the prompts sharing it, less one),
    that run is a node; each prompt keeps at least its last token as its own leaf."""
    tree = PrefixTree()
    leaves: dict[int, Segment] = {}
    # (prompt indices, tokens they share from the start, parent node, its level)
    pending: list[tuple[list[int], int, int, int]] = [(list(range(len(prompts))), 0, -1, -1)]
    while pending:
        members, depth, parent, level = pending.pop()
        chosen = [prompts[i] for i in members]
        cap = min(len(p) for p in chosen) - 1  # each keeps its last token
        k = depth
        while k < cap and all(p[k] == chosen[0][k] for p in chosen):
            k += 1
        if len(members) < 2:
            leaves[members[0]] = Segment(list(chosen[0][depth:]), depth, parent)
            continue
        if (len(members) - 1) * (k - depth) >= min_shared:  # a node; its parts go on from k
            node = len(tree.nodes)
            tree.nodes.append(Segment(list(chosen[0][depth:k]), depth, parent))
            if len(tree.levels) <= level + 1:
                tree.levels.append([])
            tree.levels[level + 1].append(node)
            depth, parent, level = k, node, level + 1
        # the prompts part where they differ (at k), or where the shortest ends: each part,
        # fewer prompts than these, may share a longer run
        parts: dict[int, list[int]] = {}
        for i in members:
            if len(prompts[i]) - 1 > k:
                parts.setdefault(prompts[i][k], []).append(i)
            else:  # its last token is all it has past the shared run
                leaves[i] = Segment(list(prompts[i][depth:]), depth, parent)
        pending += [(part, depth, parent, level) for part in parts.values()]
    tree.leaves = [leaves[i] for i in range(len(prompts))]
    return tree


class _Runner:
    """Runs segments through the backbone, each after its parent's states, and keeps the nodes'
    states by level (rows right-aligned: a row's states end at the last column)."""

    def __init__(self, model: Any, device: torch.device, max_rows: int | None) -> None:
        self.backbone, self.device, self.max_rows = model.base_model, device, max_rows
        self.pad_id = model.config.pad_token_id or 0
        self.layers = model.config.num_hidden_layers
        self.where: dict[int, tuple[int, int]] = {}  # node -> (level, row)
        self.levels: list[tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor]] = []

    def run_nodes(self, indices: list[int], nodes: list[Segment]) -> None:
        """Runs one level's nodes (in chunks of similar length) and keeps their states."""
        chunks = length_chunks([len(n.tokens) for n in nodes], [0] * len(nodes), self.max_rows)
        parts = [self.run([nodes[i] for i in chunk])[1] for chunk in chunks]
        width = max(mask.shape[1] for _, _, mask in parts)
        keys = [torch.cat([_left(p[0][j], width) for p in parts]) for j in range(len(parts[0][0]))]
        values = [torch.cat([_left(p[1][j], width) for p in parts]) for j in range(len(keys))]
        mask = torch.cat([_left(p[2], width) for p in parts])
        inverse = _inverse(torch.tensor([i for chunk in chunks for i in chunk], device=self.device))
        level = len(self.levels)
        self.levels.append(
            ([k[inverse] for k in keys], [v[inverse] for v in values], mask[inverse])
        )
        for row, node in enumerate(indices):
            self.where[node] = (level, row)

    def run(
        self,
        segments: list[Segment],
        tail: torch.Tensor | None = None,
        tail_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor]]:
        """The segments' tokens (left-padded), then `tail`'s columns as they stand, after each
        segment's parent's states: the last hidden states, and the states with their mask."""
        ids, mask = left_pad([s.tokens for s in segments], self.pad_id, self.device)
        width = ids.shape[1]
        if tail is not None and tail_mask is not None:
            ids, mask = torch.cat([ids, tail], dim=1), torch.cat([mask, tail_mask.long()], dim=1)
        # positions from each prompt's first token: a masked tail column keeps its place
        lead = torch.tensor([width - len(s.tokens) for s in segments], device=self.device)
        start = torch.tensor([s.start for s in segments], device=self.device)
        positions = (start[:, None] + torch.arange(ids.shape[1], device=self.device)) - lead[
            :, None
        ]
        past_keys, past_values, past_mask = self._past([s.parent for s in segments])
        layers = []
        for k, v in zip(past_keys, past_values, strict=True):
            layer = DynamicLayer()
            layer.update(k, v)
            layers.append(layer)
        cache = Cache(layers=layers or [DynamicLayer() for _ in range(self.layers)])
        hidden = self.backbone(
            input_ids=ids,
            attention_mask=torch.cat([past_mask, mask], dim=1),
            position_ids=positions.clamp(min=0),
            past_key_values=cache,
            use_cache=True,
        ).last_hidden_state
        full_mask = torch.cat([past_mask, mask], dim=1)
        keys = [layer.keys for layer in cache.layers]
        values = [layer.values for layer in cache.layers]
        return hidden, (keys, values, full_mask)

    def _past(
        self, parents: list[int]
    ) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor]:
        """Each row's parent's states (zero columns for a row without one), cut to the columns
        the widest of them uses."""
        rows = len(parents)
        by_level: dict[int, list[int]] = {}
        for i, parent in enumerate(parents):
            if parent >= 0:
                by_level.setdefault(self.where[parent][0], []).append(i)
        if not by_level:
            return [], [], torch.zeros((rows, 0), dtype=torch.long, device=self.device)
        used = 0
        for level, members in by_level.items():
            mask = self.levels[level][2]
            picked = mask[[self.where[parents[i]][1] for i in members]]
            used = max(used, _extent(picked))
        mask_out = torch.zeros((rows, used), dtype=torch.long, device=self.device)
        pieces: list[tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]] = []
        for level, members in by_level.items():
            level_keys, level_values, level_mask = self.levels[level]
            index = torch.tensor([self.where[parents[i]][1] for i in members], device=self.device)
            pieces.append(
                (
                    torch.tensor(members, device=self.device),
                    [_left(k.index_select(0, index), used) for k in level_keys],
                    [_left(v.index_select(0, index), used) for v in level_values],
                )
            )
            mask_out[pieces[-1][0]] = _left(level_mask.index_select(0, index), used)
        if len(pieces) == 1 and len(pieces[0][0]) == rows:  # one level holds every parent
            return pieces[0][1], pieces[0][2], mask_out
        template = pieces[0][1][0]
        keys, values = [], []
        for j in range(len(pieces[0][1])):
            key = template.new_zeros((rows, *template.shape[1:]))
            value = key.clone()
            for members, piece_keys, piece_values in pieces:
                key = key.index_copy(0, members, piece_keys[j])
                value = value.index_copy(0, members, piece_values[j])
            keys.append(key)
            values.append(value)
        return keys, values, mask_out


def _extent(mask: torch.Tensor) -> int:
    """The columns right-aligned rows of `mask` use, from the first any of them attends."""
    used = mask.bool().any(0).nonzero()
    return int(mask.shape[1] - used[0]) if len(used) else 0


def _left(tensor: torch.Tensor, width: int) -> torch.Tensor:
    """`tensor` (rows first, columns at dim 2 for states, 1 for a mask) cut or zero-padded at
    the left to `width` columns."""
    dim = 1 if tensor.ndim == 2 else 2
    have = tensor.shape[dim]
    if have >= width:
        return tensor.narrow(dim, have - width, width)
    pad = [0, 0] * (tensor.ndim - 1 - dim) + [width - have, 0]
    return torch.nn.functional.pad(tensor, pad)


def _inverse(order: torch.Tensor) -> torch.Tensor:
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(len(order), device=order.device)
    return inverse


def _pad(values: torch.Tensor, width: int) -> torch.Tensor:
    return torch.nn.functional.pad(values, (0, width - values.shape[1]))
