"""`check_env`: PettingZoo's API tests plus the text-environment checks of this project.

Hard rules fail with an `AssertionError` naming the rule; PettingZoo's warnings that only say
"observations are not NumPy arrays" (true of every text env) are silenced. Among the rules: the
env has every member the trainers use (`envs.core.TeamEnv`, `AECTeamEnv`, and `TaskTeamEnv` for
this package's envs; the error names the missing one), no observation depends on the reference
answer, and nothing an agent is handed before a turn (reward, info) depends on whether any
answer is right, nor does any info contain the reference.
"""

from __future__ import annotations

import copy
import math
import pickle
import random
import warnings
from collections.abc import Callable
from typing import Any

from pettingzoo import AECEnv, ParallelEnv
from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test, seed_test

from envs.core import (
    SAMPLE_CHARSET,
    AECTeamEnv,
    TaskEnvMixin,
    TaskTeamEnv,
    TeamEnv,
    missing_members,
)

# PettingZoo's api_test is written for array observations; these warnings hold for any text env.
ALLOWED_WARNINGS = (
    r"Observation is not a NumPy array",
    r".*is not a numpy array.*",
    r".*probably should be gymnasium\.spaces\.box.*",
    r".*Box.*",
    r"Observations between agents are different classes",
)
ODD_UNICODE = "Ω≈ç√∫˜µ≤≥÷ 中文 🙂👩‍👩‍👧 \u200f\u202e عربى \u0301\u0000\x1b[31m \ud800 \\boxed{"
HUGE = "9" * 1_000_000

Record = list[tuple[Any, ...]]
EnvFactory = Callable[[], Any]


def check_env(env: Any, *, seed: int = 0, num_cycles: int = 20) -> None:
    """Check an environment; raises `AssertionError` naming the first rule broken.

    Args:
        env: an env id (``"math/debate-v0"``), a zero-argument factory, or an env instance
            (checked through deep copies, so it is left as it was).
        seed: seed of the text checks.
        num_cycles: cycles of PettingZoo's api/seed tests.
    """
    factory = _factory(env)
    with warnings.catch_warnings():
        for pattern in ALLOWED_WARNINGS:
            warnings.filterwarnings("ignore", message=pattern)
        probe = factory()
        parallel = isinstance(_raw(probe), ParallelEnv)
        _check_protocol(factory(), seed, parallel)
        if parallel:
            parallel_api_test(factory(), num_cycles=num_cycles)
            parallel_seed_test(factory, num_cycles=num_cycles)
        else:
            api_test(factory(), num_cycles=num_cycles)
            seed_test(factory, num_cycles=num_cycles)
    play = _play_parallel if parallel else _play_aec
    max_turns = getattr(_raw(probe), "max_turns", None)
    assert isinstance(max_turns, int) and max_turns > 0, "rule: the env sets an int `max_turns`"

    for name, action_fn in _action_makers(factory, seed).items():
        record = play(factory(), action_fn, seed)
        steps = _steps(record, parallel)
        assert steps <= max_turns, (
            f"rule: episode ends within max_turns={max_turns} ({name}: {steps})"
        )
        for row in record:
            for reward in _rewards(row):
                assert isinstance(reward, (int, float)) and math.isfinite(reward), (
                    f"rule: rewards are finite numbers ({name} action gave {reward!r})"
                )
            for obs in _observations(row):
                _check_observation(factory, obs)
    replies = _action_makers(factory, seed)["random"]
    assert play(factory(), replies, seed) == play(factory(), replies, seed), (
        "rule: the same seed and actions give the same transcript, rewards and infos"
    )
    _check_no_leak(factory, play, seed)
    _check_no_peeking(factory, seed, parallel)
    _check_copies(factory, play, seed, parallel)
    _check_bad_actions(factory(), seed, parallel)


