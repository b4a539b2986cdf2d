"""What the agent tests share besides fixtures: greedy generation arguments, a generate-call
counter, teacher-forced log-probabilities to compare sampled ones with, and a policy that offers
stepwise decoding without being an `HFPolicy`."""

from __future__ import annotations

import pytest
import torch
from transformers import PreTrainedModel

from agents.base import GenerationArguments
from agents.hf import HFPolicy

GREEDY = GenerationArguments(max_new_tokens=16, do_sample=False)


def count_generate_calls(model: PreTrainedModel, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Wraps model.generate to record the batch size of every call."""
    calls: list[int] = []
    original = model.generate

    def wrapped(*args, **kwargs):
        calls.append(kwargs["input_ids"].shape[0])
        return original(*args, **kwargs)

    monkeypatch.setattr(model, "generate", wrapped)
    return calls


def teacher_forced_logprobs(model, prompt_ids, completion_ids, temperature=1.0) -> torch.Tensor:
    """Log-probabilities of `completion_ids` after `prompt_ids` from one forward pass."""
    ids = torch.tensor([prompt_ids + completion_ids])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt_ids) - 1 : -1].float()
    logp = torch.log_softmax(logits / temperature, dim=-1)
    return logp.gather(1, torch.tensor(completion_ids)[:, None]).squeeze(1)


class Stepwise:
    """Not an `HFPolicy`: a policy offering stepwise decoding (`agents.base.StepwisePolicy`) by
    handing over another policy's model, tokenizer, settings, prompts and records."""

    def __init__(self, inner: HFPolicy) -> None:
        self.inner = inner
        self.model, self.tokenizer = inner.model, inner.tokenizer
        self.generation_args, self.eos_ids = inner.generation_args, inner.eos_ids
        self.adapter_name = None

    def act(self, observations):
        return self.inner.act(observations)

    def generate(self, observations):
        return self.inner.generate(observations)

    def encode(self, observations):
        return self.inner.encode(observations)

    def next_seed(self):
        return self.inner.next_seed()

    def build_generations(self, prompt_ids, completions, logprobs):
        return self.inner.build_generations(prompt_ids, completions, logprobs)
