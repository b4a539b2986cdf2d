"""Turn credit without length bias (issue 43, item 4; verl RFC #7244).

A synthetic stop/continue env whose policy sets the episode's length, with a known optimal policy,
drives the project's real GRPO advantage path: `rows_from_episodes` (one row per turn, groups per
(problem, agent, round) slot, padding rows with reward None for the turns an episode never
reached) and TRL's group normalisation (`trl_advantages`, the formula of `GRPOTrainer`, checked
against TRL's source below) with TRL's default loss weighting ("dapo": every trainable token of
the generation batch weighs the same). Each estimator's expected gradient is compared with the
exact gradient of the expected episode return (enumeration), and a few hundred tabular gradient
steps show where it leads.

The env (a critic that accepts or asks for one more revision, `stop_on_accept`): turn t = 0..K-1
stops ("accept": the answer stands, reward 1 with probability ``Q_STOP[t]``) or continues (a
revision; reward 1 with probability ``P_MORE``, an intermediate reward as the RFC's); continuing
at the last turn ends the episode with the last revision, whose score (probability ``Q_LAST``)
lands on that turn, as a team reward lands on an agent's last turn. Backward induction: the
optimum continues at t = 0 and 1 and stops at t = 2 (expected return 0.95); a policy credited
with its own turn's reward only stops at once (0.2).
"""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
import torch
from trl import GRPOTrainer
from trl.trainer.utils import nanstd

from trainers.algorithms.rows import rows_from_episodes, slot_prompt
from trainers.rollout.records import Episode, Turn

K = 3
Q_STOP = (0.2, 0.7, 0.75)  # P(answer right) when accepted at turn t
Q_LAST = 0.6  # the revision after the last turn (over-revising breaks answers)
P_MORE = 0.1  # the intermediate reward of a turn that continues
STOP, MORE = 1, 2  # the one completion token of each action
G, PROBLEMS = 8, 16  # GRPO's group size, problems per generation batch


def stop_probs(theta: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-theta))


def expected_return(theta: torch.Tensor) -> torch.Tensor:
    """The exact expected return of the tabular policy pi(stop | t) = sigmoid(theta_t)."""
    stop = torch.sigmoid(theta)
    reach, total = torch.ones((), dtype=theta.dtype), torch.zeros((), dtype=theta.dtype)
    for t in range(K):
        more = P_MORE + (Q_LAST if t == K - 1 else 0.0)
        total = total + reach * (stop[t] * Q_STOP[t] + (1 - stop[t]) * more)
        reach = reach * (1 - stop[t])
    return total


def true_gradient(theta: np.ndarray) -> np.ndarray:
    x = torch.tensor(theta, dtype=torch.float64, requires_grad=True)
    expected_return(x).backward()
    return x.grad.numpy()


def optimum() -> tuple[tuple[bool, ...], float]:
    """Backward induction: whether the optimum stops at each turn, and its expected return."""
    value, stops = P_MORE + Q_LAST, []
    for t in reversed(range(K)):
        stops.append(Q_STOP[t] >= P_MORE + (Q_LAST if t == K - 1 else value))
        value = max(Q_STOP[t], P_MORE + (Q_LAST if t == K - 1 else value))
    return tuple(reversed(stops)), value


def play(theta: np.ndarray, rng: np.random.Generator) -> dict[str, list[Episode]]:
    """G episodes of each of PROBLEMS problems, recorded as the rollout engine records them."""
    p_stop, episodes = stop_probs(theta), {}
    for p in range(PROBLEMS):
        group = []
        for g in range(G):
            turns = []
            for t in range(K):
                stop = rng.random() < p_stop[t]
                win = Q_STOP[t] if stop else P_MORE
                reward = float(rng.random() < win)
                if not stop and t == K - 1:
                    reward += float(rng.random() < Q_LAST)
                action = STOP if stop else MORE
                turns.append(Turn("critic_0", {}, "", [10 + t], [action], [0.0], reward, {}, t, t))
                if stop:
                    break
            group.append(Episode("synthetic/stop-v0", f"p{p}", p, g, turns))
        episodes[f"p{p}"] = group
    return episodes


def trl_advantages(rewards: list[float | None], group: int) -> np.ndarray:
    """`GRPOTrainer`'s advantages (``sum_then_normalize``, ``scale_rewards="group"``): unscorable
    rows (None) are left out of their group's mean and std and get 0."""
    r = torch.tensor([math.nan if x is None else x for x in rewards], dtype=torch.float64)
    mean = torch.nanmean(r.view(-1, group), dim=1).repeat_interleave(group)
    std = nanstd(r.view(-1, group), dim=1).repeat_interleave(group)
    return torch.nan_to_num((r - mean) / (std + 1e-4), nan=0.0).numpy()


def test_trl_advantages_is_trls_formula():
    """`trl_advantages` copies `GRPOTrainer`'s: fail loudly when TRL's changes."""
    source = inspect.getsource(GRPOTrainer._generate_and_score_completions)
    for line in (
        "rewards[unscorable_mask] = torch.nan",
        "torch.nanmean(rewards.view(-1, num_generations), dim=1)",
        "nanstd(rewards.view(-1, num_generations), dim=1)",
        "advantages = advantages / (std_rewards + 1e-4)",
        "advantages = torch.nan_to_num(advantages, nan=0.0)",
    ):
        assert line in source, line


