"""Length-grouped micro-batches: the same rows and the same update, less padding."""

from __future__ import annotations

import pytest
import torch

from agents.decoding import length_chunks
from tests.trainers.helpers import grpo_config, shaped
from trainers.algorithms.grpo import build_grpo_trainer
from trainers.algorithms.microbatch import (
    chunked_forward,
    groupable,
    regroup_by_length,
    silent_rows,
    skips_silent_rows,
    trim_padding,
)

PAD = 0


def micro_batch(rows):
    """TRL-shaped micro-batch from (prompt tokens, completion tokens, advantage, tag) rows, padded
    to a prompt width of 6 (left) and a completion width of 5 (right)."""
    prompt_ids = torch.full((len(rows), 6), PAD)
    completion_ids = torch.full((len(rows), 5), PAD)
    for i, (prompt, completion, _, _) in enumerate(rows):
        prompt_ids[i, 6 - len(prompt) :] = torch.tensor(prompt)
        completion_ids[i, : len(completion)] = torch.tensor(completion)
    completion_mask = (completion_ids != PAD).int()
    return {
        "prompt_ids": prompt_ids,
        "prompt_mask": (prompt_ids != PAD).int(),
        "completion_ids": completion_ids,
        "completion_mask": completion_mask,
        "old_per_token_logps": completion_ids.float() / -10,
        "advantages": torch.tensor([r[2] for r in rows]),
        "tags": [r[3] for r in rows],
        "num_items_in_batch": completion_mask.sum(),
        "ref_per_token_logps": None,
    }


def unpadded_rows(batch):
    """Each row as (prompt tokens, completion tokens, logps, advantage, tag), padding dropped."""
    out = []
    for i in range(len(batch["tags"])):
        prompt = batch["prompt_ids"][i][batch["prompt_mask"][i].bool()].tolist()
        keep = batch["completion_mask"][i].bool()
        completion = batch["completion_ids"][i][keep].tolist()
        logps = batch["old_per_token_logps"][i][keep].tolist()
        out.append((prompt, completion, logps, float(batch["advantages"][i]), batch["tags"][i]))
    return out


def test_regrouping_keeps_every_row_and_cuts_each_micro_batch_to_its_own_rows():
    rows = [
        ([1, 2, 3, 4, 5, 6], [7, 8, 9, 9, 9], 0.5, "long"),
        ([3], [4], -1.0, "short"),
        ([5, 6, 7, 8], [9, 9, 9], 0.25, "mid"),
        ([2, 2], [3, 3], 1.0, "short2"),
    ]
    batches = [micro_batch(rows[:2]), micro_batch(rows[2:])]
    grouped, skipped = regroup_by_length(batches)
    assert skipped == 0
    assert len(grouped) == 2
    before = sorted(r for b in batches for r in unpadded_rows(b))
    after = sorted(r for b in grouped for r in unpadded_rows(b))
    assert after == before  # the same rows, each still aligned with its logps and advantage
    assert [b["tags"] for b in grouped] == [["long", "mid"], ["short2", "short"]]
    long, short = grouped
    assert long["prompt_ids"].shape[1] == 6 and long["completion_ids"].shape[1] == 5
    assert short["prompt_ids"].shape[1] == 2 and short["completion_ids"].shape[1] == 2
    assert short["old_per_token_logps"].shape == short["completion_mask"].shape
    assert short["prompt_mask"].shape == short["prompt_ids"].shape
    total = batches[0]["num_items_in_batch"]
    assert all(torch.equal(b["num_items_in_batch"], total) for b in grouped)
    assert all(b["ref_per_token_logps"] is None for b in grouped)


def test_rows_of_zero_advantage_are_left_out_but_for_the_shortest_that_keep_batches_equal():
    rows = [
        ([1, 2, 3, 4, 5, 6], [7, 8, 9, 9, 9], 0.0, "long silent"),
        ([3], [4], 0.0, "shortest silent"),
        ([5, 6, 7, 8], [9, 9, 9], 0.25, "mid"),
        ([2, 2], [3, 3], 0.0, "short silent"),
        ([2, 2, 2], [3, 3], -1.0, "short"),
        ([4, 4, 4, 4], [3, 3, 3], 0.0, "mid silent"),
    ]
    batches = [micro_batch(rows[:3]), micro_batch(rows[3:])]
    grouped, skipped = regroup_by_length(batches, skip_silent=True)
    # two rows carry a signal: kept, in two micro-batches of one row each
    assert skipped == 4 and [b["tags"] for b in grouped] == [["mid"], ["short"]]
    total = batches[0]["num_items_in_batch"]  # the loss's normaliser still counts every row
    assert all(torch.equal(b["num_items_in_batch"], total) for b in grouped)
    batches = [micro_batch(rows[:2]), micro_batch(rows[3:4] + rows[5:])]
    grouped, skipped = regroup_by_length(batches, skip_silent=True)
    assert skipped == 2  # no signal at all: the two shortest rows, one micro-batch each
    assert sorted(tag for b in grouped for tag in b["tags"]) == ["short silent", "shortest silent"]
    per_token = micro_batch(rows[:2])  # per-token advantages: silent where every token is 0
    per_token["advantages"] = torch.zeros(2, 5)
    per_token["advantages"][0, 4] = 0.5
    assert silent_rows(per_token).tolist() == [False, True]
    per_token["advantages"][0, 4] = 0.0
    per_token["advantages"][1, 3] = 0.5  # past the row's completion: masked, so still silent
    assert silent_rows(per_token).tolist() == [True, True]


