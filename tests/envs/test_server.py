"""The env server (`envs.serving.server`) and its PettingZoo client (`envs.serving.client`).

Servers run on loopback: uvicorn on a thread of the test process (`BackgroundServer`), FastAPI's
`TestClient` where a test is about the app alone, and once the one-command script in a
subprocess, which the test then kills.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import json
import math
import pickle
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("websockets")
httpx = pytest.importorskip("httpx")
from fastapi.testclient import TestClient
from pettingzoo import AECEnv, ParallelEnv

import envs
from envs.debate import DebateEnv
from envs.serving.client import EnvRequestError, EnvServerError, RemoteAECEnv
from envs.serving.protocol import build_space, describe_space, jsonable
from envs.serving.server import EnvServerConfig, create_app
from envs.solve import SolveEnv
from rewards.serving.http import BackgroundServer

REPO = Path(__file__).resolve().parents[2]
TRANSPORTS = ["http", "ws"]
# Generous bounds: the suite runs niced beside training jobs, where a request can take seconds.
# No test waits for them unless something is broken.
STARTUP_S = 300
CALL_S = 300
_remote = functools.partial(envs.remote, timeout_s=CALL_S)
REFLECTION = ("math/reflection-v0", {"rounds": 1})
DEBATE = ("math/debate-v0", {"num_agents": 2, "rounds": 2})


@contextlib.contextmanager
def _serving(app):
    """`app` on a uvicorn thread, started with a bound fit for a loaded machine."""
    running = BackgroundServer(app).start(timeout_s=STARTUP_S)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def server():
    with _serving(create_app(EnvServerConfig(idle_timeout_s=600))) as running:
        yield running


@pytest.fixture
def app_client():
    """The app alone, small limits, through FastAPI's TestClient (lifespan included)."""
    config = EnvServerConfig(max_sessions=4, max_body_bytes=20_000, idle_timeout_s=60)
    with TestClient(create_app(config)) as client:
        yield client


def _reply(agent: str, turn: int) -> str:
    if agent.startswith("critic"):
        return f"Recomputed it: turn {turn}.\nVerdict: {'correct' if turn % 2 else 'incorrect'}"
    return f"Working for {agent} at turn {turn}. The answer is \\boxed{{{turn * 7 % 23}}}."


def _aec_turn(env, turn: int) -> tuple:
    """One AEC step with a scripted reply; returns what the acting agent saw."""
    agent = env.agent_selection
    obs, reward, terminated, truncated, info = env.last()
    env.step(None if terminated or truncated else _reply(agent, turn))
    return agent, jsonable(obs), float(reward), terminated, truncated, jsonable(info)


def _parallel_turn(env, turn: int) -> tuple:
    outputs = env.step({a: _reply(a, turn) for a in env.agents})
    return tuple(jsonable(o) for o in outputs)


# ---------------------------------------------------------------------- conformance


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(("env_id", "kwargs"), [REFLECTION, DEBATE], ids=["reflection", "debate"])
def test_check_env_passes_against_a_served_env(server, env_id, kwargs, transport):
    """PettingZoo's api_test / parallel_api_test and seed tests, and the project's text checks,
    against the served env; only the answer-leak check (it reads the env's task) is skipped."""
    probe = _remote(server.url, env_id, transport=transport, **kwargs)
    assert isinstance(probe, ParallelEnv if env_id == DEBATE[0] else AECEnv)
    probe.close()
    with pytest.warns(UserWarning, match="answer-leak check is skipped") as caught:
        envs.check_env(lambda: _remote(server.url, env_id, transport=transport, **kwargs))
    # any other warning (PettingZoo's parallel_api_test warns on wrong keys) fails the test
    assert [str(w.message) for w in caught] == [
        "check_env: not a TaskEnvMixin env, the answer-leak check is skipped"
    ]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_spaces_and_attributes_match_the_local_env(server, transport):
    local = envs.make("math/reflection-v0", rounds=1, render_mode="ansi")
    with _remote(
        server.url, "math/reflection-v0", transport=transport, rounds=1, render_mode="ansi"
    ) as env:
        assert env.possible_agents == local.possible_agents
        assert env.max_turns == local.unwrapped.max_turns == 3
        assert str(env) == "math/reflection-v0"
        for agent in env.possible_agents:
            assert env.observation_space(agent) == local.observation_space(agent)
            assert env.action_space(agent) is env.action_space(agent)
            assert env.action_space(agent).contains("any\ud800text")
        env.reset(seed=3)
        local.reset(seed=3)
        env.step("My answer: \\boxed{5}")
        local.step("My answer: \\boxed{5}")
        assert env.render() == local.render() and "[solver_0]" in env.render()


