"""What the agent tests share besides fixtures: greedy generation arguments, a generate-call
counter and teacher-forced log-probabilities to compare sampled ones with."""

from __future__ import annotations

import pytest
import torch
from transformers import PreTrainedModel

from agents.base import GenerationArguments

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