def test_trim_padding_leaves_a_full_batch_and_an_empty_one_well_formed():
    full = micro_batch([([1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5], 0.0, "a")])
    assert all(torch.equal(v, full[k]) for k, v in trim_padding(full).items() if torch.is_tensor(v))
    empty = micro_batch([([], [], 0.0, "pad row")])
    trimmed = trim_padding(empty)
    assert trimmed["prompt_ids"].shape == (1, 1) and trimmed["completion_ids"].shape == (1, 1)
    with pytest.raises(TypeError, match="expected a tensor, a list or None"):
        regroup_by_length([{**full, "odd": "text"}])
    with pytest.raises(ValueError, match="not one per row"):
        regroup_by_length([{**full, "pixel_values": torch.zeros(4, 3)}])


def test_only_configurations_whose_update_cannot_change_are_regrouped(tmp_path):
    args = grpo_config(tmp_path, gradient_accumulation_steps=2)
    assert groupable(args, num_iterations=1)
    assert not groupable(args, num_iterations=2)
    assert not groupable(grpo_config(tmp_path, gradient_accumulation_steps=2, loss_type="bnpo"), 1)
    assert not groupable(
        grpo_config(tmp_path, gradient_accumulation_steps=1, steps_per_generation=2), 1
    )


def sgd_step(tiny_model, out, config=None, reward=shaped, **trainer_kwargs):
    """One SGD step (lr 1: the update is minus the gradient) of the reflection trainer built with
    `trainer_kwargs`; returns the trainer and each parameter's update."""
    trainer = build_grpo_trainer(
        tiny_model,
        "math/reflection-v0",
        {"rounds": 1},
        grpo_config(
            out,
            gradient_accumulation_steps=3,
            optim="sgd",
            learning_rate=1.0,
            max_grad_norm=0.0,
            **(config or {}),
        ),
        train_problems=3,
        num_envs=8,
        **trainer_kwargs,
    )
    trainer.reward_funcs[0] = reward
    start = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    trainer.train()
    return trainer, {k: v.detach() - start[k] for k, v in trainer.model.named_parameters()}


def assert_same_update(update, expected):
    """The same update per parameter (up to float rounding), and one that moved something."""
    moved = 0
    for name, delta in expected.items():
        torch.testing.assert_close(update[name], delta, rtol=1e-4, atol=1e-6)
        moved += bool(delta.abs().max() > 1e-6)
    assert moved  # the step did something to compare


def test_grouped_training_gives_the_same_update_on_narrower_micro_batches(tiny_model, tmp_path):
    """One SGD step with and without regrouping."""
    deltas, widths = {}, {}
    for grouped in (False, True):
        trainer, deltas[grouped] = sgd_step(
            tiny_model, tmp_path / str(grouped), length_grouped=grouped
        )
        assert trainer.length_grouped is grouped
        widths[grouped] = [
            b["prompt_ids"].shape[1] + b["completion_ids"].shape[1]
            for b in trainer._buffered_inputs
        ]
    assert sum(widths[True]) < sum(widths[False])
    assert len(set(widths[False])) == 1  # TRL pads the whole generation batch to one width
    assert_same_update(deltas[True], deltas[False])


def test_shared_prefix_passes_give_the_same_update(tiny_model, tmp_path, monkeypatch):
    """One SGD step with the loss's log-probabilities from shared-prefix passes and from TRL's
    own (`trainers.algorithms.shared_prefix`); the shared pass did run."""
    from trainers.algorithms import microbatch

    calls = []
    original = microbatch.shared_prefix_logps

    def counted(*args, **kwargs):
        calls.append(args[1].shape)
        return original(*args, **kwargs)

    monkeypatch.setattr(microbatch, "shared_prefix_logps", counted)
    deltas = {}
    for shared in (False, True):
        trainer, deltas[shared] = sgd_step(
            tiny_model,
            tmp_path / str(shared),
            {"gradient_checkpointing": False},
            shared_prefix=shared,
        )
        assert trainer.shared_prefix is shared
        assert bool(calls) is shared  # the shared pass ran for every micro-batch, and only then
    assert len(calls) == 3
    assert_same_update(deltas[True], deltas[False])