# ---------------------------------------------------------------------- isolation


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_interleaved_sessions_match_in_process_envs(server, transport):
    """Two sessions of one env, stepped in turn, play exactly what two local envs play."""
    env_id, kwargs = REFLECTION
    remotes = [_remote(server.url, env_id, transport=transport, **kwargs) for _ in range(2)]
    locals_ = [envs.make(env_id, **kwargs) for _ in range(2)]
    seeds = [11, 12]
    played: dict[str, list[list[tuple]]] = {"remote": [[], []], "local": [[], []]}
    for name, pair in (("remote", remotes), ("local", locals_)):
        for env, seed in zip(pair, seeds, strict=True):
            env.reset(seed=seed)
        turn = 0
        while any(env.agents for env in pair):
            for index, env in enumerate(pair):  # interleaved: 0, 1, 0, 1, ...
                if env.agents:
                    played[name][index].append(_aec_turn(env, turn + index))
            turn += 1
    assert played["remote"] == played["local"]
    assert played["remote"][0] != played["remote"][1]  # different problems: not one shared env
    assert all(not env.agents for env in remotes)
    for env in remotes:
        env.close()


def test_parallel_sessions_match_in_process_envs(server):
    env_id, kwargs = DEBATE
    remote = [_remote(server.url, env_id, transport=t, **kwargs) for t in TRANSPORTS]
    local = [envs.make(env_id, **kwargs) for _ in TRANSPORTS]
    played: dict[str, list[list[tuple]]] = {"remote": [[], []], "local": [[], []]}
    for name, pair in (("remote", remote), ("local", local)):
        for index, env in enumerate(pair):
            played[name][index].append(tuple(jsonable(o) for o in env.reset(seed=5 + index)))
        for turn in range(kwargs["rounds"]):
            for index, env in enumerate(pair):
                played[name][index].append(_parallel_turn(env, turn + index))
    assert played["remote"] == played["local"]
    for env in remote:
        env.close()


@pytest.mark.parametrize("per_step_rewards", [False, True])
def test_no_peeking_and_the_trainers_view_are_served(server, per_step_rewards):
    """A served env withholds grades as the local one does, and `per_step_rewards` (the
    trainer's view: each grade on its own step) passes through to the served env."""
    kwargs = {"rounds": 2, "per_step_rewards": per_step_rewards}
    played = {}
    for name, env in (
        ("remote", _remote(server.url, "math/reflection-v0", **kwargs)),
        ("local", envs.make("math/reflection-v0", **kwargs)),
    ):
        env.reset(seed=4)
        played[name] = [_aec_turn(env, turn) for turn in range(8) if env.agents]
        env.close()
    assert played["remote"] == played["local"]
    refiner_turns = [info for agent, *_, info in played["local"] if agent == "refiner_0"]
    assert ("reason" in refiner_turns[1]) is per_step_rewards  # handed before its 2nd turn


def test_copies_fork_the_session(server):
    env = _remote(server.url, "math/reflection-v0", rounds=1)
    env.reset(seed=4)
    _aec_turn(env, 0)
    clones = [copy.deepcopy(env), pickle.loads(pickle.dumps(env))]
    assert len({env.session_id, *(c.session_id for c in clones)}) == 3
    original = [_aec_turn(env, t) for t in (1, 2)]
    assert env.step_count == 3
    for clone in clones:  # untouched by the original's steps, then they play the same
        assert clone.step_count == 1 and clone.agent_selection == "critic_0"
        assert [_aec_turn(clone, t) for t in (1, 2)] == original
    for each in (env, *clones):
        each.close()


class OverlapEnv(DebateEnv):
    """A debate env that records how many of its steps run at once (each takes a moment)."""

    guard = threading.Lock()
    inside = 0
    most = 0

    def step(self, actions):
        with OverlapEnv.guard:
            OverlapEnv.inside += 1
            OverlapEnv.most = max(OverlapEnv.most, OverlapEnv.inside)
        try:
            time.sleep(0.02)  # long enough for a second step to start, were it let in
            return super().step(actions)
        finally:
            with OverlapEnv.guard:
                OverlapEnv.inside -= 1


def test_concurrent_requests_to_one_session_are_serialised():
    envs.register("test/overlap-v0", lambda **kw: OverlapEnv(**kw), max_turns=24)
    OverlapEnv.most = 0
    try:
        with _serving(create_app()) as running, httpx.Client(timeout=CALL_S) as client:
            create = {"env_id": "test/overlap-v0", "kwargs": {"rounds": 24}}
            sid = client.post(running.url + "/sessions", json=create).json()["session_id"]
            client.post(f"{running.url}/sessions/{sid}/reset", json={"seed": 0})
            actions = {f"debater_{i}": f"\\boxed{{{i}}}" for i in range(3)}

            def step(_: int) -> httpx.Response:
                return client.post(f"{running.url}/sessions/{sid}/step", json={"actions": actions})

            with ThreadPoolExecutor(8) as pool:
                answers = list(pool.map(step, range(24)))
    finally:
        envs.deregister("test/overlap-v0")
    assert [a.status_code for a in answers] == [200] * 24
    assert OverlapEnv.most == 1  # never two steps of one env at once
    assert sorted(a.json()["step_count"] for a in answers) == list(range(1, 25))
    assert sum(a.json()["done"] for a in answers) == 1
    rounds = [a.json()["infos"]["debater_0"]["round"] for a in answers]
    assert sorted(rounds) == list(range(24))  # each round played once, none lost or repeated


class GatedEnv(SolveEnv):
    """A solve env whose step blocks until the test opens the gate (a sandboxed program, a slow
    verifier)."""

    entered = threading.Event()
    gate = threading.Event()

    def step(self, action):
        GatedEnv.entered.set()
        assert GatedEnv.gate.wait(timeout=CALL_S), "the test never opened the gate"
        super().step(action)


