"""The loss's log-probabilities with shared prefixes run once: the same values, entropies and
gradients as one plain forward of every whole row."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from agents.decoding import shared_prefixes
from trainers.algorithms.shared_prefix import eligible, shared_prefix_logps

PAD = 0
TEMPERATURE = 0.7


@pytest.fixture(scope="module")
def model(tiny_model):
    torch.manual_seed(0)
    loaded = AutoModelForCausalLM.from_pretrained(tiny_model)
    with torch.no_grad():  # random weights of a visible size: rounding differences stay small
        for parameter in loaded.parameters():
            parameter.normal_(0.0, 0.2)
    return loaded


def batch(prompts, completions, holes=()):
    """Left-padded prompts then right-padded completions, as TRL lays out a micro-batch; `holes`:
    (row, completion column) pairs masked out inside a completion (an env's own tokens)."""
    prompt_width = max(map(len, prompts))
    completion_width = max(map(len, completions))
    ids = torch.full((len(prompts), prompt_width + completion_width), PAD)
    mask = torch.zeros_like(ids)
    for i, (prompt, completion) in enumerate(zip(prompts, completions, strict=True)):
        ids[i, prompt_width - len(prompt) : prompt_width] = torch.tensor(prompt)
        mask[i, prompt_width - len(prompt) : prompt_width] = 1
        ids[i, prompt_width : prompt_width + len(completion)] = torch.tensor(completion)
        mask[i, prompt_width : prompt_width + len(completion)] = 1
    for row, column in holes:
        mask[row, prompt_width + column] = 0
    return ids, mask, completion_width


def plain_logps(model, ids, mask, keep, compute_entropy):
    """Every whole row through the model's own forward, each token at its column (as TRL's pass
    places them: a masked column inside a completion keeps its place), counted from the row's
    first token."""
    columns = torch.arange(ids.shape[1])
    first = torch.where(mask.bool(), columns, ids.shape[1]).min(1).values
    positions = (columns - first[:, None]).clamp(min=0)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits
    logits = logits[:, -keep - 1 : -1].float() / TEMPERATURE
    log_softmax = torch.log_softmax(logits, -1)
    valid = mask[:, -keep:].bool()
    logps = log_softmax.gather(-1, ids[:, -keep:, None]).squeeze(-1).masked_fill(~valid, 0)
    entropy = -(log_softmax.exp() * log_softmax).sum(-1).masked_fill(~valid, 0)
    return logps, entropy if compute_entropy else None


def rows(seed=0):
    """Rows as a multi-agent micro-batch holds them: two roles' instructions (20 and 18 shared
    tokens), each with its own problem tail; a row too short to share; completions of different
    lengths, one with a masked token inside."""
    generator = torch.Generator().manual_seed(seed)

    def tokens(n):
        return torch.randint(5, 200, (n,), generator=generator).tolist()

    solver, critic = tokens(20), tokens(18)
    prompts = [
        solver + tokens(7),
        solver + tokens(3),
        critic + tokens(12),
        solver + tokens(11),
        critic + tokens(2),
        tokens(9),
    ]
    completions = [tokens(n) for n in (6, 3, 8, 1, 5, 7)]
    return prompts, completions


def test_rows_sharing_a_prefix_are_grouped_and_the_rest_are_left_alone():
    prompts, _ = rows()
    groups = shared_prefixes(prompts)
    assert sorted((sorted(m), n) for m, n in groups) == [([0, 1, 3], 20), ([2, 4], 18)]
    # a prefix always leaves each row one token of its own
    assert shared_prefixes([[1] * 20, [1] * 20]) == [([0, 1], 19)]
    # keys keep rows apart (one adapter's rows with another's)
    assert shared_prefixes([[1] * 20, [1] * 20], keys=["a", "b"]) == []
    with pytest.raises(ValueError, match="1 keys for 2 sequences"):
        shared_prefixes([[1] * 20, [1] * 20], keys=["a"])


@pytest.mark.parametrize("max_rows", [None, 2])
def test_log_probabilities_and_entropies_match_a_plain_forward(model, max_rows):
    prompts, completions = rows()
    ids, mask, keep = batch(prompts, completions, holes=[(2, 3)])
    with torch.no_grad():
        expected, expected_entropy = plain_logps(model, ids, mask, keep, True)
        logps, entropy = shared_prefix_logps(
            model, ids, mask, keep, TEMPERATURE, compute_entropy=True, max_rows=max_rows
        )
    assert logps.shape == expected.shape == (len(prompts), keep)
    torch.testing.assert_close(logps, expected, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(entropy, expected_entropy, atol=1e-4, rtol=1e-4)
    assert bool((logps[~mask[:, -keep:].bool()] == 0).all())  # masked positions are 0, as TRL's


def test_gradients_match_a_plain_forward(model):
    prompts, completions = rows(seed=1)
    ids, mask, keep = batch(prompts, completions, holes=[(0, 2)])
    weights = torch.linspace(-1.0, 1.0, ids.shape[0])[:, None]  # advantages of both signs

    def gradients(compute):
        model.zero_grad()
        logps, _ = compute()
        (logps * weights).sum().backward()
        return {name: p.grad.clone() for name, p in model.named_parameters()}

    expected = gradients(lambda: plain_logps(model, ids, mask, keep, False))
    shared = gradients(lambda: shared_prefix_logps(model, ids, mask, keep, TEMPERATURE))
    assert expected.keys() == shared.keys()
    for name in expected:
        torch.testing.assert_close(shared[name], expected[name], atol=1e-4, rtol=1e-3, msg=name)
    # the prefixes were shared: the embedding of a prefix token gets each row's gradient
    assert any(shared[name].abs().sum() > 0 for name in shared)


def test_rows_without_any_shared_prefix_still_match(model):
    prompts = [[7, 8, 9], [10, 11, 12, 13], [14]]
    completions = [[20, 21], [22], [23, 24, 25]]
    ids, mask, keep = batch(prompts, completions)
    with torch.no_grad():
        expected, _ = plain_logps(model, ids, mask, keep, False)
        logps, entropy = shared_prefix_logps(model, ids, mask, keep, TEMPERATURE)
    torch.testing.assert_close(logps, expected, atol=1e-4, rtol=1e-4)
    assert entropy is None


def test_a_prompt_with_a_hole_is_refused_naming_the_row(model):
    prompts, completions = rows()
    ids, mask, keep = batch(prompts, completions)
    mask[3, 2 + (ids.shape[1] - keep) - len(prompts[3])] = 0  # inside row 3's prompt
    with pytest.raises(ValueError, match="row 3's prompt is not one run of tokens"):
        shared_prefix_logps(model, ids, mask, keep)


def test_eligible_models(model):
    assert eligible(model)
    assert not eligible(torch.nn.Linear(2, 2))
    wrapped = torch.nn.Module()
    wrapped.module = model  # a DDP-style wrapper: its forward would be bypassed
    assert not eligible(wrapped)
    model.gradient_checkpointing_enable()  # no past states under activation checkpointing
    try:
        assert not eligible(model)
    finally:
        model.gradient_checkpointing_disable()
    assert eligible(model)
