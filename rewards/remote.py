"""A verifier that asks a reward server (`rewards.serving.server`) over HTTP.

`RemoteVerifier` implements the `Verifier` protocol, so it goes wherever a local verifier goes:
an env (``envs.make(..., verifier="remote:http://127.0.0.1:8000/math")``), a task, or a TRL
reward function (`rewards.as_reward_func`). Every trainer script takes it through
``--verifier remote:http://HOST:PORT/NAME``.

Failures are loud: connection errors, timeouts, 5xx and 429 answers are retried with exponential
backoff; when the retries run out, or the server rejects a request (other 4xx), a
`RewardServerError` names the URL, the verifier and the last error. A remote verifier never
returns a made-up default score.

httpx is imported on the first request (``pip install -e ".[server]"``); one connection pool per
server URL is shared by every `RemoteVerifier` of a process (httpx clients are thread-safe), and a
verifier object holds only its settings, so it pickles and deep-copies with the envs that own it.
`close_clients` closes those pools (at exit too; a later request opens a new one).

Example:
    >>> verifier = RemoteVerifier("http://127.0.0.1:8000", verifier="math")  # doctest: +SKIP
    >>> verifier.verify("so \\\\boxed{18}", "18").score  # doctest: +SKIP
    1.0
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import random
import threading
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from rewards.base import Verdict
from rewards.screen import not_a_string

__all__ = ["RemoteVerifier", "RewardServerError", "close_clients", "parse_remote_name"]

logger = logging.getLogger(__name__)

RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
CLIP_MARKER = "\n[...]\n"


class RewardServerError(RuntimeError):
    """The reward server is unreachable, keeps failing, or rejected a request.

    Attributes:
        url: the server's base URL.
        status: the last HTTP status, or None when no answer came back.
    """

    def __init__(self, message: str, url: str, status: int | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.status = status


class RewardRequestError(RewardServerError, ValueError):
    """The server rejected the request itself (HTTP 4xx other than 429): a bad reference, an
    oversized batch or text, an unknown verifier. Also a `ValueError`, as a local verifier
    raises for a bad reference; retrying cannot help."""


_CLIENTS: dict[tuple[int, str], Any] = {}
_CLIENTS_LOCK = threading.Lock()


def _client(base_url: str) -> Any:
    """The process's shared httpx client for `base_url` (a new one after a fork)."""
    key = (os.getpid(), base_url)
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            try:
                import httpx
            except ImportError as exc:
                raise ImportError(
                    "RemoteVerifier needs httpx: pip install -e '.[server]' (or pip install httpx)"
                ) from exc
            limits = httpx.Limits(max_connections=64, max_keepalive_connections=16)
            client = httpx.Client(limits=limits, headers={"content-type": "application/json"})
            _CLIENTS[key] = client
        return client


def close_clients() -> int:
    """Close the process's shared httpx clients (their pooled connections); returns how many.

    A later request opens a new client. Call it when the servers a process talked to are gone
    (a test's loopback server stopped, the end of a job), so that no connection is left open;
    at exit, `atexit` calls it.
    """
    with _CLIENTS_LOCK:
        clients = list(_CLIENTS.values())
        _CLIENTS.clear()
    for client in clients:
        client.close()
    return len(clients)


atexit.register(close_clients)


def _clip(text: str, limit: int) -> str:
    """Head and tail of an over-long response (answers sit at the end, so the tail is longer)."""
    if len(text) <= limit:
        return text
    head = limit // 4
    tail = limit - head - len(CLIP_MARKER)
    return text[:head] + CLIP_MARKER + text[-tail:]


def _server_message(response: Any) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    if isinstance(body, dict) and "error" in body:
        return str(body["error"])[:1000]
    return json.dumps(body)[:300]