def batch_gradient(theta: np.ndarray, episodes, scheme: str) -> np.ndarray:
    """The policy-gradient step one generation batch gives under `scheme`, weighted as TRL's
    "dapo" loss weighs it (each trainable token alike, over the batch's trainable tokens)."""
    prompts = [slot_prompt(pid, s) for pid in episodes for s in range(K) for _ in range(G)]
    credit = "return" if scheme == "project_return" else "reward"
    rows = rows_from_episodes(prompts, episodes, G, turn_credit=credit)
    adv = trl_advantages(rows["turn_reward"], G)
    if scheme == "per_index_sum":  # verl RFC #7244: normalise per turn index, then sum the rest
        adv = adv.reshape(PROBLEMS, K, G)[:, ::-1].cumsum(axis=1)[:, ::-1].reshape(-1)
    p_stop, grad, tokens = stop_probs(theta), np.zeros(K), 0
    for a, rnd, ids, mask in zip(
        adv, rows["round"], rows["completion_ids"], rows["env_mask"], strict=True
    ):
        if not sum(mask):
            continue  # a padding row: a turn its episode never reached
        tokens += sum(mask)
        grad[rnd] += a * ((1 - p_stop[rnd]) if ids[0] == STOP else -p_stop[rnd])
    return grad / max(tokens, 1)


def expected_gradient(theta: np.ndarray, scheme: str, batches: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return sum(batch_gradient(theta, play(theta, rng), scheme) for _ in range(batches)) / batches


def learn(scheme: str, steps: int, lr: float, seed: int) -> np.ndarray:
    """Tabular gradient ascent from a uniform policy; returns the learned stop probabilities."""
    rng, theta = np.random.default_rng(seed), np.zeros(K)
    for _ in range(steps):
        theta = theta + lr * batch_gradient(theta, play(theta, rng), scheme)
    return stop_probs(theta)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


SCHEMES = [
    # (scheme, biased?): the project's rows with the agent's return from each turn on, its
    # default rows (each turn its own reward), and per-turn-index normalise-then-sum (RFC #7244)
    ("project_return", False),
    ("project_reward", True),
    ("per_index_sum", True),
]


def test_optimum_is_known():
    stops, value = optimum()
    assert stops == (False, False, True)
    assert value == pytest.approx(0.95)
    theta = np.array([-30.0, -30.0, 30.0])
    assert float(expected_return(torch.tensor(theta))) == pytest.approx(0.95)


@pytest.mark.parametrize(("scheme", "biased"), SCHEMES)
def test_expected_gradient_against_exact(scheme, biased):
    """At two policies, the estimator's mean over batches against the exact gradient: an
    unbiased one points the same way (cosine near 1), a biased one does not."""
    for theta in (np.zeros(K), np.array([-1.0, 0.5, 0.0])):
        est = expected_gradient(theta, scheme, batches=30, seed=1)
        cos = cosine(est, true_gradient(theta))
        assert (cos < 0.8) if biased else (cos > 0.95), (scheme, theta.tolist(), cos)


@pytest.mark.parametrize(("scheme", "biased"), SCHEMES)
def test_learning_reaches_the_optimum(scheme, biased):
    """Gradient ascent with the estimator from a uniform policy: the unbiased one learns the
    optimal stops, a biased one settles on a policy worth far less."""
    learned = learn(scheme, steps=150, lr=30.0, seed=2)
    value = float(expected_return(torch.tensor(np.log(learned / (1 - learned)))))
    _, best = optimum()
    assert (value < best - 0.2) if biased else (value > best - 0.05), (scheme, learned, value)


def test_per_index_sum_is_turn_reward_credit():
    """Why the two biased schemes score alike: summed over a slot's group, the later turns'
    per-index-normalised rewards cancel, so every batch gives both the same gradient."""
    rng, theta = np.random.default_rng(3), np.array([0.3, -0.2, 0.1])
    for _ in range(3):
        episodes = play(theta, rng)
        np.testing.assert_allclose(
            batch_gradient(theta, episodes, "per_index_sum"),
            batch_gradient(theta, episodes, "project_reward"),
            atol=1e-12,
        )


def test_return_credit_rows():
    """Each row is paid its agent's rewards from its turn on; padding rows stay None."""

    def turn(agent, index, reward):
        return Turn(agent, {}, "", [7], [5], [0.0], reward, {}, index, index)

    long = [turn("solver_0", 0, 1.0), turn("critic_0", 1, 0.5), turn("refiner_0", 2, 2.0)]
    long += [turn("critic_0", 3, 0.25)]
    short = [turn("solver_0", 0, 0.0), turn("critic_0", 1, 1.0)]
    episodes = {"p": [Episode("e", "p", 0, 0, long), Episode("e", "p", 0, 1, short)]}
    prompts = [slot_prompt("p", s) for s in range(4) for _ in range(2)]
    rows = rows_from_episodes(prompts, episodes, 2, {"critic": 2.0}, turn_credit="return")
    assert rows["turn_reward"] == [1.0, 0.0, 1.5, 2.0, 2.0, None, 0.5, None]
    assert rows["turn_raw_reward"] == [1.0, 0.0, 0.5, 1.0, 2.0, None, 0.25, None]
    plain = rows_from_episodes(prompts, episodes, 2, {"critic": 2.0})
    assert plain["turn_reward"] == [1.0, 0.0, 1.0, 2.0, 2.0, None, 0.5, None]
    with pytest.raises(ValueError, match="turn_credit"):
        rows_from_episodes(prompts, episodes, 2, turn_credit="episode")
