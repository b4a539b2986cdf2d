"""HTTP pieces the reward server (`rewards.serving.server`) and the env server
(`envs.serving.server`) share.

- `BodyLimit`: ASGI middleware answering 413 for a request body over a byte limit, declared or
  streamed, before the app reads it.
- `json_response_class`: a FastAPI response class writing ASCII-only JSON, so lone surrogates in
  model output encode safely.
- `field_name`: a pydantic error location as the dotted field name the servers' errors carry.
- `add_served_items`: the servers' scripts' repeatable ``--<flag>`` / ``--<flag>-kwargs JSON``
  options.
- `BackgroundServer`: either server on a uvicorn thread of this process (tests, notebooks,
  one-box training).

FastAPI and uvicorn are imported inside the functions (``pip install -e ".[server]"``), so
importing this module costs nothing.
"""

import json
import threading
import time
from collections.abc import Sequence
from typing import Any

__all__ = ["BackgroundServer", "BodyLimit", "add_served_items", "field_name", "json_response_class"]


def add_served_items(
    parser: Any, flag: str, dest: str, metavar: str, help: str, kwargs_help: str
) -> None:
    """`parser` options ``--<flag>`` (repeatable: what to serve) and ``--<flag>-kwargs JSON``
    (a JSON object of keyword arguments for the ``--<flag>`` before it), collected in
    ``namespace.<dest>`` as ``[[value, {kwargs}], ...]``; the servers' scripts share them."""
    import argparse

    class AddItem(argparse.Action):
        def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None):
            setattr(namespace, dest, [*(getattr(namespace, dest) or []), [values, {}]])

    class AddKwargs(argparse.Action):
        def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None):
            items = getattr(namespace, dest)
            if not items:
                parser.error(f"--{flag}-kwargs must follow the --{flag} it applies to")
            try:
                options = json.loads(values)
            except json.JSONDecodeError as exc:
                parser.error(f"--{flag}-kwargs {values!r} is not JSON: {exc}")
            if not isinstance(options, dict):
                parser.error(f"--{flag}-kwargs must be a JSON object, got {values!r}")
            items[-1][1].update(options)

    parser.add_argument(f"--{flag}", dest=dest, action=AddItem, metavar=metavar, help=help)
    parser.add_argument(f"--{flag}-kwargs", action=AddKwargs, metavar="JSON", help=kwargs_help)


def json_response_class() -> Any:
    """A FastAPI response class writing ASCII-only JSON."""
    from fastapi.responses import JSONResponse

    class AsciiJSONResponse(JSONResponse):
        """JSON with non-ASCII escaped: lone surrogates in model output encode safely."""

        def render(self, content: Any) -> bytes:
            return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode()

    return AsciiJSONResponse


def field_name(loc: Sequence[Any]) -> str:
    """A pydantic error location as a dotted field name (``items.3.response``), body dropped."""
    parts = [str(p) for p in loc if p != "body"]
    return ".".join(parts) or "body"


class BodyLimit:
    """ASGI middleware: 413 for a body over `limit` bytes, declared or streamed."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._reject(send, int(declared))
            return
        # Read the body here (at most `limit` bytes kept), then hand it to the app in one piece.
        chunks, seen, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunks.append(message.get("body", b""))
            seen += len(chunks[-1])
            if seen > self.limit:
                await self._reject(send, seen)
                return
            more = message.get("more_body", False)
        body, delivered = b"".join(chunks), False

        async def replay() -> Any:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _reject(self, send: Any, size: int) -> None:
        body = json.dumps(
            {
                "error": f"body: request body of {size} bytes exceeds max_body_bytes={self.limit}",
                "field": "body",
            }
        ).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


class BackgroundServer:
    """An ASGI app served by uvicorn on a thread of this process (tests, notebooks, one-box
    training).

    Args:
        app: an ASGI app (the reward or env server's `create_app`).
        host: the interface to bind.
        port: the port; 0 picks a free one (read it from `url`).

    Example:
        >>> from rewards import RemoteVerifier, build_verifiers  # doctest: +SKIP
        >>> from rewards.serving.server import create_app  # doctest: +SKIP
        >>> with BackgroundServer(create_app(build_verifiers(["math"]))) as server:  # doctest: +SKIP
        ...     RemoteVerifier(server.url).verify("\\\\boxed{2}", "2")
    """

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0) -> None:
        import socket

        import uvicorn

        # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on accepted sockets whose proto
        # says TCP, and without it every response waits ~40 ms for the delayed ACK (Nagle).
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind((host, port))
        self.host, self.port = host, self.socket.getsockname()[1]
        self.url = f"http://{host}:{self.port}"
        config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True
        )

    def start(self, timeout_s: float = 10.0) -> "BackgroundServer":
        """Start serving; returns once uvicorn accepts connections.

        Raises:
            RuntimeError: uvicorn did not start within `timeout_s`.
        """
        self.thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"server on {self.url} did not start in {timeout_s} s")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Stop serving and close the port."""
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.socket.close()

    def __enter__(self) -> "BackgroundServer":  # noqa: PYI034 - typing.Self needs Python 3.11
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