def _check_protocol(env: Any, seed: int, parallel: bool) -> None:
    """The env has what the trainers use (`envs.core.TeamEnv`; an AEC env's per-step members
    after `reset`: `AECTeamEnv`), an env of this package has `TaskTeamEnv`'s members too, and a
    `prepare_steps` on its class is callable; the error names what is missing."""
    env.reset(seed=seed)
    raw = _raw(env)
    protocols: list[type] = [TeamEnv if parallel else AECTeamEnv]
    if isinstance(raw, TaskEnvMixin):
        protocols.append(TaskTeamEnv)
    for protocol in protocols:
        missing = missing_members(raw, protocol)
        assert not missing, (
            f"rule: the env has every member of envs.core.{protocol.__name__} "
            f"({type(raw).__name__} lacks {', '.join(missing)})"
        )
    hook = getattr(type(raw), "prepare_steps", None)
    assert hook is None or callable(hook), (
        f"rule: prepare_steps on the env's class is a classmethod taking the coming steps "
        f"({type(raw).__name__}.prepare_steps is {hook!r})"
    )


def _factory(env: Any) -> EnvFactory:
    if isinstance(env, str):
        from envs.registry import make

        return lambda: make(env)
    if isinstance(env, (AECEnv, ParallelEnv)):
        pristine = copy.deepcopy(env)
        return lambda: copy.deepcopy(pristine)
    if callable(env):
        return env
    raise TypeError(f"check_env takes an env id, a factory or an env, got {type(env).__name__}")


def _raw(env: Any) -> Any:
    return getattr(env, "unwrapped", env)


def _action_makers(factory: EnvFactory, seed: int) -> dict[str, Callable[[Any, str], str]]:
    space = factory().action_space(_raw(factory()).possible_agents[0])
    space.seed(seed)
    sampled = [space.sample() for _ in range(4)]
    return {
        "random": lambda i, agent: sampled[i % len(sampled)],
        "empty": lambda i, agent: "",
        "huge (1 MB)": lambda i, agent: HUGE,
        "odd unicode": lambda i, agent: ODD_UNICODE,
        "charset soup": lambda i, agent: "".join(random.Random(i).choices(SAMPLE_CHARSET, k=500)),
    }


def _play_aec(
    env: Any, action_fn: Callable[[int, str], str], seed: int, options: dict[str, Any] | None = None
) -> Record:
    env.reset(seed=seed, options=options)
    record: Record = []
    for i, agent in enumerate(env.agent_iter(max_iter=10_000)):
        obs, reward, terminated, truncated, info = env.last()
        record.append((agent, obs, reward, terminated, truncated, _plain(info)))
        env.step(None if terminated or truncated else action_fn(i, agent))
    return record


def _play_parallel(
    env: Any, action_fn: Callable[[int, str], str], seed: int, options: dict[str, Any] | None = None
) -> Record:
    observations, infos = env.reset(seed=seed, options=options)
    record: Record = [(observations, _plain(infos))]
    i = 0
    while env.agents and i < 10_000:
        actions = {agent: action_fn(i, agent) for agent in env.agents}
        observations, rewards, terms, truncs, infos = env.step(actions)
        record.append((observations, rewards, terms, truncs, _plain(infos)))
        i += 1
    return record


def _plain(info: Any) -> Any:
    return copy.deepcopy(info)


def _steps(record: Record, parallel: bool) -> int:
    if parallel:
        return len(record) - 1
    return sum(1 for row in record if not (row[3] or row[4]))


def _rewards(row: tuple[Any, ...]) -> list[Any]:
    if len(row) == 6:  # AEC: (agent, obs, reward, ...)
        return [row[2]]
    return list(row[1].values()) if len(row) == 5 else []


def _observations(row: tuple[Any, ...]) -> list[Any]:
    if len(row) == 6:
        return [row[1]]
    return list(row[0].values())


def _check_observation(factory: EnvFactory, obs: Any) -> None:
    assert isinstance(obs, dict), f"rule: observations are dicts of text, got {type(obs).__name__}"
    for key, value in obs.items():
        assert isinstance(value, str), f"rule: observation field {key!r} is a str"


