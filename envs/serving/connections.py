"""The client's side of the env server's wire: one session over HTTP or over a WebSocket.

`connect` opens a connection to the server at a URL (``transport="http"``: a request per call,
on one kept-alive httpx connection; ``"ws"``: one WebSocket), and `open_session` one holding a
new session; either connection offers the same calls (create, attach, reset, step, state,
render, fork, close), each answering the server's JSON object. `envs.serving.client` builds the
PettingZoo envs on them.

Failures raise `EnvServerError` (unreachable, died, answered garbage) or `EnvRequestError` (a
4xx refusal, also a `ValueError`), naming the URL, the session and the call; nothing is retried.
httpx and websockets are imported on first use.
"""

from __future__ import annotations

import json
import threading
import weakref
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = [
    "KEEPALIVE_EXPIRY_S",
    "TRANSPORTS",
    "Connection",
    "EnvRequestError",
    "EnvServerError",
    "HTTPConnection",
    "WSConnection",
    "connect",
    "open_session",
]

TRANSPORTS = ("http", "ws")


class EnvServerError(RuntimeError):
    """The env server is unreachable, died, or answered something that is not a valid reply.

    Attributes:
        url: the server's base URL.
        status: the HTTP status (for a WebSocket error, the status the server gave it), or None
            when no answer came back.
        field: the request field the server named, when it named one.
        code: the server's stable error code (``SESSION_LOST``, ``EPISODE_OVER``, ...) when it
            answered one; when no answer came back, ``TIMEOUT`` (no answer within the client's
            ``timeout_s``), ``UNREACHABLE`` (an HTTP request could not be sent or its answer
            was cut off) or ``CONNECTION_LOST`` (the WebSocket is gone).
    """

    def __init__(
        self,
        message: str,
        url: str,
        status: int | None = None,
        field: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.url, self.status, self.field, self.code = url, status, field, code


class EnvRequestError(EnvServerError, ValueError):
    """The server refused the request (HTTP 4xx): its message names the field at fault."""


# The client drops a connection idle this long, well before a server closes it (uvicorn's
# keep-alive default is 5 s, `envs.serving.server.serve` sets 75 s): a request sent on a
# connection the server is closing at that moment fails ("server disconnected"), and a step
# cannot be retried.
KEEPALIVE_EXPIRY_S = 2.0
_SSL: dict[str, Any] = {}


def _http_client() -> Any:
    """A new httpx client for one remote env (one connection, kept alive between calls).

    One client per env rather than one pool per process: with tens of threads, a shared pool
    cost more CPU per request than the request (measured by ``bench.py serve``). The TLS
    context, slow to build, is built once and shared.
    """
    try:
        import httpx
    except ImportError as exc:
        raise ImportError(
            "remote envs need httpx: pip install -e '.[server]' (or pip install httpx)"
        ) from exc
    if "context" not in _SSL:
        _SSL["context"] = httpx.create_ssl_context()
    limits = httpx.Limits(
        max_connections=4, max_keepalive_connections=1, keepalive_expiry=KEEPALIVE_EXPIRY_S
    )
    return httpx.Client(limits=limits, verify=_SSL["context"])


def _base_url(url: str) -> str:
    parts = urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"env server url must be 'http(s)://host:port[/prefix]', got {url!r}")
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))


def _refusal(url: str, status: int, body: Any, what: str) -> EnvServerError:
    """The exception for an error answer of the server."""
    if isinstance(body, Mapping):
        message = body.get("error") or body.get("message") or json.dumps(body)[:500]
        field, code = body.get("field"), body.get("code")
    else:
        message, field, code = str(body)[:500], None, None
    kind = EnvRequestError if 400 <= status < 500 else EnvServerError
    return kind(
        f"env server {url} refused {what} (HTTP {status}): {message}",
        url,
        status,
        field,
        code if isinstance(code, str) else None,
    )


