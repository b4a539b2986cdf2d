"""The properties the fuzz checks: what a verdict, a reward, an info dict and an observation
must look like whatever the input, and whole episodes played with adversarial actions."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import strategies as st

from envs.testing.fuzz.generators import NON_STRINGS, adversarial_text
from envs.testing.fuzz.timing import STEP_BOUND_S, ran_symbolic, timed, timed_out
from rewards import Verdict

LEAK_KEYS = frozenset({"answer", "reference", "ground_truth", "solution"})
BASE_INFO_KEYS = frozenset({"problem_id", "turn"})
ACTED_INFO_KEYS = frozenset(
    {"problem_id", "turn", "round", "role", "extracted", "correct", "score", "reason"}
    | {"parse_error"}
)


def check_verdict(verdict: Any, what: str, printable: bool = True) -> None:
    """A `Verdict` with a finite score in [0, 1], a str reason and a str-or-None extraction;
    with `printable`, reason and extraction also encode as UTF-8 (no lone surrogates)."""
    assert isinstance(verdict, Verdict), f"{what} returned {type(verdict).__name__}"
    assert isinstance(verdict.score, (int, float)) and not isinstance(verdict.score, bool)
    assert math.isfinite(verdict.score) and 0.0 <= verdict.score <= 1.0, verdict.score
    assert isinstance(verdict.reason, str), f"{what}: reason is {type(verdict.reason).__name__}"
    assert verdict.extracted is None or isinstance(verdict.extracted, str)
    if printable:
        (verdict.reason + (verdict.extracted or "")).encode("utf-8")  # loggable


def check_obs(env: Any, agent: str, obs: Any, where: str) -> None:
    """The observation lies in the agent's observation space."""
    space = env.observation_space(agent)
    assert space.contains(obs), f"{where}: observation of {agent} is outside its space"


def check_reward(reward: Any, where: str) -> None:
    """A finite real number (not a bool)."""
    # PettingZoo's own `_clear_rewards` writes an int 0 for agents that did not act.
    real = isinstance(reward, (int, float)) and not isinstance(reward, bool)
    assert real and math.isfinite(reward), f"{where}: reward {reward!r}"


def check_info(info: Any, keys: frozenset[str], where: str) -> None:
    """A dict with every one of `keys` and none of `LEAK_KEYS` (no reference answer)."""
    assert isinstance(info, dict), f"{where}: info is {type(info).__name__}"
    missing = keys - set(info)
    assert not missing, f"{where}: info lacks {sorted(missing)}"
    leaked = LEAK_KEYS & set(info)
    assert not leaked, f"{where}: info carries the reference ({sorted(leaked)})"


def expect_type_error(step: Callable[[], Any], agents: Sequence[str], bad: Any) -> None:
    """``step()`` raises the documented ``TypeError``, naming one of `agents` and `bad`'s type."""
    try:
        step()
    except TypeError as err:
        message = str(err)
        assert any(repr(a) in message or a in message for a in agents), message
        assert type(bad).__name__ in message, message
        return
    raise AssertionError(f"a non-string action ({type(bad).__name__}) did not raise TypeError")


def _nonstring_now(data: Any) -> bool:
    return data.draw(st.integers(0, 9), label="non-string?") == 0


def play_aec(
    env: Any, raw: Any, data: Any, seed: int, target: str, budget: float, program_s: float = 0.0
) -> None:
    """One AEC episode of adversarial actions (now and then a rejected non-string first), each
    step timed against `STEP_BOUND_S` plus `budget` if math-verify ran, plus `program_s` (the
    sandbox's limit, for an env that runs programs); every observation, reward and info
    checked; the episode ends within ``max_turns``."""
    max_turns = raw.max_turns
    env.reset(seed=seed)
    acted = 0
    for agent in env.agent_iter(max_iter=4 * max_turns + 8):
        obs, reward, terminated, truncated, info = env.last()
        where = f"{target} turn {acted} ({agent})"
        check_obs(env, agent, obs, where)
        check_reward(reward, where)
        check_info(info, BASE_INFO_KEYS, where)
        if terminated or truncated:
            env.step(None)
            continue
        if _nonstring_now(data):
            bad = data.draw(NON_STRINGS, label="non-string action")
            expect_type_error(lambda bad=bad: env.step(bad), [agent], bad)
            assert raw.agent_selection == agent, "a rejected action changed whose turn it is"
        action = data.draw(adversarial_text(), label=f"{agent} action")

        def bound() -> float:
            return STEP_BOUND_S + program_s + budget * box["symbolic"]

        with timed(target, bound, where, action, STEP_BOUND_S + program_s + budget) as box:
            env.step(action)
            reason = raw.infos[agent].get("reason")
            box["timed_out"], box["symbolic"] = timed_out(reason), ran_symbolic(reason)
        acted += 1
        assert acted <= max_turns, f"{where}: more than max_turns={max_turns} turns"
        check_info(raw.infos[agent], ACTED_INFO_KEYS, where)
        for who, value in raw.rewards.items():
            check_reward(value, f"{where}, reward of {who}")
    assert not raw.agents, f"{target}: the episode did not end within {max_turns} turns"


def play_parallel(
    env: Any, raw: Any, data: Any, seed: int, target: str, budget: float, program_s: float = 0.0
) -> None:
    """`play_aec` for a parallel env: a round of adversarial actions per step, each round timed
    against `STEP_BOUND_S` plus `program_s` plus `budget` per answer math-verify checked."""
    max_turns = raw.max_turns
    observations, infos = env.reset(seed=seed)
    for agent in env.agents:
        check_obs(env, agent, observations[agent], f"{target} reset")
        check_info(infos[agent], BASE_INFO_KEYS, f"{target} reset")
    rounds = 0
    while env.agents:
        where = f"{target} round {rounds}"
        agents = list(env.agents)
        if _nonstring_now(data):
            bad = data.draw(NON_STRINGS, label="non-string action")
            victim = data.draw(st.sampled_from(agents), label="agent with a non-string")
            bad_actions = {a: (bad if a == victim else "x") for a in agents}
            expect_type_error(lambda b=bad_actions: env.step(b), [victim], bad)
            assert env.agents == agents, "a rejected step changed the live agents"
        actions = {a: data.draw(adversarial_text(), label=f"{a} action") for a in agents}

        def bound() -> float:
            return STEP_BOUND_S + program_s + budget * box["symbolic"]

        most = STEP_BOUND_S + program_s + budget * len(agents)
        with timed(target, bound, where, actions, most) as box:
            observations, rewards, terminations, truncations, infos = env.step(actions)
            reasons = [infos[a].get("reason") for a in agents]
            box["symbolic"] = sum(map(ran_symbolic, reasons))
            box["timed_out"] = any(map(timed_out, reasons))
        rounds += 1
        assert rounds <= max_turns, f"{where}: more than max_turns={max_turns} rounds"
        for agent in agents:
            check_reward(rewards[agent], f"{where}, reward of {agent}")
            check_info(infos[agent], ACTED_INFO_KEYS, f"{where}, {agent}")
            assert isinstance(terminations[agent], bool) and isinstance(truncations[agent], bool)
            check_obs(env, agent, observations[agent], f"{where}, {agent}")
    assert rounds <= max_turns