def _check_no_leak(factory: EnvFactory, play: Callable[..., Record], seed: int) -> None:
    """Observations must not depend on the reference answer: swap it and compare."""
    raw = _raw(factory())
    if not isinstance(raw, TaskEnvMixin):
        warnings.warn(
            "check_env: not a TaskEnvMixin env, the answer-leak check is skipped", stacklevel=2
        )
        return
    source = raw.task.source
    base = source[0]
    other = next(
        (
            p["answer"]
            for p in (source[i] for i in range(min(len(source), 200)))
            if p["answer"] != base["answer"]
        ),
        None,
    )
    assert other is not None, "check_env needs a task with at least two distinct answers"
    swapped = {**base, "answer": other}
    replies = ["I think the answer is 7. \\boxed{7}", "Verdict: incorrect", base["answer"]]

    def act(i: int, agent: str) -> str:
        return replies[i % len(replies)]

    def observations(problem: dict[str, Any]) -> list[Any]:
        return [_observations(row) for row in play(factory(), act, seed, {"problem": problem})]

    assert observations(dict(base)) == observations(swapped), (
        "rule: observations never contain the reference answer (they changed with it)"
    )
    for row in play(factory(), act, seed, {"problem": dict(base)}):
        infos = row[-1] if len(row) != 6 else {"_": row[5]}
        for info in infos.values():
            leaked = {"answer", "reference", "ground_truth", "solution"} & set(info)
            assert not leaked, f"rule: infos carry no reference answer (found keys {leaked})"


# The reference `_check_no_peeking` plants: distinctive, so no info may contain it as a substring.
PLANTED_REFERENCE = "97531"


def _check_no_peeking(factory: EnvFactory, seed: int, parallel: bool) -> None:
    """What an agent is handed before a turn must not tell whether any answer is right.

    Plays the same actions twice: once against the problem's own reference (some replies state
    it, so some answers and verdicts are right) and once against a planted reference that no
    reply states (so no answer is right). Every (reward, info) handed to an agent that acts
    afterwards (AEC: `last()` before a live agent's step; Parallel: the reset's infos and a
    step's returns for the agents that go on) must be identical between the two plays, and no
    info, at any time, may contain the planted reference (a verifier's reason such as "wrong
    answer: 7 != 97531" would). Rewards and correctness may arrive once an agent acts no more.
    """
    raw = _raw(factory())
    if not isinstance(raw, TaskEnvMixin):
        return  # `_check_no_leak` has warned already
    if raw.per_step_rewards:
        warnings.warn(
            "check_env: the env was made with per_step_rewards=True (it shows each grade at "
            "once, for trainers), so the no-peeking check is skipped",
            stacklevel=3,
        )
        return
    base = dict(raw.task.source[0])
    wrong = "8" if base["answer"].strip() == "7" else "7"
    # Every reply both states an answer and ends with a verdict, so each role's turns are
    # graded whatever the role; cycled with an offset per agent, each role is right sometimes.
    replies = [
        f"I think the answer is {wrong}. Verdict: incorrect",
        f"The answer is \\boxed{{{base['answer']}}}. Verdict: correct",
        f"Checked: \\boxed{{{base['answer']}}}. Verdict: incorrect",
    ]
    planted = _planted_reference(raw, [*replies, base["question"], base["id"]])
    player = _handed_parallel if parallel else _handed_aec
    right_handed, _ = player(factory(), replies, seed, base)
    wrong_handed, wrong_infos = player(factory(), replies, seed, {**base, "answer": planted})
    assert len(right_handed) == len(wrong_handed), (
        "rule: whether an answer is right does not change who acts when (before the end)"
    )
    for (who, got_right), (_, got_wrong) in zip(right_handed, wrong_handed, strict=True):
        assert got_right == got_wrong, (
            f"rule: nothing handed to an agent before its turn depends on whether an answer is "
            f"right ({who} was handed {got_right!r} when answers were right, {got_wrong!r} "
            f"when they were wrong)"
        )
    for where, info in wrong_infos:
        assert planted not in repr(info), (
            f"rule: no info contains the reference answer ({where}: {info!r})"
        )


Handed = list[tuple[str, Any]]


def _planted_reference(raw: Any, texts: list[str]) -> str:
    """A reference no text of `texts` contains: `PLANTED_REFERENCE` (lengthened until none
    does), or, for a task whose verifier refuses a bare number as a reference (``reach``: a
    reference is a chain of steps), the answer of another of its problems that none contains."""
    planted = PLANTED_REFERENCE
    while any(planted in text for text in texts):
        planted += "1"
    try:
        raw.task.verifier.verify("", planted)
    except ValueError:
        source = raw.task.source
        answers = (source[i]["answer"] for i in range(min(len(source), 200)))
        fresh = next((a for a in answers if not any(a in text for text in texts)), None)
        assert fresh is not None, "check_env needs a reference that no reply states"
        return fresh
    return planted