def test_blocking_env_work_holds_up_only_its_own_session():
    GatedEnv.entered.clear()
    GatedEnv.gate.clear()
    envs.register("test/gated-v0", lambda **kw: GatedEnv(**kw), max_turns=1)
    try:
        with _serving(create_app(EnvServerConfig(envs=("test/gated-v0",)))) as running:
            blocked = _remote(running.url, "test/gated-v0")
            blocked.reset(seed=0)
            other = _remote(running.url, "test/gated-v0", transport="ws")
            with ThreadPoolExecutor(1) as pool:
                stepping = pool.submit(blocked.step, "\\boxed{1}")
                assert GatedEnv.entered.wait(timeout=CALL_S)
                # the step is stuck inside the env: other sessions and routes still answer
                other.reset(seed=1)
                assert httpx.get(running.url + "/health", timeout=CALL_S).status_code == 200
                state = httpx.get(
                    f"{running.url}/sessions/{other.session_id}/state", timeout=CALL_S
                )
                assert state.json()["agents"] == ["solver_0"]
                assert not stepping.done()
                GatedEnv.gate.set()
                stepping.result(timeout=CALL_S)
            assert blocked.terminations["solver_0"]
    finally:
        GatedEnv.gate.set()
        envs.deregister("test/gated-v0")


class ClosingGatedEnv(GatedEnv):
    """A gated env that records its close."""

    closed = threading.Event()

    def close(self):
        ClosingGatedEnv.closed.set()
        super().close()


def test_a_step_past_step_timeout_is_answered_504_and_its_session_closed():
    """An env step that runs past ``step_timeout_s`` gets 504 STEP_TIMEOUT; its session is
    closed (its env's state is unknown), later calls on it get 404 naming why, other sessions
    go on, and the env is closed once the stuck call returns, never while it runs."""
    GatedEnv.entered.clear()
    GatedEnv.gate.clear()
    ClosingGatedEnv.closed.clear()
    envs.register("test/slow-v0", lambda **kw: ClosingGatedEnv(**kw), max_turns=1)
    config = EnvServerConfig(envs=("test/slow-v0",), step_timeout_s=0.5)
    try:
        with _serving(create_app(config)) as running, httpx.Client(timeout=CALL_S) as client:
            made = [
                client.post(running.url + "/sessions", json={"env_id": "test/slow-v0"}).json()
                for _ in range(2)
            ]
            stuck, other = (m["session_id"] for m in made)
            for sid in (stuck, other):
                client.post(f"{running.url}/sessions/{sid}/reset", json={"seed": 0})
            began = time.monotonic()
            answer = client.post(f"{running.url}/sessions/{stuck}/step", json={"action": "1"})
            assert answer.status_code == 504 and time.monotonic() - began < CALL_S / 2
            body = answer.json()
            assert body["code"] == "STEP_TIMEOUT" and "step_timeout_s=0.5" in body["error"], body
            later = client.get(f"{running.url}/sessions/{stuck}/state")
            assert later.status_code == 404 and "step_timeout_s" in later.text
            assert not ClosingGatedEnv.closed.is_set()  # the call still runs: not closed under it
            GatedEnv.gate.set()
            assert ClosingGatedEnv.closed.wait(timeout=CALL_S)  # closed once the call returned
            stepped = client.post(
                f"{running.url}/sessions/{other}/step", json={"action": "\\boxed{1}"}
            )
            assert stepped.status_code == 200, stepped.text
            assert stepped.json()["terminations"] == {"solver_0": True}
    finally:
        GatedEnv.gate.set()
        envs.deregister("test/slow-v0")


class RaisingTimeoutEnv(SolveEnv):
    """A solve env whose step raises TimeoutError itself (a verifier's deadline leaking out)."""

    def step(self, action):
        raise TimeoutError("the env's own deadline")


def test_a_timeout_error_raised_by_the_env_is_a_500_not_a_step_timeout():
    envs.register("test/raising-v0", lambda **kw: RaisingTimeoutEnv(**kw), max_turns=1)
    config = EnvServerConfig(envs=("test/raising-v0",), step_timeout_s=30)
    try:
        with _serving(create_app(config)) as running, httpx.Client(timeout=CALL_S) as client:
            made = client.post(running.url + "/sessions", json={"env_id": "test/raising-v0"})
            sid = made.json()["session_id"]
            client.post(f"{running.url}/sessions/{sid}/reset", json={"seed": 0})
            answer = client.post(f"{running.url}/sessions/{sid}/step", json={"action": "1"})
            assert answer.status_code == 500, answer.text
            assert answer.json()["code"] == "EXECUTION_ERROR" and "TimeoutError" in answer.text
            still = client.get(f"{running.url}/sessions/{sid}/state")
            assert still.status_code == 200  # not cut off: the session stays
    finally:
        envs.deregister("test/raising-v0")


def test_step_timeout_must_be_positive():
    with pytest.raises(ValueError, match="step_timeout_s must be a positive number"):
        EnvServerConfig(step_timeout_s=0)


# ---------------------------------------------------------------------- idle timeout


