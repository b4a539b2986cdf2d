"""Every registered env (`envs.list_envs()`) played by SmolLM2-135M-Instruct through the rollout
engine, the way training and evaluation play them: one `HFPolicy` for every agent, decoded by
continuous batching (`agents.batching`, with the fused step), greedy, 2 problems, short replies.

Whatever the model says (it is seldom right at this size), each episode must end with every
agent of the env having played, and each turn's record must be exact: its prompt is the
observation through the model's chat template, its text decodes from its completion ids, each
token is the model's greedy choice with the log-probability one plain forward pass gives it, and
its reward is a finite number."""

from __future__ import annotations

import math

import pytest
import torch

import envs
from envs.roles import answer_roles, role_of
from tests.real_model.helpers import forward_logits
from trainers.rollout.engine import RolloutEngine

MAX_NEW = 28
PROBLEMS = 2
# small budgets: one round, two agents where the env takes a count
ENV_KWARGS = {
    "math/reflection-v0": {"rounds": 1},
    "math/debate-v0": {"rounds": 1, "num_agents": 2},
    "math/ensemble-v0": {"num_agents": 2},
    "math/tool-v0": {"rounds": 1},
}
LOGIT_TOL = (
    1e-3  # a greedy token may differ from the forward's argmax only at such a tie (0 measured)
)
LOGPROB_TOL = 1e-3  # cached batched decoding against one uncached forward (2.1e-5 measured)


def check_turn(turn, policy, eos_ids) -> None:
    """One turn's record against the model: prompt, text, tokens, log-probabilities, reward."""
    ids = turn.completion_ids
    assert turn.prompt_ids == policy.encode([turn.observation])[0], turn.agent
    assert 0 < len(ids) <= MAX_NEW and len(turn.logprobs) == len(ids)
    assert turn.text == policy.tokenizer.decode(ids, skip_special_tokens=True)
    ended = ids[-1] in eos_ids
    assert turn.finish_reason == ("stop" if ended else "length")
    assert ended or len(ids) == MAX_NEW
    assert not any(t in eos_ids for t in ids[:-1])  # nothing generated after an eos
    logits = forward_logits(policy.model, turn.prompt_ids, ids)
    best = logits.argmax(-1)
    chosen = logits.gather(1, torch.tensor(ids)[:, None]).squeeze(1)
    gap = logits.gather(1, best[:, None]).squeeze(1) - chosen
    assert gap.max() <= LOGIT_TOL, (turn.agent, gap.max().item())
    want = chosen - torch.logsumexp(logits, dim=-1)
    torch.testing.assert_close(torch.tensor(turn.logprobs), want, rtol=0, atol=LOGPROB_TOL)
    assert math.isfinite(turn.reward)


@pytest.mark.parametrize("env_id", envs.list_envs())
def test_the_model_plays_every_env_to_the_end(real_policy, env_id):
    """Two problems of `env_id`, continuously batched: episodes end with every agent played,
    each answering turn graded (``correct`` a bool in its info), every turn's record exact
    (`check_turn`), and finite returns."""
    kwargs = ENV_KWARGS.get(env_id, {})
    policy = real_policy(max_new_tokens=MAX_NEW)
    engine = RolloutEngine(env_id, policy, kwargs, num_envs=PROBLEMS)
    episodes = engine.run(engine.problem_ids(PROBLEMS), seed=0)
    assert "steps" in engine.last_batching  # continuous batching decoded them
    env = envs.make(env_id, **kwargs)
    answering = set(answer_roles(env))
    assert [(e.group, e.sample) for e in episodes] == [(g, 0) for g in range(PROBLEMS)]
    assert len({e.problem_id for e in episodes}) == PROBLEMS
    for episode in episodes:
        assert {t.agent for t in episode.turns} == set(env.possible_agents)
        assert [t.index for t in episode.turns] == list(range(len(episode.turns)))
        for turn in episode.turns:
            check_turn(turn, policy, policy.eos_ids)
            if role_of(turn.agent) in answering:
                assert isinstance(turn.info.get("correct"), bool), (turn.agent, turn.info)
        assert all(math.isfinite(r) for r in episode.returns.values())
    assert engine.last_batching["generated"] == sum(
        len(t.completion_ids) for e in episodes for t in e.turns
    )