def _handed_aec(env: Any, replies: list[str], seed: int, problem: dict) -> tuple[Handed, Handed]:
    """What `last()` hands each agent before its steps, and every info the env held."""
    env.reset(seed=seed, options={"problem": problem})
    raw = _raw(env)
    order = list(raw.possible_agents)
    handed: Handed = []
    infos: Handed = [(f"{a} after reset", _plain(i)) for a, i in raw.infos.items()]
    for i, agent in enumerate(env.agent_iter(max_iter=10_000)):
        _, reward, terminated, truncated, info = env.last()
        if terminated or truncated:
            infos.append((f"{agent}'s last()", _plain(info)))
            env.step(None)
            continue
        handed.append((agent, (reward, _plain(info))))
        env.step(replies[(i + order.index(agent)) % len(replies)])
        infos.extend((f"{a} after step {i}", _plain(x)) for a, x in raw.infos.items())
    return handed, infos


def _handed_parallel(
    env: Any, replies: list[str], seed: int, problem: dict
) -> tuple[Handed, Handed]:
    """What reset and each step hand the agents that act again, and every info returned."""
    _, infos = env.reset(seed=seed, options={"problem": problem})
    order = list(env.possible_agents)
    handed: Handed = [(a, (None, _plain(info))) for a, info in infos.items()]
    seen: Handed = [(f"{a} after reset", _plain(x)) for a, x in infos.items()]
    i = 0
    while env.agents and i < 10_000:
        actions = {a: replies[(i + order.index(a)) % len(replies)] for a in env.agents}
        _, rewards, _, _, infos = env.step(actions)
        seen.extend((f"{a} after round {i}", _plain(x)) for a, x in infos.items())
        for agent in env.agents:  # those that act again
            handed.append((agent, (rewards.get(agent), _plain(infos.get(agent)))))
        i += 1
    return handed, seen


def _check_copies(
    factory: EnvFactory, play: Callable[..., Record], seed: int, parallel: bool
) -> None:
    """A pickled or deep-copied env, mid-episode, continues exactly like the original."""
    env = factory()
    env.reset(seed=seed)
    first = "A first answer: \\boxed{3}"
    if parallel:
        env.step(dict.fromkeys(env.agents, first))
    else:
        env.step(first)
    clones = {"deepcopy": copy.deepcopy(env), "pickle": pickle.loads(pickle.dumps(env))}
    reference = _finish(env, parallel)
    for how, clone in clones.items():
        assert _finish(clone, parallel) == reference, f"rule: the env survives {how} mid-episode"


def _finish(env: Any, parallel: bool) -> Record:
    record: Record = []
    if parallel:
        while env.agents:
            record.append(env.step(dict.fromkeys(env.agents, "Final: \\boxed{4}")))
        return record
    for agent in env.agent_iter(max_iter=10_000):
        obs, reward, terminated, truncated, info = env.last()
        record.append((agent, obs, reward, terminated, truncated, copy.deepcopy(info)))
        env.step(None if terminated or truncated else "Verdict: correct \\boxed{4}")
    return record


def _check_bad_actions(env: Any, seed: int, parallel: bool) -> None:
    """Non-string actions raise TypeError naming the agent; stepping after the end raises."""
    if parallel:
        env.reset(seed=seed)
        agent = env.agents[0]
        try:
            env.step({a: (12345 if a == agent else "x") for a in env.agents})
        except TypeError as err:
            assert agent in str(err) and "int" in str(err), (
                f"rule: TypeError names agent and type: {err}"
            )
        else:
            raise AssertionError("rule: a non-string action raises TypeError")
        while env.agents:
            env.step(dict.fromkeys(env.agents, "done"))
        try:
            env.step({})
        except RuntimeError:
            return
        raise AssertionError("rule: step() after the episode ended raises RuntimeError")
    env.reset(seed=seed)
    agent = env.agent_selection
    try:
        env.step(12345)
    except TypeError as err:
        assert agent in str(err) and "int" in str(err), (
            f"rule: TypeError names agent and type: {err}"
        )
    else:
        raise AssertionError("rule: a non-string action raises TypeError")