def test_idle_sessions_are_reaped_and_others_kept():
    with TestClient(create_app(EnvServerConfig(idle_timeout_s=60))) as client:
        store = client.app.store
        idle, recent, busy = (_session(client, "math/solve-v0") for _ in range(3))
        lock = store.sessions[busy].lock
        client.portal.call(lock.acquire)  # a request in progress: never reaped, however old
        store.sessions[busy].last_used -= 61
        store.sessions[idle].last_used -= 61
        client.portal.call(store.reap)  # (the background reaper may have been first: same end)
        assert idle not in store.sessions and {recent, busy} <= set(store.sessions)
        store.sessions[busy].touch()  # as the request in progress would on its way out
        client.portal.call(lock.release)
        _refused(
            client.post(f"/sessions/{idle}/reset", json={}),
            404,
            "session_id",
            "expired: idle for more than idle_timeout_s=60 s",
        )
        for kept in (recent, busy):
            assert client.post(f"/sessions/{kept}/reset", json={}).status_code == 200
        assert client.get("/health").json()["sessions"] == 2


def test_the_background_reaper_closes_idle_sessions_of_both_transports():
    with _serving(create_app(EnvServerConfig(idle_timeout_s=1.0))) as running:
        over_http = _remote(running.url, "math/solve-v0")
        over_ws = _remote(running.url, "math/solve-v0", transport="ws")
        deadline = time.monotonic() + STARTUP_S
        while httpx.get(running.url + "/health", timeout=CALL_S).json()["sessions"]:
            assert time.monotonic() < deadline, "idle sessions were never closed"
            time.sleep(0.05)
        with pytest.raises(EnvRequestError, match="expired: idle for more than") as refused:
            over_http.reset(seed=0)
        assert refused.value.status == 404 and refused.value.field == "session_id"
        with pytest.raises(EnvServerError, match="idle for more than idle_timeout_s=1 s"):
            over_ws.reset(seed=0)  # the server closed the connection, saying why
        over_http.close()  # already gone: closing is a no-op


# ---------------------------------------------------------------------- refusals


def _session(client, env_id="math/reflection-v0", **kwargs) -> str:
    answer = client.post("/sessions", json={"env_id": env_id, "kwargs": kwargs})
    assert answer.status_code == 201, answer.text
    return answer.json()["session_id"]


def _refused(answer, status: int, field: str, *words: str) -> None:
    body = answer.json()
    assert answer.status_code == status, body
    assert body["field"] == field and body["error"].startswith(f"{field}: "), body
    for word in words:
        assert word in body["error"], body


@pytest.mark.parametrize(
    ("body", "status", "field", "words"),
    [
        ({"env_id": "math/reflection-v9"}, 404, "env_id", ["Did you mean 'math/reflection-v0'"]),
        ({"env_id": "Reflection"}, 422, "env_id", ["namespace/name-vN"]),
        ({"env_id": 3}, 422, "env_id", ["valid string"]),
        ({"env_id": "math/solve-v0", "extra": 1}, 422, "extra", ["not permitted"]),
        ({"env_id": "math/solve-v0", "kwargs": []}, 422, "kwargs", ["dictionary"]),
        (
            {"env_id": "math/reflection-v0", "kwargs": {"rounds": 0}},
            422,
            "kwargs.rounds",
            ["rounds must be an int >= 1"],
        ),
        (
            {"env_id": "math/reflection-v0", "kwargs": {"bogus": 1}},
            422,
            "kwargs.bogus",
            ["unexpected keyword argument"],
        ),
        (
            {"env_id": "math/solve-v0", "kwargs": {"task_kwargs": {"difficulty": 99}}},
            422,
            "kwargs.task_kwargs.difficulty",
            ["1..5"],
        ),
        (
            {"env_id": "math/solve-v0", "kwargs": {"task": "nope"}},
            422,
            "kwargs.task",
            ["no task named 'nope'"],
        ),
        (
            {"env_id": "math/solve-v0", "kwargs": {"data_path": "/etc/passwd"}},
            422,
            "kwargs.data_path",
            ["operator only"],
        ),
        (
            {"env_id": "math/solve-v0", "kwargs": {"task_kwargs": {"data_path": "/etc"}}},
            422,
            "kwargs.task_kwargs.data_path",
            ["operator only"],
        ),
        (
            {"env_id": "math/solve-v0", "kwargs": {"verifier": "os:system"}},
            422,
            "kwargs.verifier",
            ["registered name"],
        ),
        (
            {"env_id": "math/solve-v0", "kwargs": {"verifier": "remote:http://10.0.0.1/math"}},
            422,
            "kwargs.verifier",
            ["registered name"],
        ),
        (
            {"env_id": "math/debate-v0", "kwargs": {"num_agents": 10**7}},
            422,
            "kwargs.num_agents",
            ["limit of 64"],
        ),
        (
            {"env_id": "math/debate-v0", "kwargs": {"instructions": ["a", 10**12]}},
            422,
            "kwargs.instructions.1",
            ["limit of 1000000000"],
        ),
    ],
)
def test_bad_session_requests_name_the_field(app_client, body, status, field, words):
    _refused(app_client.post("/sessions", json=body), status, field, *words)
    assert app_client.get("/health").json()["sessions"] == 0