class RemoteVerifier:
    """A verifier served by a reward server.

    Example (with ``python scripts/serve_rewards.py --verifier math`` running):
        >>> remote = RemoteVerifier("http://127.0.0.1:8000", verifier="math")  # doctest: +SKIP
        >>> remote.verify("so \\boxed{18}", "18").score  # doctest: +SKIP
        1.0
        >>> remote.verify("so \\boxed{17}", "18").score  # doctest: +SKIP
        0.0

    Args:
        url: the server's base URL, e.g. ``"http://127.0.0.1:8000"``.
        verifier: the name the server serves it under (``GET /verifiers`` lists them).
        timeout_s: seconds for each connect, write and read of one request.
        retries: attempts after the first one, on connection errors, timeouts, 5xx and 429.
        backoff_s: first retry delay; it doubles on each retry (jittered in [d/2, d]), capped at
            `max_backoff_s`. A 429's ``Retry-After`` is honoured up to the cap.
        max_backoff_s: the longest delay between two attempts.
        batch_size: items per request in `verify_batch` (at most the server's ``max_batch``).
        max_response_chars: responses longer than this are clipped (head and tail kept) before
            sending, so a runaway generation never gets a request rejected.

    Raises:
        ValueError: a bad URL or option.
    """

    def __init__(
        self,
        url: str,
        verifier: str = "math",
        timeout_s: float = 30.0,
        retries: int = 3,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        batch_size: int = 256,
        max_response_chars: int = 100_000,
    ) -> None:
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(
                f"RemoteVerifier url must be 'http(s)://host:port[/prefix]', got {url!r}"
            )
        if not isinstance(verifier, str) or not verifier.strip():
            raise ValueError(f"RemoteVerifier verifier must be a non-empty name, got {verifier!r}")
        numbers = {"timeout_s": timeout_s, "backoff_s": backoff_s, "max_backoff_s": max_backoff_s}
        for key, value in numbers.items():
            if not isinstance(value, (int, float)) or not value >= 0:
                raise ValueError(f"RemoteVerifier {key} must be a number >= 0, got {value!r}")
        if timeout_s <= 0:
            raise ValueError(f"RemoteVerifier timeout_s must be > 0, got {timeout_s!r}")
        ints = {"retries": retries, "batch_size": batch_size}
        ints["max_response_chars"] = max_response_chars
        for key, value in ints.items():
            if not isinstance(value, int) or value < (0 if key == "retries" else 1):
                raise ValueError(f"RemoteVerifier {key} must be a positive int, got {value!r}")
        if max_response_chars < 4 * len(CLIP_MARKER):
            raise ValueError(f"max_response_chars={max_response_chars} is too small")
        self.url = urlunsplit((parts.scheme, parts.netloc, parts.path.rstrip("/"), "", ""))
        self.verifier = verifier
        self.name = verifier
        self.timeout_s, self.retries = float(timeout_s), retries
        self.backoff_s, self.max_backoff_s = float(backoff_s), float(max_backoff_s)
        self.batch_size, self.max_response_chars = batch_size, max_response_chars

    def __repr__(self) -> str:
        return f"RemoteVerifier({self.url!r}, verifier={self.verifier!r})"

    # ------------------------------------------------------------------ protocol

    def verify(self, response: str, reference: str) -> Verdict:
        """One verdict from the server (see `verify_batch`)."""
        return self.verify_batch([response], [reference])[0]

    def verify_batch(self, responses: Sequence[str], references: Sequence[str]) -> list[Verdict]:
        """Verdicts for ``responses[i]`` against ``references[i]``, in input order.

        Non-string responses score 0 here without a request (as local verifiers do); the rest
        go to the server in requests of at most `batch_size` items.

        Raises:
            ValueError: the lengths differ, or a reference is not a non-empty str.
            RewardServerError: the server is unreachable, keeps failing or rejects the request.
        """
        if len(responses) != len(references):
            raise ValueError(
                f"{self!r}: {len(responses)} responses but {len(references)} references"
            )
        verdicts: list[Verdict | None] = [None] * len(responses)
        pending: list[tuple[int, str, str]] = []
        for index, (response, reference) in enumerate(zip(responses, references, strict=True)):
            if not isinstance(reference, str) or not reference.strip():
                raise ValueError(
                    f"{self!r}: reference {index} must be a non-empty str, got {reference!r:.80}"
                )
            rejected = not_a_string(response)
            if rejected is not None:
                verdicts[index] = rejected
            else:
                pending.append((index, _clip(response, self.max_response_chars), reference))
        for start in range(0, len(pending), self.batch_size):
            chunk = pending[start : start + self.batch_size]
            items = [{"response": r, "reference": ref} for _, r, ref in chunk]
            for (index, _, _), verdict in zip(chunk, self._post_verify(items), strict=True):
                verdicts[index] = verdict
        return [v for v in verdicts if v is not None]

    # ------------------------------------------------------------------ HTTP

    def served(self) -> list[str]:
        """The verifier names the server serves (``GET /verifiers``)."""
        body = self._request("GET", "/verifiers", None)
        return [entry["name"] for entry in body["verifiers"]]

    def _post_verify(self, items: list[dict[str, str]]) -> list[Verdict]:
        payload = {"verifier": self.verifier, "items": items}
        body = self._request("POST", "/verify", payload)
        raw = body.get("verdicts") if isinstance(body, dict) else None
        if not isinstance(raw, list) or len(raw) != len(items):
            got = len(raw) if isinstance(raw, list) else type(raw).__name__
            raise RewardServerError(
                f"reward server {self.url} answered {got} verdicts for {len(items)} items",
                self.url,
                200,
            )
        try:
            return [
                Verdict(float(v["score"]), v.get("extracted"), str(v.get("reason", "")))
                for v in raw
            ]
        except (KeyError, TypeError, ValueError) as exc:
            raise RewardServerError(
                f"reward server {self.url} sent a malformed verdict: {exc}", self.url, 200
            ) from exc

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        delay = min(self.max_backoff_s, self.backoff_s * 2**attempt)
        delay *= 0.5 + random.random() / 2  # equal jitter: many clients do not retry in step
        if retry_after is not None and retry_after.strip().replace(".", "", 1).isdigit():
            # seconds; an HTTP-date Retry-After keeps the exponential delay
            delay = max(delay, min(self.max_backoff_s, float(retry_after)))
        return delay

    def _request(self, method: str, path: str, payload: dict | None) -> Any:
        client = _client(self.url)  # raises an ImportError naming the extra without httpx
        import httpx

        # ensure_ascii keeps lone surrogates and control characters of model output as escapes.
        content = None if payload is None else json.dumps(payload, ensure_ascii=True)
        url = self.url + path
        started = time.monotonic()
        last = "no attempt made"
        status: int | None = None
        for attempt in range(self.retries + 1):
            retry_after = None
            try:
                response = client.request(method, url, content=content, timeout=self.timeout_s)
            except httpx.TimeoutException as exc:
                last, status = f"timed out after {self.timeout_s:g} s ({type(exc).__name__})", None
            except httpx.TransportError as exc:
                last, status = f"{type(exc).__name__}: {exc}", None
            else:
                status = response.status_code
                if status == 200:
                    try:
                        return response.json()
                    except ValueError as exc:
                        raise RewardServerError(
                            f"reward server {url} sent invalid JSON: {exc}", self.url, status
                        ) from exc
                message = _server_message(response)
                if status not in RETRY_STATUS:
                    error = RewardRequestError if 400 <= status < 500 else RewardServerError
                    raise error(
                        f"reward server {url} rejected the request (HTTP {status}): {message}",
                        self.url,
                        status,
                    )
                last = f"HTTP {status}: {message}"
                retry_after = response.headers.get("retry-after")
            if attempt < self.retries:
                delay = self._delay(attempt, retry_after)
                logger.warning(
                    "reward server %s: %s; retry %d/%d in %.2f s",
                    url,
                    last,
                    attempt + 1,
                    self.retries,
                    delay,
                )
                time.sleep(delay)
        elapsed = time.monotonic() - started
        raise RewardServerError(
            f"reward server {url} (verifier {self.verifier!r}) failed {self.retries + 1} "
            f"attempts over {elapsed:.1f} s; last error: {last}",
            self.url,
            status,
        )


