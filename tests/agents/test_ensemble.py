"""Majority-vote and hidden-state ensembles, and the ensemble factory."""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch

from agents.base import GenerationArguments, Policy
from agents.ensemble import MajorityVoteEnsemble, Vote, majority, make_ensemble
from agents.hf import HFPolicy
from agents.hidden_state import EnsembleGeneration, HiddenStateEnsemble
from agents.scripted import ScriptedPolicy
from tests.agents.helpers import GREEDY, teacher_forced_logprobs

A, B = "You are a careful math solver.", "You are a critic. Check every step."
ARGS = dataclasses.replace(GREEDY, max_new_tokens=20)


def boxed(text: str) -> str | None:
    match = re.search(r"\\boxed\{([^}]*)\}", text)
    return match.group(1).strip() if match else None


def ids(generations) -> list[list[int]]:
    return [g.completion_ids for g in generations]


# --- majority vote --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answers", "expected"),
    [
        (["1", "2", "2"], ("2", 2)),  # plain majority
        (["1", "2", "1", "2"], ("1", 2)),  # tie: the answer seen first
        ([None, "3", None], ("3", 1)),  # abstentions do not vote
        ([None, None], (None, 0)),  # nobody answered
    ],
)
def test_majority(answers, expected) -> None:
    assert majority(answers) == expected


def test_majority_vote_ensemble_with_scripted_policy() -> None:
    by_instruction = {"i0": "\\boxed{4}", "i1": "I think \\boxed{ 5 }", "i2": "so \\boxed{5}."}
    policy = ScriptedPolicy(lambda obs: by_instruction[obs["instruction"]] + obs["prompt"])
    ensemble = MajorityVoteEnsemble(policy, ["i0", "i1", "i2"], vote_fn=boxed)
    assert isinstance(ensemble, Policy)
    observations = [{"instruction": "env's", "prompt": " p0"}, {"instruction": "", "prompt": " p1"}]
    votes = ensemble.vote(observations)
    assert len(policy.history) == 6  # one batched call over N x K variants
    assert [o["instruction"] for o in policy.history] == ["i0", "i1", "i2"] * 2
    assert votes[0] == Vote(
        text="I think \\boxed{ 5 } p0",  # the first response voting for the winner
        answer="5",
        count=2,
        answers=["4", "5", "5"],
        responses=["\\boxed{4} p0", "I think \\boxed{ 5 } p0", "so \\boxed{5}. p0"],
    )
    assert ensemble.act(observations[1:]) == ["I think \\boxed{ 5 } p1"]


def test_majority_vote_all_abstain_returns_first_response() -> None:
    ensemble = MajorityVoteEnsemble(ScriptedPolicy(["no", "idea"]), ["a", "b"], vote_fn=boxed)
    (vote,) = ensemble.vote([{"prompt": "p"}])
    assert (vote.text, vote.answer, vote.count) == ("no", None, 0)


def test_majority_vote_validates() -> None:
    with pytest.raises(ValueError, match="at least one"):
        MajorityVoteEnsemble(ScriptedPolicy(["x"]), [], vote_fn=boxed)

    class Broken:
        def act(self, observations):
            return ["x"]

    with pytest.raises(ValueError, match="one text per observation"):
        MajorityVoteEnsemble(Broken(), ["a", "b"], vote_fn=boxed).act([{"prompt": "p"}])


# --- hidden-state ensemble ------------------------------------------------------------------


def test_k1_equals_plain_greedy_decoding(model, tokenizer, observations) -> None:
    plain = HFPolicy(model, tokenizer, ARGS, system_prompt_override=A).generate(observations)
    ensemble = HiddenStateEnsemble(model, tokenizer, [A], generation_args=ARGS)
    out = ensemble.generate(observations)
    assert ids(out) == ids(plain)
    for p, e in zip(plain, out, strict=True):
        assert e.prompt_ids == p.prompt_ids
        assert e.text == p.text and e.finish_reason == p.finish_reason
        assert e.logprobs == pytest.approx(p.logprobs, abs=1e-4)


def test_identical_variants_equal_plain_greedy(model, tokenizer, observations) -> None:
    plain = HFPolicy(model, tokenizer, ARGS, system_prompt_override=A).generate(observations)
    ensemble = HiddenStateEnsemble(model, tokenizer, [A, A, A], generation_args=ARGS)
    assert ids(ensemble.generate(observations)) == ids(plain)


def test_weighted_one_hot_selects_a_variant(model, tokenizer, observations) -> None:
    only_a = HFPolicy(model, tokenizer, ARGS, system_prompt_override=A).generate(observations)
    only_b = HFPolicy(model, tokenizer, ARGS, system_prompt_override=B).generate(observations)
    assert ids(only_a) != ids(only_b)

    def weighted(weights):
        ensemble = HiddenStateEnsemble(
            model, tokenizer, [A, B], weights=weights, mode="weighted", generation_args=ARGS
        )
        return ids(ensemble.generate(observations))

    assert weighted([1.0, 0.0]) == ids(only_a)
    assert weighted([0.0, 3.0]) == ids(only_b)  # weights are normalized
    mean = HiddenStateEnsemble(model, tokenizer, [A, B], mode="mean", generation_args=ARGS)
    mean_ids = ids(mean.generate(observations))
    assert weighted([2.0, 2.0]) == mean_ids
    assert mean_ids not in (ids(only_a), ids(only_b))  # the average is neither variant
    assert weighted([0.9, 0.1]) != mean_ids