def test_malformed_bodies_name_the_body(app_client):
    _refused(app_client.post("/sessions", content=b"{nope"), 422, "body", "not JSON")
    deep = b"[" * 100_000 + b"]" * 100_000  # deeper than Python's parser recurses
    _refused(app_client.post("/sessions", content=deep), 413, "body", "max_body_bytes=20000")
    nested = b"[" * 5_000 + b"]" * 5_000
    _refused(app_client.post("/sessions", content=nested), 422, "body", "not JSON")
    big = {"env_id": "math/solve-v0", "kwargs": {"instructions": ["x" * 30_000]}}
    _refused(app_client.post("/sessions", json=big), 413, "body", "max_body_bytes=20000")


def test_bad_episode_requests_name_the_field(app_client):
    sid = _session(app_client, rounds=1)
    url = f"/sessions/{sid}"
    _refused(app_client.post(url + "/step", json={"action": "x"}), 409, "action", "reset")
    _refused(app_client.get(url + "/render"), 409, "session_id", "reset")
    _refused(app_client.post(url + "/reset", json={"seed": 1.5}), 422, "seed", "integer")
    _refused(app_client.post(url + "/reset", json={"seed": 2**70}), 422, "seed", "2**63")
    _refused(app_client.post(url + "/reset", json={"options": "x"}), 422, "options")
    bad_id = {"options": {"problem_id": "arithmetic/train/d999999999/s0/0"}}
    _refused(app_client.post(url + "/reset", json=bad_id), 422, "options", "outside 1..5")
    assert app_client.post(url + "/reset", json={"seed": 0}).status_code == 200
    wrong = {"action": "x", "agent": "critic_0"}
    _refused(app_client.post(url + "/step", json=wrong), 409, "agent", "'solver_0''s turn")
    _refused(app_client.post(url + "/step", json={"action": 5}), 422, "action", "string")
    _refused(app_client.post(url + "/step", json={"action": None}), 422, "action", "NoneType")
    _refused(app_client.post(url + "/step", json={"actions": {}}), 422, "action", "Field required")
    state = app_client.get(url + "/state").json()
    while not state["done"]:  # solver, critic, refiner, then each agent's dead step (None)
        agent = state["agent_selection"]
        dead = state["terminations"][agent] or state["truncations"][agent]
        action = None if dead else "\\boxed{2}"
        state = app_client.post(url + "/step", json={"action": action, "agent": agent}).json()
    assert state["agents"] == [] and state["step_count"] == 6
    _refused(app_client.post(url + "/step", json={"action": "x"}), 409, "action", "is over")
    _refused(app_client.get("/sessions/nope/state"), 404, "session_id", "no session 'nope'")
    assert app_client.delete(url).json() == {"session_id": sid, "closed": True}
    _refused(app_client.get(url + "/state"), 404, "session_id", "deleted by its client")


def test_bad_parallel_steps_name_the_field(app_client):
    sid = _session(app_client, "math/debate-v0", num_agents=2, rounds=1)
    url = f"/sessions/{sid}"
    app_client.post(url + "/reset", json={"seed": 0})
    _refused(app_client.post(url + "/step", json={"action": "x"}), 422, "actions")
    half = {"actions": {"debater_0": "x"}}
    _refused(app_client.post(url + "/step", json=half), 422, "actions", "missing actions")
    typed = {"actions": {"debater_0": "x", "debater_1": 1}}
    _refused(app_client.post(url + "/step", json=typed), 422, "actions.debater_1", "string")
    both = {"actions": {"debater_0": "x", "debater_1": "y"}}
    assert app_client.post(url + "/step", json=both).json()["done"]
    _refused(app_client.post(url + "/step", json=both), 409, "actions", "is over")


def test_too_many_sessions_is_429(app_client):
    for _ in range(4):
        _session(app_client, "math/solve-v0")
    answer = app_client.post("/sessions", json={"env_id": "math/solve-v0"})
    _refused(answer, 429, "sessions", "max_sessions=4")
    assert answer.headers["retry-after"] == "1"


def test_a_failing_env_is_500_and_the_server_goes_on():
    class Broken(SolveEnv):
        def step(self, action):
            raise ZeroDivisionError("the env's own bug")

    envs.register("test/broken-v0", lambda **kw: Broken(**kw), max_turns=1)
    try:
        with TestClient(create_app()) as client:
            sid = _session(client, "test/broken-v0")
            client.post(f"/sessions/{sid}/reset", json={})
            answer = client.post(f"/sessions/{sid}/step", json={"action": "x"})
            _refused(answer, 500, "server", "ZeroDivisionError: the env's own bug")
            assert client.get("/health").json()["status"] == "healthy"
            assert client.get(f"/sessions/{sid}/state").status_code == 200
    finally:
        envs.deregister("test/broken-v0")