_OPTION_TYPES = {
    "timeout_s": float,
    "retries": int,
    "backoff_s": float,
    "max_backoff_s": float,
    "batch_size": int,
    "max_response_chars": int,
}


def parse_remote_name(spec: str) -> dict[str, Any]:
    """The `RemoteVerifier` arguments of a ``remote:URL/NAME[?option=value&...]`` spec.

    Examples:
        >>> parse_remote_name("remote:http://127.0.0.1:8000/math?retries=5")
        {'url': 'http://127.0.0.1:8000', 'verifier': 'math', 'retries': 5}

    Raises:
        ValueError: the spec is not of that form, or an option is unknown or malformed.
    """
    body = spec.removeprefix("remote:")
    parts = urlsplit(body)
    base, _, name = parts.path.rstrip("/").rpartition("/")
    if parts.scheme not in ("http", "https") or not parts.netloc or not name:
        raise ValueError(
            f"remote verifier {spec!r} must read 'remote:http://HOST:PORT/NAME', e.g. "
            "'remote:http://127.0.0.1:8000/math' (options: ?timeout_s=10&retries=5)"
        )
    options: dict[str, Any] = {
        "url": urlunsplit((parts.scheme, parts.netloc, base, "", "")),
        "verifier": name,
    }
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key not in _OPTION_TYPES:
            raise ValueError(
                f"remote verifier {spec!r}: unknown option {key!r}; expected {sorted(_OPTION_TYPES)}"
            )
        try:
            options[key] = _OPTION_TYPES[key](value)
        except ValueError as exc:
            raise ValueError(f"remote verifier {spec!r}: option {key}={value!r}: {exc}") from exc
    return options
