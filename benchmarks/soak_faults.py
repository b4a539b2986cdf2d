"""The soak's protocol faults (`benchmarks.soak`): requests each server must refuse,
one every ``fault_every_s``, each checked for its status, code and message."""

from __future__ import annotations

import contextlib
import json
import random
import time
from collections.abc import Callable, Iterator
from typing import Any

# ---------------------------------------------------------------------- protocol faults


class Faults:
    """Requests each server must refuse, one at a time, each checked for its status and a
    message (no hang: the client's timeout bounds each)."""

    def __init__(self, soak: Any) -> None:  # soak: the running soak.Soak
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

    @contextlib.contextmanager
    def session(self, env_id: str = "math/reflection-v0") -> Iterator[str]:
        """A fresh session's id for the block, closed after it."""
        answer = self.env(
            "POST", "/sessions", json={"env_id": env_id, "kwargs": {"task": "arithmetic"}}
        )
        assert answer.status_code == 201, f"making a session answered {answer.status_code}"
        session_id = answer.json()["session_id"]
        try:
            yield session_id
        finally:
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
        with self.session() as session_id:
            answer = self.env("POST", f"/sessions/{session_id}/step", json={"action": "1"})
            self.refused(answer, 409, "NO_EPISODE")

    def non_string_action(self) -> None:
        with self.session() as session_id:
            self.env("POST", f"/sessions/{session_id}/reset", json={"seed": 1})
            answer = self.env("POST", f"/sessions/{session_id}/step", json={"action": 5})
            self.refused(answer, 422)

    def out_of_turn(self) -> None:
        with self.session() as session_id:
            state = self.env("POST", f"/sessions/{session_id}/reset", json={"seed": 2}).json()
            others = [a for a in state["agents"] if a != state["agent_selection"]]
            body = {"action": "1", "agent": others[0]}
            answer = self.env("POST", f"/sessions/{session_id}/step", json=body)
            self.refused(answer, 409, "NOT_YOUR_TURN")

    def after_episode(self) -> None:
        with self.session() as session_id:
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