class HTTPConnection:
    """One session over HTTP."""

    transport = "http"

    def __init__(self, url: str, timeout_s: float) -> None:
        self.url, self.timeout_s = url, timeout_s
        self.session_id: str | None = None
        self.env_id = "?"
        self._client: Any = None

    def _what(self, verb: str) -> str:
        return f"{verb} of session {self.session_id} ({self.env_id})"

    def call(self, method: str, path: str, payload: Any, what: str) -> Any:
        if self._client is None:
            self._client = client = _http_client()
            # closes the socket when the env is dropped unclosed (no request is sent)
            weakref.finalize(self, client.close)
        client = self._client
        import httpx

        # ensure_ascii keeps the lone surrogates of model output as escapes (valid UTF-8).
        content = None if payload is None else json.dumps(payload, ensure_ascii=True)
        headers = None if content is None else {"content-type": "application/json"}
        try:
            response = client.request(
                method, self.url + path, content=content, headers=headers, timeout=self.timeout_s
            )
        except httpx.TimeoutException as exc:
            raise EnvServerError(
                f"env server {self.url}: {what} timed out after {self.timeout_s:g} s "
                f"({type(exc).__name__})",
                self.url,
                code="TIMEOUT",
            ) from exc
        except httpx.TransportError as exc:
            raise EnvServerError(
                f"env server {self.url} is unreachable: {what} failed "
                f"({type(exc).__name__}: {exc})",
                self.url,
                code="UNREACHABLE",
            ) from exc
        try:
            body = response.json()
        except ValueError as exc:
            if response.is_success:
                raise EnvServerError(
                    f"env server {self.url}: {what} answered invalid JSON: {exc}",
                    self.url,
                    response.status_code,
                ) from exc
            body = response.text
        if not response.is_success:
            raise _refusal(self.url, response.status_code, body, what)
        if not isinstance(body, dict):
            raise EnvServerError(
                f"env server {self.url}: {what} answered {type(body).__name__}, not an object",
                self.url,
                response.status_code,
            )
        return body

    def create(self, env_id: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        self.env_id = env_id
        body = {"env_id": env_id, "kwargs": dict(kwargs)}
        return self._adopt(self.call("POST", "/sessions", body, f"making a {env_id} session"))

    def attach(self, session_id: str) -> dict[str, Any]:
        self.session_id = session_id
        return self._adopt(self.call("GET", f"/sessions/{session_id}", None, self._what("attach")))

    def _adopt(self, description: dict[str, Any]) -> dict[str, Any]:
        self.session_id, self.env_id = description.get("session_id"), description.get("env_id")
        return description

    def reset(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.call("POST", f"/sessions/{self.session_id}/reset", body, self._what("reset"))

    def step(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.call("POST", f"/sessions/{self.session_id}/step", body, self._what("step"))

    def state(self) -> dict[str, Any]:
        return self.call("GET", f"/sessions/{self.session_id}/state", None, self._what("state"))

    def render(self) -> dict[str, Any]:
        return self.call("GET", f"/sessions/{self.session_id}/render", None, self._what("render"))

    def fork(self) -> dict[str, Any]:
        return self.call("POST", f"/sessions/{self.session_id}/fork", None, self._what("fork"))

    def close(self) -> None:
        try:
            self.call("DELETE", f"/sessions/{self.session_id}", None, self._what("close"))
        finally:
            self.abandon()

    def abandon(self) -> None:
        """Close the connection without a request."""
        if self._client is not None:
            self._client.close()


class WSConnection:
    """One session over one WebSocket connection."""

    transport = "ws"

    def __init__(self, url: str, timeout_s: float) -> None:
        try:
            from websockets.exceptions import WebSocketException
            from websockets.sync.client import connect
        except ImportError as exc:
            raise ImportError(
                "transport='ws' needs websockets: pip install -e '.[server]' "
                "(or pip install websockets)"
            ) from exc
        self.url, self.timeout_s = url, timeout_s
        self.session_id: str | None = None
        self.env_id = "?"
        self._errors = (OSError, TimeoutError, WebSocketException)
        self._lock = threading.Lock()
        parts = urlsplit(url)
        scheme = "wss" if parts.scheme == "https" else "ws"
        self.ws_url = urlunsplit((scheme, parts.netloc, parts.path + "/ws", "", ""))
        try:
            # Observations can be large; loopback and LAN servers gain nothing from compression.
            opener = connect(self.ws_url, open_timeout=timeout_s, max_size=None, compression=None)
            # websockets >= 17 wants a context manager; entering it opens the connection (on
            # older versions it is the connection, and entering returns it).
            self.socket = opener.__enter__()
            # closes the socket when the env is dropped unclosed (as HTTPConnection does)
            weakref.finalize(self, self.socket.close)
        except self._errors as exc:
            raise EnvServerError(
                f"env server {url} is unreachable: opening {self.ws_url} failed "
                f"({type(exc).__name__}: {exc})",
                url,
                code="UNREACHABLE",
            ) from exc

    def _what(self, verb: str) -> str:
        return f"{verb} of session {self.session_id} ({self.env_id}) over {self.ws_url}"

    def call(self, kind: str, data: Any, expect: str, what: str) -> dict[str, Any]:
        message: dict[str, Any] = {"type": kind}
        if data is not None:
            message["data"] = data
        with self._lock:
            try:
                self.socket.send(json.dumps(message, ensure_ascii=True))
                raw = self.socket.recv(timeout=self.timeout_s)
            except TimeoutError as exc:
                # A late answer would be read as the next call's: the connection (and with it
                # the session, on the server) ends here.
                self.socket.close()
                raise EnvServerError(
                    f"env server {self.url}: {what} timed out after {self.timeout_s:g} s; the "
                    "connection is closed, and its session with it",
                    self.url,
                    code="TIMEOUT",
                ) from exc
            except self._errors as exc:
                raise EnvServerError(
                    f"env server {self.url}: {what} failed, the connection is gone "
                    f"({type(exc).__name__}: {exc})",
                    self.url,
                    code="CONNECTION_LOST",
                ) from exc
        try:
            reply = json.loads(raw)
        except ValueError as exc:
            raise EnvServerError(
                f"env server {self.url}: {what} answered invalid JSON: {exc}", self.url
            ) from exc
        if not isinstance(reply, dict) or not isinstance(reply.get("data"), dict):
            raise EnvServerError(
                f"env server {self.url}: {what} answered {str(reply)[:200]!r}, not "
                "{'type', 'data': {...}}",
                self.url,
            )
        if reply.get("type") == "error":
            status = reply["data"].get("status")
            raise _refusal(
                self.url, status if isinstance(status, int) else 500, reply["data"], what
            )
        if reply.get("type") != expect:
            raise EnvServerError(
                f"env server {self.url}: {what} answered a {reply.get('type')!r} message, "
                f"expected {expect!r}",
                self.url,
            )
        return reply["data"]

    def create(self, env_id: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        self.env_id = env_id
        data = {"env_id": env_id, "kwargs": dict(kwargs)}
        return self._adopt(self.call("create", data, "session", f"making a {env_id} session"))

    def attach(self, session_id: str) -> dict[str, Any]:
        self.session_id = session_id
        data = {"session_id": session_id}
        return self._adopt(self.call("attach", data, "session", self._what("attach")))

    def _adopt(self, description: dict[str, Any]) -> dict[str, Any]:
        self.session_id, self.env_id = description.get("session_id"), description.get("env_id")
        return description

    def reset(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.call("reset", body, "observation", self._what("reset"))

    def step(self, body: dict[str, Any]) -> dict[str, Any]:
        return self.call("step", body, "observation", self._what("step"))

    def state(self) -> dict[str, Any]:
        return self.call("state", None, "state", self._what("state"))

    def render(self) -> dict[str, Any]:
        return self.call("render", None, "render", self._what("render"))

    def fork(self) -> dict[str, Any]:
        return self.call("fork", None, "session", self._what("fork"))

    def close(self) -> None:
        try:
            self.call("close", None, "closed", self._what("close"))
        finally:
            self.socket.close()

    def abandon(self) -> None:
        """Close the connection without a word (making the session failed)."""
        self.socket.close()


Connection = HTTPConnection | WSConnection


def open_session(url: str, transport: str, timeout_s: float, env_id: str, kwargs: Mapping) -> tuple:
    """A connection holding a new session of `env_id`, and the session's description."""
    connection = connect(url, transport, timeout_s)
    try:
        return connection, connection.create(env_id, kwargs)
    except BaseException:
        connection.abandon()
        raise


def connect(url: str, transport: str, timeout_s: float) -> Connection:
    if transport not in TRANSPORTS:
        raise ValueError(f"transport must be one of {TRANSPORTS}, got {transport!r}")
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or timeout_s <= 0:
        raise ValueError(f"timeout_s must be a number > 0, got {timeout_s!r}")
    base = _base_url(url)
    return HTTPConnection(base, timeout_s) if transport == "http" else WSConnection(base, timeout_s)