def test_hidden_state_logprobs_are_the_combined_distribution(model, tokenizer, observations):
    ensemble = HiddenStateEnsemble(model, tokenizer, [A, B], generation_args=ARGS)
    g = ensemble.generate(observations[:1])[0]
    # Recompute: the mean of both variants' final hidden states, decoded through lm_head.
    states = []
    for prompt in g.variant_prompt_ids:
        full = torch.tensor([prompt + g.completion_ids])
        with torch.no_grad():
            hidden = model.get_decoder()(full).last_hidden_state[0]
        states.append(hidden[len(prompt) - 1 : -1])
    logits = model.get_output_embeddings()(torch.stack(states).mean(0))
    expected = torch.log_softmax(logits, -1).gather(1, torch.tensor(g.completion_ids)[:, None])
    torch.testing.assert_close(torch.tensor(g.logprobs), expected.squeeze(1), atol=1e-4, rtol=0)
    with pytest.raises(AssertionError):  # and not either variant's own distribution
        torch.testing.assert_close(
            torch.tensor(g.logprobs),
            teacher_forced_logprobs(model, g.variant_prompt_ids[0], g.completion_ids),
        )


def test_batched_problems_equal_one_at_a_time(model, tokenizer, observations, monkeypatch):
    ensemble = HiddenStateEnsemble(model, tokenizer, [A, B], generation_args=ARGS)
    batched = ensemble.generate(observations)
    assert ids(batched) == [ids(ensemble.generate([o]))[0] for o in observations]
    chunked = HiddenStateEnsemble(
        model, tokenizer, [A, B], generation_args=dataclasses.replace(ARGS, max_batch_size=4)
    )
    assert ids(chunked.generate(observations)) == ids(batched)


def test_ensemble_generation_records(model, tokenizer, observations) -> None:
    ensemble = HiddenStateEnsemble(model, tokenizer, [A, B], generation_args=ARGS)
    assert ensemble.num_variants == 2
    g = ensemble.generate(observations[:1])[0]
    assert isinstance(g, EnsembleGeneration)
    a_prompt = HFPolicy(model, tokenizer, ARGS, system_prompt_override=A).encode(observations[:1])
    b_prompt = HFPolicy(model, tokenizer, ARGS, system_prompt_override=B).encode(observations[:1])
    assert g.variant_prompt_ids == (a_prompt[0], b_prompt[0])
    assert g.prompt_ids == a_prompt[0]
    variants = g.variants()
    assert [v.prompt_ids for v in variants] == [a_prompt[0], b_prompt[0]]
    assert all(v.completion_ids == g.completion_ids for v in variants)
    assert ensemble.act(observations[:1]) == [g.text]


def test_hidden_state_sampling_is_seeded_and_stops(model, tokenizer, observations) -> None:
    args = GenerationArguments(max_new_tokens=12, temperature=0.8, top_k=50, top_p=0.95, seed=3)

    def sample() -> list[list[int]]:
        ensemble = HiddenStateEnsemble(model, tokenizer, [A, B], generation_args=args)
        return ids(ensemble.generate(observations))

    first = sample()
    assert first == sample()
    assert first != ids(
        HiddenStateEnsemble(model, tokenizer, [A, B], generation_args=ARGS).generate(observations)
    )
    reference = HiddenStateEnsemble(model, tokenizer, [A, B], generation_args=ARGS)
    free = reference.generate(observations[:1])[0]
    stop = free.text[5:8]
    stopping = dataclasses.replace(ARGS, stop_strings=[stop])
    cut = HiddenStateEnsemble(model, tokenizer, [A, B], generation_args=stopping)
    g = cut.generate(observations[:1])[0]
    assert g.text == free.text[: free.text.find(stop)]
    assert g.finish_reason == "stop"
    assert g.completion_ids == free.completion_ids[: len(g.completion_ids)]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mode": "max"}, "mode='max'"),
        ({"instructions": []}, "at least one"),
        ({"weights": [1, 1]}, "mode='weighted'"),  # weights need the weighted mode
        ({"mode": "weighted"}, "2 expected, got None"),
        ({"mode": "weighted", "weights": [1.0]}, "2 expected, got 1"),
        ({"mode": "weighted", "weights": [1.0, -1.0]}, "non-negative"),
        ({"mode": "weighted", "weights": [0.0, 0.0]}, "positive sum"),
    ],
)
def test_hidden_state_validates(model, tokenizer, kwargs, match) -> None:
    kwargs = {"instructions": [A, B], **kwargs}
    with pytest.raises(ValueError, match=re.escape(match) if "(" in match else match):
        HiddenStateEnsemble(model, tokenizer, **kwargs)


# --- factory --------------------------------------------------------------------------------


def test_make_ensemble(model, tokenizer, observations, monkeypatch) -> None:
    vote = make_ensemble(
        "majority_vote", policy=ScriptedPolicy(["\\boxed{1}"]), instructions=[A], vote_fn=boxed
    )
    assert isinstance(vote, MajorityVoteEnsemble)
    mean = make_ensemble("hidden_state_mean", model=model, tokenizer=tokenizer, instructions=[A])
    weighted = make_ensemble(
        "hidden_state_weighted",
        model=model,
        tokenizer=tokenizer,
        instructions=[A, B],
        weights=[1, 3],
    )
    assert (mean.mode, weighted.mode) == ("mean", "weighted")
    assert weighted.weights.tolist() == [0.25, 0.75]
    with pytest.raises(ValueError, match="Did you mean 'majority_vote'"):
        make_ensemble("majority_votes")