def test_leaving_out_rows_of_zero_advantage_gives_the_same_update(tiny_model, tmp_path):
    """One SGD step with and without the silent rows: the rows of about half the prompts (those
    of odd length) get one reward whatever they say, so their advantages are 0."""

    def half_silent(prompts, completion_ids, **kwargs):
        return [
            0.0 if len(str(p)) % 2 else len(set(c)) / 10
            for p, c in zip(prompts, completion_ids, strict=True)
        ]

    deltas, skipped = {}, {}
    for skip in (False, True):
        trainer, deltas[skip] = sgd_step(
            tiny_model, tmp_path / str(skip), skip_silent_rows=skip, reward=half_silent
        )
        assert trainer.skip_silent is skip
        skipped[skip] = trainer.state.log_history[0].get("silent_rows_skipped")
    assert skipped[False] is None and skipped[True] > 0
    assert_same_update(deltas[True], deltas[False])
    bnpo = grpo_config(tmp_path, loss_type="bnpo")  # a per-micro-batch normaliser: kept
    assert not skips_silent_rows(bnpo, beta=0.0)
    assert not skips_silent_rows(grpo_config(tmp_path), beta=0.04)  # a KL term: kept
    assert skips_silent_rows(grpo_config(tmp_path), beta=0.0)


def test_length_chunks_split_only_where_padding_is_worth_a_forward_call():
    # two long rows and two short ones: two chunks, longest first
    assert length_chunks([100, 10, 100, 10], [5, 5, 5, 5]) == [[0, 2], [1, 3]]
    # near-equal rows: one chunk (a split would save under CHUNK_SAVING of the cells)
    assert length_chunks([50, 49, 50, 48], [5, 5, 5, 5]) == [[0, 2, 1, 3]]
    assert length_chunks([9, 3, 6], [1, 1, 1], max_rows=1) == [[0], [2], [1]]
    # a long completion counts as a long prompt does
    assert length_chunks([10, 10, 10, 10], [90, 2, 90, 2]) == [[0, 2], [1, 3]]
    assert length_chunks([], []) == []
    many = length_chunks([5] * 300, [5] * 300)  # one chunk would do, but a chunk is bounded
    assert [len(c) for c in many] == [256, 44]
    assert sorted(i for c in many for i in c) == list(range(300))
    with pytest.raises(ValueError, match="3 prompt lengths but 2 completion lengths"):
        length_chunks([1, 2, 3], [1, 2])


def test_chunked_forward_gives_every_token_the_log_probability_of_one_padded_pass(tiny_model):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model).eval()
    widths = []

    def forward(input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy=False):
        widths.append(tuple(input_ids.shape))
        logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
        logits = logits[:, -logits_to_keep - 1 : -1].log_softmax(-1)
        logps = logits.gather(-1, input_ids[:, -logits_to_keep:, None]).squeeze(-1)
        entropy = -(logits.exp() * logits).sum(-1) if compute_entropy else None
        return logps, entropy, None

    generator = torch.Generator().manual_seed(0)
    vocab = model.config.vocab_size
    prompts = [30, 4, 28, 5, 3]
    completions = [6, 2, 5, 12, 1]
    prompt_ids = torch.zeros((5, 30), dtype=torch.long)
    completion_ids = torch.zeros((5, 12), dtype=torch.long)
    for i, (p, c) in enumerate(zip(prompts, completions, strict=True)):
        prompt_ids[i, 30 - p :] = torch.randint(4, vocab, (p,), generator=generator)
        completion_ids[i, :c] = torch.randint(4, vocab, (c,), generator=generator)
    ids = torch.cat([prompt_ids, completion_ids], 1)
    mask = (ids != 0).long()
    completion_mask = mask[:, 30:].bool()
    with torch.no_grad():
        whole = forward(ids, mask, 12, None, compute_entropy=True)
        widths.clear()
        logps, entropies, aux = chunked_forward(forward, ids, mask, 12, None, compute_entropy=True)
    assert aux is None and logps.shape == entropies.shape == (5, 12)
    torch.testing.assert_close(logps[completion_mask], whole[0][completion_mask])
    torch.testing.assert_close(entropies[completion_mask], whole[1][completion_mask])
    assert len(widths) > 1
    assert sum(rows * width for rows, width in widths) < 5 * 42  # fewer cells than one pass
