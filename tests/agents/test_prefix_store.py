"""The prefix store (`agents.prefix_store`): the longest stored prefix of a prompt, per key, within
a token budget."""

from __future__ import annotations

import pytest
import torch

from agents.prefix_store import PrefixStore


def states(ids, fill=0.0):
    """States shaped as the batcher stores them (layers x 2 x heads x tokens x head dim), each
    token's column holding its token id (plus `fill`), so a test can read whose states it got."""
    column = torch.tensor(ids, dtype=torch.float)[None, None, None, :, None] + fill
    return column.expand(2, 2, 3, len(ids), 4).clone()


def test_the_longest_stored_prefix_is_found_within_the_limit() -> None:
    store = PrefixStore()
    store.add("a", [1, 2, 3, 4, 5], states([1, 2, 3, 4, 5]))
    store.add("a", [1, 2, 3, 9], states([1, 2, 3, 9], fill=0.5))
    found, n = store.lookup("a", [1, 2, 3, 9, 7], limit=10)
    assert n == 4
    assert found[0, 0, 0, :n, 0].tolist() == [1.5, 2.5, 3.5, 9.5]  # the second prompt's states
    found, n = store.lookup("a", [1, 2, 3, 4, 5, 6], limit=3)
    assert n == 3  # a row keeps tokens of its own to run
    assert found[0, 1, 2, :n, 3].tolist() == [1, 2, 3]  # the first prompt's: it passed first
    assert store.lookup("a", [2, 3], limit=5)[1] == 0
    assert store.lookup("b", [1, 2, 3], limit=5)[1] == 0  # another key: another trie
    assert store.covers("a", [1, 2, 3, 4]) and not store.covers("a", [1, 2, 3, 4, 5, 6])
    assert (len(store), store.tokens) == (2, 9)


def test_a_prompt_stored_whole_adds_nothing_and_the_budget_empties_the_store() -> None:
    store = PrefixStore(budget=6)
    store.add("a", [1, 2, 3, 4], states([1, 2, 3, 4]))
    store.add("a", [1, 2, 3], states([1, 2, 3]))  # already a stored prefix
    assert (len(store), store.tokens) == (1, 4)
    store.fit()
    assert len(store) == 1  # within the budget: kept
    store.add("a", [7, 8, 9], states([7, 8, 9]))
    assert store.tokens == 7
    store.fit()
    assert (len(store), store.tokens) == (0, 0)
    assert store.lookup("a", [1, 2, 3], limit=3)[1] == 0


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="budget"):
        PrefixStore(budget=-1)
    store = PrefixStore()
    with pytest.raises(ValueError, match="one column of states per token"):
        store.add("a", [1, 2, 3], states([1, 2]))
    assert len(store) == 0 and store.lookup("a", [1, 2], limit=2)[1] == 0
