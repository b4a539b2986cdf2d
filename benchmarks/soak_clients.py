"""The soak's clients (`benchmarks.soak`): a thread per env-server session playing
episodes over HTTP or the WebSocket (and dying on cue), and the reward server's verify loop."""

from __future__ import annotations

import contextlib
import json
import random
import socket
import threading
import time
from typing import Any

from benchmarks.soak_base import ENVS, RESTART_CODES, error_kind

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

    def __init__(self, soak: Any, index: int) -> None:  # soak: the running soak.Soak
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
                kind = error_kind(exc)
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

        record, kind = self.soak.record, error_kind(exc)
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


def verify_loop(soak: Any, index: int) -> None:
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
