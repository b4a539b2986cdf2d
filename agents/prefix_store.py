"""Prompt states a `ContinuousBatcher` keeps across its admissions, found by token prefix.

A rollout's prompts repeat their openings: a role's chat template and instructions open every
turn of that role, the rows of one problem's group read the same problem, and a later turn quotes
what earlier ones read. The batcher runs a prompt's tokens once per admission at most (rows of
one admission sharing a prefix run it once); `PrefixStore` keeps the key/value states of prompts
already run, so a prompt admitted later runs only past its longest stored prefix (what vLLM calls
automatic prefix caching, SGLang a radix cache). States depend only on the tokens before them
(causal attention, positions from the prompt's first token), so a stored prefix's states are the
ones the prompt's own forward would compute, up to float rounding between batch shapes.

Prefixes are kept in a token trie per key (the adapter that reads them: states differ between
adapters). Each node names the stored prompt that first passed through it; that prompt's states
cover every token up to the node. States are kept whole per prompt (layers x 2 x key/value heads
x tokens x head dim, on the model's device), at most `budget` tokens in all: past it the store
is emptied at the next admission (`fit`).

The states are the model's as it was when they were computed: a store lives as long as one
batcher, which decodes one rollout with fixed weights.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch

__all__ = ["PREFIX_STORE_TOKENS", "PrefixStore"]

PREFIX_STORE_TOKENS = 1 << 16
"""Prompt tokens a batcher's store keeps by default. States cost layers x 2 x key/value heads x
head dim numbers a token: the embedded model 4 KiB (256 MiB at most), Qwen2.5-0.5B in bf16 12 KiB
(768 MiB), a 7B Qwen2.5 in bf16 56 KiB (3.5 GiB: lower `prefix_budget` on a small accelerator).
A rollout stores no more than the prompts it admits."""


class PrefixStore:
    """Key/value states of prompts by token prefix (module docstring).

    Args:
        budget (`int`): Prompt tokens kept between admissions (`fit`); 0 keeps states within an
            admission only.

    Raises:
        ValueError: `budget` is negative.
    """

    def __init__(self, budget: int = PREFIX_STORE_TOKENS) -> None:
        if budget < 0:
            raise ValueError(f"a prefix store's budget is a number of tokens >= 0, got {budget}")
        self.budget = budget
        self.tokens = 0
        self.entries: list[torch.Tensor] = []
        # key -> trie: token -> (children, index of the entry that first passed through it)
        self.roots: dict[Hashable, dict[int, tuple[dict, int]]] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def clear(self) -> None:
        """Forgets every stored prompt."""
        self.entries, self.roots, self.tokens = [], {}, 0

    def fit(self) -> None:
        """Empties the store when it holds more than its budget (called between admissions)."""
        if self.tokens > self.budget:
            self.clear()

    def lookup(self, key: Hashable, ids: Sequence[int], limit: int) -> tuple[torch.Tensor, int]:
        """The stored states of the longest stored prefix of `ids` (at most `limit` tokens), and
        its length: ``(states, n)`` with ``states[..., :n, :]`` those of ``ids[:n]`` (layers x 2
        x heads x tokens x head dim); ``n`` is 0 (and the states empty) when none is stored."""
        node = self.roots.get(key)
        depth, entry = 0, -1
        if node is not None:
            for token in ids[:limit]:
                child = node.get(token)
                if child is None:
                    break
                node, entry = child
                depth += 1
        if entry < 0:
            return torch.empty(0), 0
        return self.entries[entry], depth

    def covers(self, key: Hashable, ids: Sequence[int]) -> bool:
        """Whether `ids` is stored whole (as a prompt or the prefix of one)."""
        return self.lookup(key, ids, len(ids))[1] == len(ids)

    def add(self, key: Hashable, ids: Sequence[int], states: torch.Tensor) -> None:
        """Stores the `states` of `ids` (layers x 2 x heads x ``len(ids)`` x head dim); the
        tokens already stored keep the states they have."""
        if states.shape[-2] != len(ids):
            raise ValueError(
                f"states of {states.shape[-2]} tokens for a prompt of {len(ids)}; expected one "
                "column of states per token"
            )
        index = len(self.entries)
        node = self.roots.setdefault(key, {})
        added = False
        for token in ids:
            child = node.get(token)
            if child is None:
                child = node[token] = ({}, index)
                added = True
            node = child[0]
        if added:
            self.entries.append(states)
            self.tokens += len(ids)
