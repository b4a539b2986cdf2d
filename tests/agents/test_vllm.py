"""`VLLMServerPolicy` against a fake server client (no vLLM here), and its selection in GRPO."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from agents.base import GenerationArguments
from agents.hf import HFPolicy
from agents.vllm import VLLMServerPolicy


class FakeClient:
    """Answers like TRL's VLLMClient.generate: scripted completions, one logprob per token."""

    def __init__(self, completions: list[list[int]]) -> None:
        self.completions = completions
        self.calls: list[dict] = []

    def generate(self, prompts, n, temperature, top_p, top_k, max_tokens, logprobs, **kwargs):
        self.calls.append(
            {"prompts": prompts, "n": n, "temperature": temperature, "max_tokens": max_tokens}
        )
        rows = self.completions[: len(prompts)]
        return {
            "prompt_ids": prompts,
            "completion_ids": rows,
            "logprobs": [[[-0.25 * (k + 1)] for k in range(len(r))] for r in rows],
        }


def test_server_generations_match_local_prompt_ids_and_cut_at_eos(model, tokenizer, observations):
    args = GenerationArguments(max_new_tokens=6)
    eos = tokenizer.eos_token_id
    text_ids = tokenizer("42 apples", add_special_tokens=False)["input_ids"]
    client = FakeClient([[*text_ids, eos], list(range(300, 306)), [eos], [*text_ids]])
    policy = VLLMServerPolicy(model, tokenizer, args, client=client)
    generations = policy.generate(observations)
    local = HFPolicy(model, tokenizer, args)
    assert [g.prompt_ids for g in generations] == local.encode(observations)
    assert client.calls[0]["prompts"] == local.encode(observations)
    assert client.calls[0]["max_tokens"] == 6 and client.calls[0]["n"] == 1
    first, full, empty, short = generations
    assert first.completion_ids == [*text_ids, eos] and first.text == "42 apples"
    assert first.finish_reason == "stop"
    assert first.logprobs == pytest.approx([-0.25 * (k + 1) for k in range(len(text_ids) + 1)])
    assert full.finish_reason == "length" and len(full.completion_ids) == 6
    assert empty.completion_ids == [eos] and empty.text == ""
    assert short.finish_reason == "stop"  # ended before max_tokens without eos: the server stopped


def test_greedy_asks_the_server_for_temperature_zero(model, tokenizer, observations):
    client = FakeClient([[1]] * 4)
    policy = VLLMServerPolicy(
        model, tokenizer, GenerationArguments(max_new_tokens=4, do_sample=False), client=client
    )
    policy.generate(observations[:2])
    assert client.calls[0]["temperature"] == 0.0


def test_bad_server_answers_raise_clearly(model, tokenizer, observations):
    class Short(FakeClient):
        def generate(self, prompts, **kwargs):
            out = super().generate(prompts, **kwargs)
            out["logprobs"][0] = out["logprobs"][0][:-1]
            return out

    policy = VLLMServerPolicy(model, tokenizer, client=Short([[5, 6]] * 4))
    with pytest.raises(RuntimeError, match="1 logprobs for 2 tokens"):
        policy.generate(observations[:1])
    with pytest.raises(TypeError, match="no generate"):
        VLLMServerPolicy(model, tokenizer, client=object())


def test_grpo_rollout_samples_through_the_server_when_trl_uses_vllm(model, tokenizer):
    from trainers.algorithms.grpo import rollout_policy

    client = FakeClient([[1]])
    args = SimpleNamespace(vllm_mode="server")
    trainer = SimpleNamespace(
        processing_class=tokenizer,
        use_vllm=True,
        args=args,
        vllm_generation=SimpleNamespace(vllm_client=client),
    )
    gen = GenerationArguments(max_new_tokens=4)
    policy = rollout_policy(trainer, model, gen)
    assert isinstance(policy, VLLMServerPolicy) and policy.client is client
    trainer.use_vllm = False
    assert type(rollout_policy(trainer, model, gen)) is HFPolicy
    trainer.use_vllm, args.vllm_mode = True, "colocate"
    with pytest.raises(ValueError, match="vLLM server only"):
        rollout_policy(trainer, model, gen)


def test_the_engine_samples_server_policies_on_the_server_not_the_local_copy(model, tokenizer):
    """A VLLMServerPolicy has every member of a stepwise policy (it is an HFPolicy), but its
    replies come from the server: the rollout engine must not decode its rows locally."""
    from agents.base import as_stepwise
    from trainers.rollout.engine import RolloutEngine

    eos = tokenizer.eos_token_id
    client = FakeClient([[eos]] * 64)
    policy = VLLMServerPolicy(
        model, tokenizer, GenerationArguments(max_new_tokens=4), client=client
    )
    assert as_stepwise(policy) is None and as_stepwise(HFPolicy(model, tokenizer)) is not None
    engine = RolloutEngine("math/solve-v0", policy, {"task": "arithmetic"}, num_envs=2)
    episodes = engine.run(engine.problem_ids(2))
    assert len(episodes) == 2 and client.calls, "the server was never asked"
    with pytest.raises(ValueError, match="continuous=True"):
        RolloutEngine("math/solve-v0", policy, {"task": "arithmetic"}, continuous=True).run(
            engine.problem_ids(1)
        )