def test_client_refusals_are_request_errors(server):
    with pytest.raises(EnvRequestError, match=r"HTTP 404.*Did you mean") as unknown:
        _remote(server.url, "math/reflection-v9")
    assert unknown.value.field == "env_id" and isinstance(unknown.value, ValueError)
    with pytest.raises(EnvRequestError, match="rounds must be an int") as bad:
        _remote(server.url, "math/reflection-v0", transport="ws", rounds=0)
    assert bad.value.status == 422 and bad.value.field == "kwargs.rounds"
    with pytest.raises(TypeError, match="RemoteParallelEnv"):
        RemoteAECEnv(server.url, "math/debate-v0", timeout_s=CALL_S)
    with pytest.raises(ValueError, match="http"):
        _remote("ftp://127.0.0.1:1", "math/solve-v0")
    env = _remote(server.url, "math/solve-v0")
    env.reset(seed=0)
    with pytest.raises(TypeError, match=r"action of 'solver_0' must be a str.*got int"):
        env.step(12345)
    env.close()
    with pytest.raises(EnvRequestError, match="is closed"):
        env.reset()


# ---------------------------------------------------------------------- WebSocket


def test_websocket_protocol_round_trip(app_client):
    with app_client.websocket_connect("/ws") as ws:

        def send(kind: str, data=None) -> dict:
            ws.send_text(json.dumps({"type": kind, **({} if data is None else {"data": data})}))
            return ws.receive_json()

        early = send("step", {"action": "x"})
        assert early["type"] == "error" and early["data"]["status"] == 409
        made = send("create", {"env_id": "math/reflection-v0", "kwargs": {"rounds": 1}})
        assert made["type"] == "session" and made["data"]["api"] == "aec"
        sid = made["data"]["session_id"]
        assert app_client.get(f"/sessions/{sid}").json()["possible_agents"][0] == "solver_0"
        reset = send("reset", {"seed": 2, "episode_id": "ep-1"})
        assert reset["type"] == "observation" and reset["data"]["episode_id"] == "ep-1"
        assert reset["data"]["agent_selection"] == "solver_0"
        stepped = send("step", {"action": "\\boxed{4}", "agent": "solver_0"})
        assert stepped["data"]["step_count"] == 1
        assert stepped["data"]["agent_selection"] == "critic_0"
        assert send("state")["data"] == stepped["data"]
        assert send("render") == {"type": "render", "data": {"render": None}}
        fork = send("fork")
        assert fork["type"] == "session" and fork["data"]["session_id"] != sid
        for message, status, field in [
            ("{nope", 422, "body"),
            (json.dumps({"type": "dance"}), 422, "type"),
            (json.dumps({"type": "state", "extra": 1}), 422, "extra"),
            (json.dumps({"type": "step", "data": {"action": 5}}), 422, "action"),
            (json.dumps({"type": "step", "data": {"action": "x", "agent": "x"}}), 409, "agent"),
            (json.dumps({"type": "create", "data": {"env_id": "math/solve-v0"}}), 409, "type"),
            (json.dumps({"type": "state", "data": "x" * 30_000}), 413, "body"),
        ]:
            ws.send_text(message)
            error = ws.receive_json()
            assert error["type"] == "error", error
            assert (error["data"]["status"], error["data"]["field"]) == (status, field), error
        assert send("close") == {"type": "closed", "data": {"session_id": sid}}
    assert app_client.get(f"/sessions/{sid}").status_code == 404
    # the fork lives on over HTTP until closed
    forked = fork["data"]["session_id"]
    assert app_client.get(f"/sessions/{forked}/state").json()["step_count"] == 1


def test_websocket_session_closes_with_its_connection(app_client):
    with app_client.websocket_connect("/ws") as ws:
        ws.send_json({"type": "create", "data": {"env_id": "math/solve-v0"}})
        sid = ws.receive_json()["data"]["session_id"]
        assert app_client.get("/health").json()["sessions"] == 1
    deadline = time.monotonic() + STARTUP_S
    while app_client.get("/health").json()["sessions"] and time.monotonic() < deadline:
        time.sleep(0.02)
    _refused(app_client.get(f"/sessions/{sid}"), 404, "session_id", "WebSocket connection ended")


# ---------------------------------------------------------------------- JSON


@dataclasses.dataclass
class _Point:
    x: int
    y: tuple


def test_jsonable_makes_any_value_json():
    value = {
        "nan": float("nan"),
        "inf": float("-inf"),
        "tuple": (1, "a", None),
        "set": {3, 1},
        "np": [np.int64(3), np.float32(0.5), np.bool_(True), np.arange(3)],
        "point": _Point(1, (2,)),
        1: b"\xff ok",
        "object": object(),
        "deep": [[[[1]]]],
        "surrogate": "a\ud800b",
    }
    out = jsonable(value)
    text = json.dumps(out, ensure_ascii=True, allow_nan=False)  # strict JSON: no NaN
    assert json.loads(text) == out
    assert out["nan"] == "nan" and out["inf"] == "-inf" and math.isinf(float(out["inf"]))
    assert out["tuple"] == [1, "a", None] and out["set"] == [1, 3]
    assert out["np"] == [3, 0.5, True, [0, 1, 2]] and out["point"] == {"x": 1, "y": [2]}
    assert out["1"] == "\\xff ok" and out["object"].startswith("<object object")
    assert out["surrogate"] == "a\ud800b"
    cyclic: list = []
    cyclic.append(cyclic)
    assert isinstance(json.dumps(jsonable(cyclic)), str)  # nesting is cut, not a RecursionError


