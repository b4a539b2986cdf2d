"""What the real-model tests share besides fixtures: the catalog model's name, the prompts they
play (the envs' own observations), and the model's logits and log-probabilities computed by one
plain forward pass (no cache, no batcher), the reference the stack's decoding is checked
against."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

import envs

NAME = "smollm2-135m-instruct"
FETCH = f"mathteams models get {NAME}"


def solve_observations(count: int, env_id: str = "math/solve-v0") -> list[dict[str, str]]:
    """The first turn's observations of the env's first `count` problems (distinct questions
    of its default task), exactly as the env hands them to its agent."""
    return [observation for observation, _ in solve_problems(count, env_id)]


def solve_problems(count: int, env_id: str = "math/solve-v0") -> list[tuple[dict[str, str], str]]:
    """`solve_observations` with each problem's reference answer."""
    env = envs.make(env_id)
    source = env.unwrapped.task.source
    problems = []
    for index in range(count):
        env.reset(options={"problem_id": source[index]["id"]})
        problems.append((dict(env.observe(env.agent_selection)), str(source[index]["answer"])))
    env.close()
    return problems


@torch.no_grad()
def forward_logits(model: Any, prompt_ids: Sequence[int], completion_ids: Sequence[int]):
    """The logits that predicted each of `completion_ids` after `prompt_ids`, from one forward
    pass of the whole sequence (completion tokens x vocab, float32)."""
    ids = torch.tensor([list(prompt_ids) + list(completion_ids)])
    logits = model(ids).logits[0, len(prompt_ids) - 1 : -1]
    return logits.float()


def forward_logprobs(model: Any, prompt_ids: Sequence[int], completion_ids: Sequence[int]):
    """Log-probabilities (temperature 1) of `completion_ids` after `prompt_ids`, from one
    forward pass: what the records' sampled log-probabilities must equal."""
    logp = torch.log_softmax(forward_logits(model, prompt_ids, completion_ids), dim=-1)
    return logp.gather(1, torch.tensor(list(completion_ids))[:, None]).squeeze(1)
