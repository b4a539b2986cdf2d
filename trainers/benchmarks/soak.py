"""``bench.py soak`` (also ``scripts/soak.py`` and ``mathteams soak``): the env server and the
reward server under load and faults, on loopback, bounded in count and time.

What runs. Both servers start as processes of their own (``python -m envs.serving.cli``,
``python -m rewards.serving.cli``) on free loopback ports. ``sessions`` client threads each hold
one session of the env server (half over HTTP, half over the WebSocket; sessions of
``math/reflection-v0`` (AEC) and ``math/debate-v0`` (Parallel) alternate) and play episodes with
scripted or random text (`agents.ScriptedPolicy`, `agents.RandomTextPolicy`; no model), a few
episodes per session before closing it and opening the next. ``verify_threads`` threads call the
reward server's ``POST /verify`` (`rewards.RemoteVerifier`, no retries) with batches whose right
verdicts are known. Meanwhile, the faults:

- client kills: ``kills`` times, at random moments, a random client dies mid-episode: it drops its
  connection without closing its session (half of them right after sending a step, before the
  answer), and its thread goes on as a new client;
- server restarts: the env server is killed (SIGKILL, a crash) at 30 % of the run and started
  again on the same port; the reward server is stopped (SIGTERM) at 55 % and started again;
- protocol faults, one every ``fault_every_s``: requests each server must refuse (unknown or lost
  sessions, malformed or oversized bodies, unknown envs and verifiers, a step before a reset,
  after the episode, out of turn, a non-string action, WebSocket messages out of order).

The contract checked (every breach is a violation; the run fails with any):

- A session whose client did not die is never lost while its server runs: every call on it
  succeeds until its client closes it. The one exception is a server restart: sessions live in
  the env server's memory (`envs.serving.sessions`), so a restart loses them all; then each call
  on such a session fails with a clear error naming what happened (``UNREACHABLE`` or
  ``CONNECTION_LOST`` while the server is down or as the WebSocket drops, 404 ``SESSION_LOST``
  from the new run, which names the restart) and the client can open a new session once the
  server is back (every client does, and is counted as recovered).
- A killed client's session: over the WebSocket, the server closes it with the connection
  (``SESSION_CLOSED`` naming it); over HTTP it stays open (it is not lost: its client may come
  back) until the idle reaper closes it after ``idle_timeout_s`` (``SESSION_CLOSED``, "expired").
  After the run, once every client closed its session, the server holds no session.
- Every fault is answered with the expected status and a message (no hang: no call runs into
  the client's timeout; no 5xx without a message), and every verdict is right.
- Memory: the resident memory (``VmRSS`` of ``/proc/PID/status``) of each server process, after a
  warm-up, stays within ``memory_tolerance`` (10 %) of its value at the end of the warm-up, at the
  middle and the end of the process's time under load (checked for processes whose time under
  load after the warm-up is at least the warm-up's; the others are reported only).

Reported: step latency (p50, p99, per transport and overall, successful steps only, as the client
waits), verify latency, counts (sessions, episodes, steps, verify batches), faults injected per
kind, errors seen per kind (explained by the contract, or violations), and each server process's
resident memory at the start (after warm-up), the middle and the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trainers.benchmarks.common import REPO, add_json_argument

NAME = "soak"

ENVS = ("math/reflection-v0", "math/debate-v0")
# Errors a call on a session of a killed server run may end with (`EnvServerError.code`).
RESTART_CODES = frozenset({"UNREACHABLE", "CONNECTION_LOST", "SESSION_LOST"})
GRACE_S = 3.0  # after a restarted server answers, connection errors still count as its restart


@dataclass
class SoakConfig:
    """What a soak runs (`run_soak`); the command line's flags set the same fields."""

    sessions: int = 64
    seconds: float = 600.0
    task: str = "arithmetic"
    kills: int | None = None  # None: one per 20 s of run, at least one
    restarts: tuple[str, ...] = ("env", "rewards")
    verify_threads: int = 4
    idle_timeout_s: float = 30.0
    server_workers: int = 8
    client_timeout_s: float = 60.0
    fault_every_s: float = 0.5
    warmup_s: float | None = None  # None: 10 % of the run, at most 60 s
    check_memory: bool = True
    memory_tolerance: float = 0.10
    seed: int = 0
    startup_timeout_s: float = 300.0
    max_body_bytes: int = 1 << 20
    max_batch: int = 64

    def __post_init__(self) -> None:
        if self.sessions < 1 or self.seconds <= 0 or self.verify_threads < 0:
            raise ValueError("sessions >= 1, seconds > 0 and verify_threads >= 0 are needed")
        unknown = set(self.restarts) - {"env", "rewards"}
        if unknown:
            raise ValueError(f"restarts must name 'env' and/or 'rewards', got {sorted(unknown)}")

    @property
    def kill_count(self) -> int:
        return max(1, int(self.seconds // 20)) if self.kills is None else self.kills

    @property
    def warmup(self) -> float:
        return min(60.0, 0.1 * self.seconds) if self.warmup_s is None else self.warmup_s


# ---------------------------------------------------------------------- server processes


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def rss_kb(pid: int) -> int | None:
    """The resident memory of process `pid` in KiB (``VmRSS`` of /proc/PID/status), or None."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


class ServerProcess:
    """One server (`module`'s command line) in its own process on a fixed loopback port, which
    can be killed and started again on the same port. ``runs`` counts its starts."""

    def __init__(self, name: str, module: str, args: Sequence[str]) -> None:
        self.name, self.module, self.args = name, module, list(args)
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None
        self.log: Any = None
        self.runs = 0
        self.run_id: str | None = None  # the env server's run id (GET /health)
        self.started_at = 0.0  # monotonic time it answered its first /health
        self.serving = False  # between its first /health answer and its kill or stop

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def start(self, timeout_s: float) -> None:
        import httpx

        if self.log is not None:
            self.log.close()
        self.log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed on the next start/stop
        path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        command = [sys.executable, "-m", self.module, "--port", str(self.port), *self.args]
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=self.log,
            env={**os.environ, "PYTHONPATH": path},
        )
        deadline = time.monotonic() + timeout_s
        with httpx.Client(timeout=5) as client:
            while True:
                if self.process.poll() is not None:
                    raise RuntimeError(f"the {self.name} server exited: {self.log_tail()}")
                try:
                    answer = client.get(self.url + "/health")
                    if answer.status_code == 200:
                        self.run_id = answer.json().get("run_id")
                        break
                except httpx.TransportError:
                    pass  # not listening yet
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the {self.name} server did not answer in {timeout_s} s")
                time.sleep(0.1)
        self.runs += 1
        self.started_at = time.monotonic()
        self.serving = True

    def log_tail(self) -> str:
        if self.log is None:
            return ""
        self.log.seek(0)
        return self.log.read()[-2000:]

    def signal(self, sig: int) -> None:
        """Send `sig` and wait for the process to end (SIGKILL after 30 s)."""
        self.serving = False
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(sig)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)

    def stop(self) -> None:
        self.signal(signal.SIGTERM)
        if self.log is not None:
            self.log.close()
            self.log = None


def _env_server(config: SoakConfig) -> ServerProcess:
    args = []
    for env_id in ENVS:
        args += ["--env", env_id]
    args += [
        "--max-sessions",
        str(2 * config.sessions + config.kill_count + 32),
        "--idle-timeout",
        str(config.idle_timeout_s),
        "--step-timeout",
        str(config.client_timeout_s / 2),
        "--workers",
        str(config.server_workers),
        "--max-body-bytes",
        str(config.max_body_bytes),
        "--log-level",
        "warning",
    ]
    return ServerProcess("env", "envs.serving.cli", args)


def _reward_server(config: SoakConfig) -> ServerProcess:
    args = ["--verifier", "math", "--max-batch", str(config.max_batch), "--batch-workers", "1"]
    args += ["--request-timeout-s", str(config.client_timeout_s / 2), "--log-level", "warning"]
    return ServerProcess("rewards", "rewards.serving.cli", args)


# ---------------------------------------------------------------------- the shared record


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank `q`-th percentile (0-100) of `values`, or None for none."""
    if not values:
        return None
    ranked = sorted(values)
    return ranked[min(len(ranked), max(1, math.ceil(q / 100 * len(ranked)))) - 1]


@dataclass
class Window:
    """A server restart: from its kill until it answers again (plus `GRACE_S`)."""

    server: str
    began: float
    ended: float = float("inf")

    def holds(self, moment: float) -> bool:
        return self.began <= moment <= self.ended + GRACE_S


@dataclass
class Record:
    """What every thread of a soak reports to; `lock` guards it all."""

    began: float
    deadline: float
    lock: threading.Lock = field(default_factory=threading.Lock)
    counts: Counter = field(default_factory=Counter)
    faults: Counter = field(default_factory=Counter)
    explained: Counter = field(default_factory=Counter)  # errors the contract allows, by kind
    violations: list[str] = field(default_factory=list)
    latency: dict[str, list[float]] = field(default_factory=lambda: {"http": [], "ws": []})
    verify_latency: list[float] = field(default_factory=list)
    windows: list[Window] = field(default_factory=list)
    rss: list[tuple[float, str, int, int]] = field(default_factory=list)  # (t, server, run, kB)

    def over(self) -> bool:
        return time.monotonic() >= self.deadline

    def count(self, key: str, n: int = 1) -> None:
        with self.lock:
            self.counts[key] += n

    def violation(self, message: str) -> None:
        with self.lock:
            self.counts["violations"] += 1
            if len(self.violations) < 200:
                self.violations.append(f"{time.monotonic() - self.began:7.1f}s {message}")

    def explain(self, kind: str) -> None:
        with self.lock:
            self.explained[kind] += 1

    def in_restart(self, server: str, moment: float | None = None) -> bool:
        moment = time.monotonic() if moment is None else moment
        with self.lock:
            return any(w.server == server and w.holds(moment) for w in self.windows)


def _error_kind(exc: BaseException) -> str:
    code = getattr(exc, "code", None)
    status = getattr(exc, "status", None)
    if code:
        return code if status is None else f"{status} {code}"
    return f"HTTP {status}" if status is not None else type(exc).__name__


# ---------------------------------------------------------------------- clients


def _reply(observation: Any, rng: random.Random, noise: Any) -> str:
    """Scripted text that looks like model output, or random text (odd unicode included)."""
    if rng.random() < 0.3:
        return noise.act([observation])[0]
    if isinstance(observation, dict) and observation.get("role") in ("critic", "verifier"):
        verdict = rng.choice(["correct", "incorrect"])
        return f"Step two adds instead of subtracting.\nVerdict: {verdict}"
    return f"I apply each change in order. The final answer is \\boxed{{{rng.randint(0, 40)}}}."


class Client:
    """One client thread: sessions one after another until the run ends, episodes in each."""

    def __init__(self, soak: Soak, index: int) -> None:
        self.soak, self.index = soak, index
        self.rng = random.Random(soak.config.seed * 100_003 + index)
        self.transport = "ws" if index % 2 else "http"
        self.env_id = ENVS[(index // 2) % len(ENVS)]
        self.kill = threading.Event()  # set by the soak: die at the next step
        self.lost_at: float | None = None  # a restart took its session; not yet recovered
        from agents import RandomTextPolicy

        self.noise = RandomTextPolicy(seed=index, max_len=200)

    def run(self) -> None:
        record = self.soak.record
        while not record.over():
            env = self._open()
            if env is None:
                return
            if record.over():  # opened only to show it recovered from a restart
                env.close()
                return
            try:
                self._play(env)
            except Exception as exc:  # noqa: BLE001 - every failure is judged, none escapes
                self._failed(env, exc)

    def _open(self) -> Any:
        """A new session, retried while the env server restarts; None once the run is over."""
        import envs
        from envs.serving.connections import EnvServerError

        record, server = self.soak.record, self.soak.env_server
        # A client whose session a restart took keeps trying past the end, within its timeout.
        while not record.over() or (
            self.lost_at is not None
            and time.monotonic() < record.deadline + self.soak.config.client_timeout_s
        ):
            began = time.monotonic()
            try:
                env = envs.remote(
                    server.url,
                    self.env_id,
                    transport=self.transport,
                    timeout_s=self.soak.config.client_timeout_s,
                    task=self.soak.config.task,
                )
            except EnvServerError as exc:
                kind = _error_kind(exc)
                if exc.code in ("UNREACHABLE", "CONNECTION_LOST") and (
                    record.in_restart("env", began) or record.in_restart("env")
                ):
                    record.explain(f"open during env restart: {kind}")
                    time.sleep(0.2 + 0.3 * self.rng.random())
                    continue
                record.violation(f"client {self.index}: opening a session failed: {exc}")
                time.sleep(1.0)
                continue
            record.count("sessions opened")
            record.count(f"sessions opened ({self.transport})")
            if self.lost_at is not None:
                record.count("clients recovered after a restart")
                self.lost_at = None
            return env
        return None

    def _play(self, env: Any) -> None:
        record = self.soak.record
        for _ in range(self.rng.randint(2, 12)):
            if record.over():
                break
            if not self._episode(env):
                return  # killed
        env.close()
        record.count("sessions closed by their client")

    def _episode(self, env: Any) -> bool:
        """One episode; False when the client was killed in it."""
        from pettingzoo import ParallelEnv

        record, seed = self.soak.record, self.rng.randrange(1 << 30)
        parallel = isinstance(env, ParallelEnv)
        if parallel:
            observations, _ = env.reset(seed=seed)
            while env.agents:
                actions = {a: _reply(observations[a], self.rng, self.noise) for a in env.agents}
                if self.kill.is_set():
                    self._die(env, {"actions": actions})
                    return False
                began = time.perf_counter()
                observations, *_ = env.step(actions)
                self._stepped(time.perf_counter() - began)
        else:
            env.reset(seed=seed)
            for agent in env.agent_iter():
                observation, _, terminated, truncated, _ = env.last()
                dead = terminated or truncated
                action = None if dead else _reply(observation, self.rng, self.noise)
                if self.kill.is_set() and not dead:
                    self._die(env, {"action": action, "agent": agent})
                    return False
                began = time.perf_counter()
                env.step(action)
                self._stepped(time.perf_counter() - began)
        record.count("episodes")
        return True

    def _stepped(self, seconds: float) -> None:
        record = self.soak.record
        with record.lock:
            record.latency[self.transport].append(seconds)
            record.counts["steps"] += 1

    def _die(self, env: Any, body: dict[str, Any]) -> None:
        """Drop the connection without closing the session, as a crashed client does; half the
        time right after sending a step, before its answer."""
        connection = env._connection  # the soak plays a client's crash: below the env's API
        session_id = env.session_id
        mid_request = self.rng.random() < 0.5
        with contextlib.suppress(Exception):
            if connection.transport == "ws":
                ws = connection.socket
                if mid_request:
                    ws.send(json.dumps({"type": "step", "data": body}))
                with contextlib.suppress(OSError):
                    ws.socket.shutdown(socket.SHUT_RDWR)
                ws.close()
            else:
                if mid_request:
                    _send_and_hang_up(connection.url, f"/sessions/{session_id}/step", body)
                connection.abandon()
        env._closed = True  # nothing more is sent for it
        self.kill.clear()
        how = "mid-request" if mid_request else "between steps"
        self.soak.record.count(f"fault: client killed ({self.transport}, {how})")
        self.soak.killed(session_id, self.transport)

    def _failed(self, env: Any, exc: Exception) -> None:
        """A call on `env`'s session failed: explained by a restart of its server, or not."""
        from envs.serving.connections import EnvServerError

        record, kind = self.soak.record, _error_kind(exc)
        session_run = str(env.session_id)[:8]
        with contextlib.suppress(Exception):
            env._connection.abandon()
        env._closed = True
        if (
            isinstance(exc, EnvServerError)
            and exc.code in RESTART_CODES
            and session_run != self.soak.env_server.run_id
        ):
            record.explain(f"session lost to env restart: {kind}")
            record.count("sessions lost to a restart")
            self.lost_at = time.monotonic()
            return
        if kind.endswith("TIMEOUT"):
            record.violation(f"client {self.index}: a call hung past its timeout: {exc}")
        else:
            record.violation(f"client {self.index}: session {env.session_id} failed: {exc!r:.600}")


def _send_and_hang_up(url: str, path: str, body: Any) -> None:
    """Send one HTTP POST and close the socket before the answer comes."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    payload = json.dumps(body, ensure_ascii=True).encode()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n"
    ).encode()
    with socket.create_connection((parts.hostname, parts.port), timeout=5) as raw:
        raw.sendall(head + payload)


# ---------------------------------------------------------------------- verify calls


def _verify_loop(soak: Soak, index: int) -> None:
    """Batches of answers with known verdicts to the reward server, until the run ends."""
    from rewards import RemoteVerifier
    from rewards.remote import RewardServerError

    record, rng = soak.record, random.Random(soak.config.seed * 7919 + index)
    remote = RemoteVerifier(
        soak.reward_server.url, "math", timeout_s=soak.config.client_timeout_s, retries=0
    )
    while not record.over():
        size = rng.randint(1, 8)
        references = [str(rng.randint(-50, 500)) for _ in range(size)]
        right = [rng.random() < 0.5 for _ in range(size)]
        responses = [
            f"Adding the parts: \\boxed{{{ref if ok else int(ref) + 1}}}"
            for ref, ok in zip(references, right, strict=True)
        ]
        began = time.monotonic()
        try:
            verdicts = remote.verify_batch(responses, references)
        except RewardServerError as exc:
            kind = "reward " + (f"HTTP {exc.status}" if exc.status else "unreachable")
            if exc.status is None and (
                soak.record.in_restart("rewards", began) or soak.record.in_restart("rewards")
            ):
                record.explain(f"verify during reward restart: {kind}")
                time.sleep(0.2)
                continue
            if "timed out" in str(exc):
                record.violation(f"verify {index}: a call hung past its timeout: {exc}")
            else:
                record.violation(f"verify {index}: {exc!r:.600}")
            time.sleep(0.5)
            continue
        with record.lock:
            record.verify_latency.append(time.monotonic() - began)
            record.counts["verify batches"] += 1
            record.counts["verify items"] += size
        wrong = [
            (r, v.score)
            for r, v, ok in zip(references, verdicts, right, strict=True)
            if v.score != (1.0 if ok else 0.0)
        ]
        if wrong:
            record.violation(f"verify {index}: wrong verdicts (reference, score): {wrong[:3]}")


# ---------------------------------------------------------------------- protocol faults


class Faults:
    """Requests each server must refuse, one at a time, each checked for its status and a
    message (no hang: the client's timeout bounds each)."""

    def __init__(self, soak: Soak) -> None:
        import httpx

        self.soak = soak
        self.rng = random.Random(soak.config.seed * 31 + 1)
        self.http = httpx.Client(timeout=soak.config.client_timeout_s)
        self.kinds: list[tuple[str, str, Callable[[], None]]] = [
            ("env", "unknown session", self.unknown_session),
            ("env", "session of another run", self.lost_session),
            ("env", "malformed JSON", self.malformed_json),
            ("env", "unknown env", self.unknown_env),
            ("env", "oversized body", self.oversized_body),
            ("env", "step before reset", self.step_before_reset),
            ("env", "non-string action", self.non_string_action),
            ("env", "step out of turn", self.out_of_turn),
            ("env", "step after the episode", self.after_episode),
            ("env", "WebSocket out of order", self.websocket_out_of_order),
            ("rewards", "unknown verifier", self.unknown_verifier),
            ("rewards", "empty reference", self.empty_reference),
            ("rewards", "malformed verify JSON", self.malformed_verify),
            ("rewards", "batch over max_batch", self.batch_too_large),
        ]

    def loop(self) -> None:
        import httpx

        record, every = self.soak.record, self.soak.config.fault_every_s
        try:
            while not record.over():
                time.sleep(every)
                server, name, fault = self.rng.choice(self.kinds)
                began = time.monotonic()
                try:
                    fault()
                    record.count(f"fault: {name}")
                except httpx.TimeoutException as exc:
                    record.violation(f"fault {name!r} hung past the timeout: {exc!r}")
                except (httpx.TransportError, OSError) as exc:
                    if record.in_restart(server, began) or record.in_restart(server):
                        record.explain(f"fault during {server} restart: {type(exc).__name__}")
                    else:
                        record.violation(f"fault {name!r}: no answer: {exc!r:.300}")
                except AssertionError as exc:
                    if record.in_restart(server, began) or record.in_restart(server):
                        record.explain(f"fault during {server} restart: answered otherwise")
                    else:
                        record.violation(f"fault {name!r}: {exc}")
        finally:
            self.http.close()

    # The checks

    def refused(self, answer: Any, status: int, code: str | None = None) -> None:
        """`answer` has `status`, a JSON body with a message (and for the env server, the
        field and the `code`)."""
        try:
            body = answer.json()
        except ValueError:
            body = None
        assert isinstance(body, dict) and isinstance(body.get("error"), str) and body["error"], (
            f"HTTP {answer.status_code} without a message: {answer.text[:200]!r}"
        )
        assert answer.status_code == status, (
            f"answered HTTP {answer.status_code}, expected {status}: {body['error'][:200]}"
        )
        if code is not None:
            assert body.get("code") == code and body.get("field"), (
                f"answered code {body.get('code')!r} field {body.get('field')!r}, expected {code}"
            )

    def env(self, method: str, path: str, **kwargs: Any) -> Any:
        return self.http.request(method, self.soak.env_server.url + path, **kwargs)

    def session(self, env_id: str = "math/reflection-v0") -> str:
        answer = self.env(
            "POST", "/sessions", json={"env_id": env_id, "kwargs": {"task": "arithmetic"}}
        )
        assert answer.status_code == 201, f"making a session answered {answer.status_code}"
        return answer.json()["session_id"]

    def delete(self, session_id: str) -> None:
        answer = self.env("DELETE", f"/sessions/{session_id}")
        assert answer.status_code == 200, f"closing a session answered {answer.status_code}"

    # The env server's faults

    def unknown_session(self) -> None:
        answer = self.env("POST", "/sessions/no-such-session/step", json={"action": "1"})
        self.refused(answer, 404, "UNKNOWN_SESSION")

    def lost_session(self) -> None:
        run = self.soak.env_server.run_id or "00000000"
        other = format((int(run, 16) + 1) % (1 << 32), "08x") + "0" * 24
        answer = self.env("POST", f"/sessions/{other}/step", json={"action": "1"})
        self.refused(answer, 404, "SESSION_LOST")

    def malformed_json(self) -> None:
        answer = self.env(
            "POST",
            "/sessions",
            content=b'{"env_id": ',
            headers={"content-type": "application/json"},
        )
        self.refused(answer, 422, "INVALID_JSON")

    def unknown_env(self) -> None:
        answer = self.env("POST", "/sessions", json={"env_id": "math/nosuchenv-v0"})
        self.refused(answer, 404, "UNKNOWN_ENV")

    def oversized_body(self) -> None:
        text = "x" * (self.soak.config.max_body_bytes + 10)
        answer = self.env("POST", "/sessions", json={"env_id": "math/solve-v0", "pad": text})
        self.refused(answer, 413)

    def step_before_reset(self) -> None:
        session_id = self.session()
        try:
            answer = self.env("POST", f"/sessions/{session_id}/step", json={"action": "1"})
            self.refused(answer, 409, "NO_EPISODE")
        finally:
            self.delete(session_id)

    def non_string_action(self) -> None:
        session_id = self.session()
        try:
            self.env("POST", f"/sessions/{session_id}/reset", json={"seed": 1})
            answer = self.env("POST", f"/sessions/{session_id}/step", json={"action": 5})
            self.refused(answer, 422)
        finally:
            self.delete(session_id)

    def out_of_turn(self) -> None:
        session_id = self.session()
        try:
            state = self.env("POST", f"/sessions/{session_id}/reset", json={"seed": 2}).json()
            others = [a for a in state["agents"] if a != state["agent_selection"]]
            body = {"action": "1", "agent": others[0]}
            answer = self.env("POST", f"/sessions/{session_id}/step", json=body)
            self.refused(answer, 409, "NOT_YOUR_TURN")
        finally:
            self.delete(session_id)

    def after_episode(self) -> None:
        session_id = self.session()
        try:
            state = self.env("POST", f"/sessions/{session_id}/reset", json={"seed": 3}).json()
            for _ in range(100):
                if state["done"]:
                    break
                agent = state["agent_selection"]
                over = state["terminations"].get(agent) or state["truncations"].get(agent)
                body = {"action": None if over else "The answer is \\boxed{3}.\nVerdict: correct"}
                answer = self.env("POST", f"/sessions/{session_id}/step", json=body)
                assert answer.status_code == 200, f"a step answered {answer.status_code}"
                state = answer.json()
            answer = self.env("POST", f"/sessions/{session_id}/step", json={"action": "1"})
            self.refused(answer, 409, "EPISODE_OVER")
        finally:
            self.delete(session_id)

    def websocket_out_of_order(self) -> None:
        from websockets.sync.client import connect

        url = self.soak.env_server.url.replace("http://", "ws://") + "/ws"
        timeout = self.soak.config.client_timeout_s
        with connect(url, open_timeout=timeout, compression=None) as ws:
            for message, code in (
                ({"type": "dance"}, "UNKNOWN_TYPE"),
                ({"type": "step", "data": {"action": "1"}}, "NO_SESSION"),
                ({"type": "attach", "data": {"session_id": "nope"}}, "UNKNOWN_SESSION"),
            ):
                ws.send(json.dumps(message))
                reply = json.loads(ws.recv(timeout=timeout))
                data = reply.get("data") or {}
                assert reply.get("type") == "error" and data.get("code") == code, (
                    f"WebSocket {message['type']!r} answered {str(reply)[:200]}, expected {code}"
                )
                assert data.get("message"), f"WebSocket error without a message: {reply}"

    # The reward server's faults

    def verify(self, **kwargs: Any) -> Any:
        return self.http.post(self.soak.reward_server.url + "/verify", **kwargs)

    def unknown_verifier(self) -> None:
        items = [{"response": "1", "reference": "1"}]
        self.refused(self.verify(json={"verifier": "no-such", "items": items}), 404)

    def empty_reference(self) -> None:
        items = [{"response": "1", "reference": ""}]
        self.refused(self.verify(json={"verifier": "math", "items": items}), 422)

    def malformed_verify(self) -> None:
        answer = self.verify(content=b"[1, 2", headers={"content-type": "application/json"})
        self.refused(answer, 422)

    def batch_too_large(self) -> None:
        items = [{"response": "1", "reference": "1"}] * (self.soak.config.max_batch + 1)
        self.refused(self.verify(json={"verifier": "math", "items": items}), 413)


# ---------------------------------------------------------------------- the soak


class Soak:
    """One soak run: the servers, the clients, the faults and the checks (`run_soak`)."""

    def __init__(self, config: SoakConfig) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self.env_server = _env_server(config)
        self.reward_server = _reward_server(config)
        self.record = Record(0.0, 0.0)
        self.clients: list[Client] = []
        self.checks: list[tuple[float, str, str, str, float]] = []  # (due, id, transport, what, t)
        self.checks_lock = threading.Lock()

    # The killed clients' sessions

    def killed(self, session_id: str, transport: str) -> None:
        """Schedule the checks of a killed client's session."""
        now = time.monotonic()
        idle = self.config.idle_timeout_s
        reaped = now + idle + min(max(idle / 4, 0.01), 5.0) + 5.0  # the reaper's interval, slack
        with self.checks_lock:
            if transport == "ws":
                self.checks.append((now + 2.0, session_id, transport, "closed", now))
            else:
                self.checks.append((now + 0.5, session_id, transport, "open", now))
                self.checks.append((reaped, session_id, transport, "closed", now))

    def run_checks(self, final: bool = False) -> None:
        """Run the due checks (with `final`, all of them, waiting until each is due)."""
        import httpx

        while True:
            with self.checks_lock:
                self.checks.sort()
                if not self.checks or (not final and self.checks[0][0] > time.monotonic()):
                    return
                due, session_id, transport, want, killed_at = self.checks.pop(0)
            time.sleep(max(0.0, due - time.monotonic()))
            self._check_killed(httpx, session_id, transport, want, killed_at)

    def _check_killed(
        self, httpx: Any, session_id: str, transport: str, want: str, t: float
    ) -> None:
        record, what = self.record, f"killed {transport} client's session {session_id}"
        for attempt in range(20):  # a WebSocket close, or a reap, may take a moment more
            try:
                answer = httpx.get(f"{self.env_server.url}/sessions/{session_id}", timeout=30)
            except httpx.TransportError:
                if record.in_restart("env"):
                    record.explain("killed-session check during env restart")
                    return
                record.violation(f"{what}: the env server did not answer")
                return
            body = (
                answer.json()
                if answer.headers.get("content-type", "").startswith("application/json")
                else {}
            )
            code = body.get("code") if isinstance(body, dict) else None
            if code == "SESSION_LOST":  # the server restarted since: lost with every session
                record.count("killed sessions then lost to a restart")
                return
            if want == "open":
                if answer.status_code == 200:
                    record.count("killed HTTP sessions kept open")
                else:
                    record.violation(
                        f"{what}: lost right after its client died: {answer.text[:300]}"
                    )
                return
            if answer.status_code == 404 and code == "SESSION_CLOSED":
                record.count(f"killed {transport} sessions closed by the server")
                return
            if answer.status_code != 200 or attempt == 19:
                record.violation(
                    f"{what} not closed as it should be: {answer.status_code} {answer.text[:300]}"
                )
                return
            time.sleep(1.0)

    # The run

    def _sample_rss(self) -> None:
        record = self.record
        while True:
            now = time.monotonic()
            for server in (self.env_server, self.reward_server):
                pid, run = server.pid, server.runs
                kb = None if pid is None or not server.serving else rss_kb(pid)
                if kb is not None:
                    with record.lock:
                        record.rss.append((now, server.name, run, kb))
            if record.over():
                return
            time.sleep(min(1.0, max(0.05, self.config.seconds / 200)))

    def _restart(self, server: ServerProcess, sig: int) -> None:
        record = self.record
        window = Window(server.name, time.monotonic())
        with record.lock:
            record.windows.append(window)
        server.run_id = None  # from now on, sessions of the killed run are lost
        server.signal(sig)
        server.start(self.config.startup_timeout_s)
        window.ended = time.monotonic()
        with record.lock:  # the run's time under load does not count the downtime
            record.deadline += window.ended - window.began
        record.count(f"fault: {server.name} server restarted ({signal.Signals(sig).name})")

    def run(self) -> dict[str, Any]:
        # A client killed by shutting its WebSocket's socket makes websockets' reader thread log
        # "unexpected internal error" (EOFError): the soak's own doing, and the calls that
        # follow raise anyway.
        quiet = logging.getLogger("websockets")
        level, quiet.level = quiet.level, logging.CRITICAL
        try:
            return self._run()
        finally:
            quiet.setLevel(level)

    def _run(self) -> dict[str, Any]:
        config = self.config
        self.env_server.start(config.startup_timeout_s)
        self.reward_server.start(config.startup_timeout_s)
        threads: list[threading.Thread] = []
        try:
            began = time.monotonic()
            self.record = record = Record(began, began + config.seconds)
            self.clients = [Client(self, i) for i in range(config.sessions)]
            faults = Faults(self)
            workers: list[tuple[str, Callable[[], None]]] = [
                (f"soak-client-{c.index}", c.run) for c in self.clients
            ]
            workers += [
                (f"soak-verify-{i}", lambda i=i: _verify_loop(self, i))
                for i in range(config.verify_threads)
            ]
            workers += [("soak-faults", faults.loop), ("soak-rss", self._sample_rss)]
            for name, target in workers:
                thread = threading.Thread(
                    target=self._guarded(target, name), name=name, daemon=True
                )
                thread.start()
                threads.append(thread)
            self._schedule(began)
            for thread in threads:
                thread.join(timeout=2 * config.client_timeout_s + 30)
                if thread.is_alive():
                    record.violation(f"thread {thread.name} still running after the run")
            ended = time.monotonic()
            drained = self._drain()
            self.run_checks(final=True)
            return self._report(ended - began, drained)
        finally:
            self.env_server.stop()
            self.reward_server.stop()
            with contextlib.suppress(Exception):
                from rewards.remote import close_clients

                close_clients()

    def _guarded(self, target: Callable[[], None], name: str) -> Callable[[], None]:
        def run() -> None:
            try:
                target()
            except Exception as exc:  # noqa: BLE001 - a thread's crash is a finding
                self.record.violation(f"thread {name} crashed: {exc!r:.600}")

        return run

    def _schedule(self, began: float) -> None:
        """Kills and restarts at their moments, due checks in between, until the deadline."""
        config, record = self.config, self.record
        events: list[tuple[float, str]] = []
        for _ in range(config.kill_count):
            events.append((began + config.seconds * self.rng.uniform(0.05, 0.9), "kill"))
        if "env" in config.restarts:
            events.append((began + 0.3 * config.seconds, "env"))
        if "rewards" in config.restarts:
            events.append((began + 0.55 * config.seconds, "rewards"))
        events.sort()
        while not record.over():
            self.run_checks()
            if events and time.monotonic() >= events[0][0]:
                _, what = events.pop(0)
                if what == "kill":
                    self.rng.choice(self.clients).kill.set()
                    continue
                began_restart = time.monotonic()
                if what == "env":
                    self._restart(self.env_server, signal.SIGKILL)
                else:
                    self._restart(self.reward_server, signal.SIGTERM)
                downtime = time.monotonic() - began_restart
                events = [(moment + downtime, later) for moment, later in events]
                continue
            time.sleep(0.05)
        for _, what in events:
            record.violation(f"the scheduled {what} did not happen before the deadline")
        for client in self.clients:
            if client.kill.is_set():  # asked to die, never reached a step again
                client.kill.clear()
                record.count("kills not carried out (the run ended first)")

    def _drain(self) -> int | None:
        """Wait until the env server holds no session (the killed HTTP clients' ones are reaped
        after idle_timeout_s); returns what it still holds at the end of the wait."""
        import httpx

        idle = self.config.idle_timeout_s
        deadline = time.monotonic() + idle + min(max(idle / 4, 0.01), 5.0) + 10.0
        held = None
        while time.monotonic() < deadline:
            try:
                held = httpx.get(self.env_server.url + "/health", timeout=30).json()["sessions"]
            except (httpx.TransportError, ValueError, KeyError) as exc:
                self.record.violation(f"the env server's /health failed after the run: {exc!r}")
                return None
            if held == 0:
                return 0
            self.run_checks()
            time.sleep(0.25)
        self.record.violation(f"the env server still holds {held} sessions after the run")
        return held

    # The report

    def _memory(self) -> dict[str, Any]:
        """Per server process: its resident memory after warm-up, at the middle and at the end of
        its time under load, and the check."""
        config, record = self.config, self.record
        out: dict[str, Any] = {}
        for name in ("env", "rewards"):
            runs = sorted({run for _, n, run, _ in record.rss if n == name})
            for run in runs:
                samples = [(t, kb) for t, n, r, kb in record.rss if n == name and r == run]
                samples = [(t, kb) for t, kb in samples if t <= record.deadline]
                if not samples:
                    continue
                first = max(samples[0][0], record.began)
                warm = first + config.warmup
                after = [(t, kb) for t, kb in samples if t >= warm]
                entry: dict[str, Any] = {"first_kb": samples[0][1], "samples": len(samples)}
                step = max(1, len(samples) // 40)  # about 40 points of (seconds into the run, kB)
                entry["series"] = [(round(t - record.began, 1), kb) for t, kb in samples[::step]]
                if after:
                    start, end = after[0], after[-1]
                    middle = min(after, key=lambda s: abs(s[0] - (start[0] + end[0]) / 2))
                    span = end[0] - start[0]
                    entry.update(
                        start_kb=start[1],
                        middle_kb=middle[1],
                        end_kb=end[1],
                        max_kb=max(kb for _, kb in after),
                        span_s=round(span, 1),
                    )
                    checked = config.check_memory and span >= config.warmup
                    entry["checked"] = checked
                    if checked:
                        for label, (_, kb) in (("middle", middle), ("end", end)):
                            change = kb / start[1] - 1
                            if abs(change) > config.memory_tolerance:
                                record.violation(
                                    f"{name} server run {run}: resident memory at the {label} "
                                    f"{kb} kB is {change:+.1%} from {start[1]} kB after warm-up"
                                )
                out[f"{name} run {run}"] = entry
        return out

    def _report(self, seconds: float, drained: int | None) -> dict[str, Any]:
        record = self.record
        memory = self._memory()
        for client in self.clients:
            if client.lost_at is not None:
                record.violation(f"client {client.index} never opened a session after the restart")
        latency: dict[str, Any] = {}
        every = record.latency["http"] + record.latency["ws"]
        for label, values in (("all", every), *record.latency.items()):
            latency[label] = {
                "steps": len(values),
                "p50_ms": _ms(percentile(values, 50)),
                "p99_ms": _ms(percentile(values, 99)),
            }
        counts = dict(record.counts)
        faults = {
            k.removeprefix("fault: "): v for k, v in counts.items() if k.startswith("fault: ")
        }
        figures = {
            "config": {**asdict(self.config), "kills": self.config.kill_count},
            "seconds": round(seconds, 1),
            "counts": {k: v for k, v in counts.items() if not k.startswith("fault: ")},
            "faults": faults,
            "errors_explained": dict(record.explained),
            "step_latency": latency,
            "verify_latency": {
                "batches": len(record.verify_latency),
                "p50_ms": _ms(percentile(record.verify_latency, 50)),
                "p99_ms": _ms(percentile(record.verify_latency, 99)),
            },
            "memory": memory,
            "sessions_held_after": drained,
            "violations": list(record.violations),
            "passed": not record.violations and record.counts["violations"] == 0,
        }
        return figures


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(1000 * seconds, 1)


def run_soak(config: SoakConfig) -> dict[str, Any]:
    """Run one soak (the module docstring says what and what it checks); returns its figures,
    ``passed`` False with the ``violations`` when the contract was breached."""
    return Soak(config).run()


def print_report(figures: dict[str, Any]) -> None:
    """The figures as a table."""
    config, counts = figures["config"], figures["counts"]
    print(
        f"soak: {config['sessions']} sessions for {figures['seconds']:.0f} s, "
        f"{config['verify_threads']} verify threads"
    )
    print(f"{'step latency':24} {'steps':>9} {'p50 ms':>9} {'p99 ms':>9}")
    for label, row in figures["step_latency"].items():
        print(f"  {label:22} {row['steps']:9d} {row['p50_ms'] or 0:9.1f} {row['p99_ms'] or 0:9.1f}")
    row = figures["verify_latency"]
    print(
        f"  {'verify batch':22} {row['batches']:9d} {row['p50_ms'] or 0:9.1f} {row['p99_ms'] or 0:9.1f}"
    )
    print("counts:")
    for key, value in sorted(counts.items()):
        print(f"  {key:54} {value:8d}")
    print("faults injected:")
    for key, value in sorted(figures["faults"].items()):
        print(f"  {key:54} {value:8d}")
    print("errors seen, explained by the contract:")
    for key, value in sorted(figures["errors_explained"].items()):
        print(f"  {key:54} {value:8d}")
    print("resident memory (MiB): first, after warm-up, middle, end (checked within tolerance)")
    for key, entry in figures["memory"].items():
        shown = [entry.get(k) for k in ("first_kb", "start_kb", "middle_kb", "end_kb")]
        text = " ".join("    -   " if kb is None else f"{kb / 1024:8.1f}" for kb in shown)
        print(f"  {key:18} {text}  {'checked' if entry.get('checked') else 'not checked'}")
    print(f"sessions held by the env server after the run: {figures['sessions_held_after']}")
    verdict = (
        "PASSED" if figures["passed"] else f"FAILED ({counts.get('violations', 0)} violations)"
    )
    print(verdict)
    for line in figures["violations"][:30]:
        print(f"  {line}")


def add_parser(subparsers: Any) -> None:
    """Register the ``soak`` command."""
    parser = subparsers.add_parser(
        NAME,
        help="the env and reward servers under load and faults: contract, latency, memory",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    add_arguments(parser)
    parser.set_defaults(func=run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The soak's flags (``bench.py soak`` and ``scripts/soak.py`` share them)."""
    defaults = SoakConfig()
    parser.add_argument("--sessions", type=int, default=defaults.sessions)
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--minutes", type=float, default=None, help="run length (default 10)")
    length.add_argument("--seconds", type=float, default=None, help="run length in seconds")
    parser.add_argument(
        "--kills", type=int, default=None, help="client kills (default: one per 20 s)"
    )
    parser.add_argument(
        "--restart",
        action="append",
        choices=["env", "rewards", "none"],
        default=None,
        help="servers restarted in the middle (repeatable; default both; none: no restart)",
    )
    parser.add_argument("--verify-threads", type=int, default=defaults.verify_threads)
    parser.add_argument("--idle-timeout", type=float, default=defaults.idle_timeout_s)
    parser.add_argument("--server-workers", type=int, default=defaults.server_workers)
    parser.add_argument("--warmup", type=float, default=None, help="seconds (default 10%%, <= 60)")
    parser.add_argument("--no-memory-check", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    add_json_argument(parser)


def config_from_args(args: argparse.Namespace) -> SoakConfig:
    seconds = 600.0 if args.minutes is None and args.seconds is None else None
    if seconds is None:
        seconds = args.seconds if args.seconds is not None else 60.0 * args.minutes
    restarts = tuple(r for r in (args.restart or ["env", "rewards"]) if r != "none")
    return SoakConfig(
        sessions=args.sessions,
        seconds=seconds,
        kills=args.kills,
        restarts=restarts,
        verify_threads=args.verify_threads,
        idle_timeout_s=args.idle_timeout,
        server_workers=args.server_workers,
        warmup_s=args.warmup,
        check_memory=not args.no_memory_check,
        seed=args.seed,
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Run the soak, print its table; exits with status 1 (after writing --json) on a breach."""
    figures = run_soak(config_from_args(args))
    print_report(figures)
    if not figures["passed"]:
        if args.json is not None:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
        raise SystemExit(1)
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    """``scripts/soak.py`` and ``mathteams soak``: ``bench.py soak`` with the same flags."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    add_arguments(parser)
    args = parser.parse_args(argv)
    figures = run(args)
    if args.json is not None:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    return 0