def test_spaces_round_trip_through_their_description():
    env = envs.make("math/debate-v0")
    for space in (env.observation_space("debater_0"), env.action_space("debater_0")):
        assert build_space(json.loads(json.dumps(describe_space(space)))) == space
    with pytest.raises(ValueError, match=r"observation_spaces\.a: unknown space type 'Box'"):
        build_space({"type": "Box"}, "observation_spaces.a")


class OddInfosEnv(SolveEnv):
    """Infos holding values JSON has no word for."""

    def step(self, action):
        super().step(action)
        self.infos["solver_0"].update(votes=(1, 2), spread=float("nan"), seen={"b", "a"})


def test_odd_infos_are_served_as_json(server):
    envs.register("test/odd-v0", lambda **kw: OddInfosEnv(**kw), max_turns=1)
    try:
        env = _remote(server.url, "test/odd-v0")
        env.reset(seed=0)
        env.step("\\boxed{1}")
        info = env.infos["solver_0"]
        assert (info["votes"], info["spread"], info["seen"]) == ([1, 2], "nan", ["a", "b"])
        env.close()
    finally:
        envs.deregister("test/odd-v0")


# ---------------------------------------------------------------------- one command, killed


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_killed_server_gives_a_clear_error_not_a_default():
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "scripts/serve_envs.py", "--port", str(port), "--log-level"]
    process = subprocess.Popen(
        [*command, "warning", "--env", "math/reflection-v0", "--idle-timeout", "60"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            try:
                assert httpx.get(url + "/envs", timeout=1).json()["envs"][0]["id"] == (
                    "math/reflection-v0"
                )
                break
            except httpx.TransportError:
                assert process.poll() is None, process.communicate()[0]
                assert time.monotonic() < deadline, f"server did not start in {STARTUP_S} s"
                time.sleep(0.2)
        remotes = {t: _remote(url, "math/reflection-v0", transport=t) for t in TRANSPORTS}
        for env in remotes.values():
            env.reset(seed=0)
            env.step("\\boxed{1}")
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
        for transport, env in remotes.items():
            before = (env.agent_selection, dict(env.rewards), env.step_count)
            with pytest.raises(EnvServerError) as failed:
                env.step("Verdict: correct")
            message = str(failed.value)
            assert url in message and env.session_id in message, message
            assert not isinstance(failed.value, EnvRequestError), transport
            assert failed.value.status is None
            assert (env.agent_selection, dict(env.rewards), env.step_count) == before
        with pytest.raises(EnvServerError, match="unreachable"):
            _remote(url, "math/reflection-v0")
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=60)


@pytest.mark.slow  # two more runs of the script; its smoke run is the killed-server test
def test_serve_script_refuses_bad_arguments():
    run = [sys.executable, "scripts/serve_envs.py"]
    bad = subprocess.run(
        [*run, "--env", "math/reflection-v9"], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert bad.returncode == 2 and "Did you mean 'math/reflection-v0'" in bad.stderr
    orphan = subprocess.run(
        [*run, "--env-kwargs", "{}"], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert orphan.returncode == 2 and "must follow the --env" in orphan.stderr


def test_operator_kwargs_apply_and_blocked_ones_stay_blocked():
    config = EnvServerConfig(
        envs=("math/solve-v0",), env_kwargs={"math/solve-v0": {"task": "unknown"}}
    )
    with TestClient(create_app(config)) as client:
        sid = _session(client, "math/solve-v0")
        state = client.post(f"/sessions/{sid}/reset", json={"seed": 0}).json()
        assert state["infos"]["solver_0"]["problem_id"].startswith("unknown/")
        served = client.get("/envs").json()
        assert [e["id"] for e in served["envs"]] == ["math/solve-v0"]
        assert "env_kwargs" not in served["limits"]
        _refused(client.post("/sessions", json={"env_id": "math/debate-v0"}), 404, "env_id")


# ---------------------------------------------------------------------- load test


def test_bench_serve_smoke(tmp_path, run_script):
    out = tmp_path / "serve.json"
    args = ("serve", "--sessions", "3", "--episodes", "2", "--json", str(out))
    result = run_script("bench.py", *args, timeout=3 * STARTUP_S)
    assert result.returncode == 0, result.stderr[-3000:]
    figures = json.loads(out.read_text())
    steps = figures["in_process"]["steps"]
    assert steps == 3 * 2 * (1 + 5 + 3)  # reset + 5 turns + 3 dead steps per episode
    for transport in TRANSPORTS:
        row = figures[transport]
        assert row["steps"] == steps and row["steps_per_s"] > 0
        assert row["client_wait_us_per_step"] > 0 and row["client_cpu_us_per_step"] > 0
        assert row["server_cpu_us_per_step"] is None or row["server_cpu_us_per_step"] >= 0
    assert "ws" in result.stdout and "overhead" in result.stdout


def test_server_threads_leave_with_it():
    before = threading.active_count()
    with _serving(create_app()) as running:
        env = _remote(running.url, "math/solve-v0")
        env.reset(seed=0)
    deadline = time.monotonic() + STARTUP_S
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= before


# ---------------------------------------------------------------------- import cost


def test_import_envs_loads_no_networking_code():
    """`import envs` imports neither the serving package nor any HTTP library; `envs.remote`
    loads the client on first use."""
    probe = (
        "import sys, envs\n"
        "heavy = ('envs.serving', 'rewards.serving', 'httpx', 'fastapi', 'starlette', 'uvicorn',"
        " 'websockets')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy or m.startswith(heavy)))\n"
        "envs.remote\n"
        "print('envs.serving.client' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["[]", "True"]


# ---------------------------------------------------------------------- OpenEnv's own client


def _openenv_client(url: str):
    """`openenv-core`'s stock `GenericEnvClient` (sync wrapper) for `url`; skips without it."""
    generic = pytest.importorskip(
        "openenv.core.generic_client",
        reason="openenv-core is not installed (pip install -e '.[dev]' installs it)",
    )
    return generic.GenericEnvClient(base_url=url, message_timeout_s=CALL_S).sync()


def _one_env_server(env_id: str, **kwargs):
    config = EnvServerConfig(envs=(env_id,), env_kwargs={env_id: kwargs}, idle_timeout_s=600)
    return _serving(create_app(config))


def test_openenv_client_plays_a_served_single_agent_env():
    """OpenEnv's GenericEnvClient against ``serve_envs.py --env math/solve-v0``: a session per
    connection, reset / step / state, and what it sees is what the local env gives."""
    local = envs.make("math/solve-v0")
    local.reset(seed=4)
    prompt = local.observe("solver_0")
    with _one_env_server("math/solve-v0") as running, _openenv_client(running.url) as client:
        first = client.reset(seed=4)
        assert first.done is False and first.reward is None
        assert first.observation["agent"] == "solver_0"
        assert first.observation["observation"] == jsonable(prompt)
        assert client.state()["step_count"] == 0
        reply = "Adding them up: \\boxed{7}"
        local.step(reply)
        stepped = client.step({"text": reply})
        assert stepped.done is True
        assert stepped.reward == local.rewards["solver_0"]
        assert stepped.observation["agent"] is None and stepped.observation["agents"] == []
        assert stepped.observation["rewards"] == {"solver_0": local.rewards["solver_0"]}
        state = client.state()
        assert state["step_count"] == 1 and state["done"] is True and state["episode_id"]
        again = client.reset(seed=4)  # the same connection, a new episode
        assert again.observation["observation"] == first.observation["observation"]


def test_openenv_client_plays_a_served_multi_agent_env():
    """math/reflection-v0 through GenericEnvClient: each step carries the acting agent's text,
    each observation names the agent to act next; the turns, observations and rewards are the
    local env's, dead steps taken by the server."""
    kwargs = {"rounds": 1}
    local = envs.make("math/reflection-v0", **kwargs)
    local.reset(seed=2)
    server = _one_env_server("math/reflection-v0", **kwargs)
    with server as running, _openenv_client(running.url) as client:
        result = client.reset(seed=2)
        turn, acted = 0, []
        while not result.done:
            agent = result.observation["agent"]
            assert agent == local.agent_selection
            assert result.observation["observation"] == jsonable(local.observe(agent))
            reply = _reply(agent, turn)
            local.step(reply)
            expected = float(local.rewards[agent])
            result = client.step({"text": reply, "agent": agent})
            assert result.reward == expected
            assert result.observation["rewards"] == jsonable(dict(local.rewards))
            acted.append(agent)
            turn += 1
            while local.agents and (
                local.terminations[local.agent_selection]
                or local.truncations[local.agent_selection]
            ):
                local.step(None)
        assert acted == ["solver_0", "critic_0", "refiner_0"]
        assert not local.agents and result.observation["agents"] == []
        assert client.state()["step_count"] == 3
        client.reset(seed=2)
        with pytest.raises(RuntimeError, match="NOT_YOUR_TURN"):
            client.step({"text": "x", "agent": "critic_0"})
        with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
            client.step({"answer": "x"})


def test_openenv_http_routes_are_stateless_and_need_one_env():
    config = EnvServerConfig(envs=("math/solve-v0",), idle_timeout_s=60)
    with TestClient(create_app(config)) as client:
        reset = client.post("/reset", json={"seed": 1}).json()
        assert set(reset) == {"observation", "reward", "done"}
        assert reset["observation"]["agent"] == "solver_0" and reset["done"] is False
        step = client.post("/step", json={"action": {"text": "\\boxed{1}"}, "seed": 1}).json()
        assert step["done"] is True and isinstance(step["reward"], float)
        assert step["observation"]["step_count"] == 1
        state = client.get("/state").json()
        assert state["episode_id"] is None and state["step_count"] == 0
        assert client.get("/metadata").json()["name"] == "math/solve-v0"
        schema = client.get("/schema").json()
        assert set(schema) == {"action", "observation", "state"}
        assert "text" in schema["action"]["properties"]
        assert client.app.store.sessions == {}  # every stateless request closed its session
        _refused(client.post("/step", json={"action": {"txt": "1"}}), 422, "action.txt")
    with TestClient(create_app(EnvServerConfig(idle_timeout_s=60))) as client:
        _refused(client.post("/reset", json={}), 409, "env_id")
        with client.websocket_connect("/ws") as ws:
            ws.send_text(json.dumps({"type": "reset", "data": {}}))
            reply = ws.receive_json()
            assert reply["type"] == "error" and reply["data"]["code"] == "NO_SESSION"
