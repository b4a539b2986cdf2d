"""An env server: any registered env served over HTTP and WebSocket, many sessions at once.

One command starts it (``python scripts/serve_envs.py --port 8001``); in Python, `create_app`
builds the FastAPI app and `serve` runs it with uvicorn. `envs.serving.remote(url, env_id,
**kwargs)` is the client: a PettingZoo env (AEC or Parallel) whose every call goes to the
server. The sessions, limits and refusals live in `envs.serving.sessions`; OpenEnv's own
protocol in `envs.serving.openenv`.

| route | body | answer |
|---|---|---|
| ``POST /sessions`` | ``{"env_id", "kwargs": {...}}`` | 201, the session (below) |
| ``GET /sessions/{id}`` | - | the session |
| ``POST /sessions/{id}/reset`` | ``{"seed": int?, "options": {...}?, "episode_id": str?}`` | the state |
| ``POST /sessions/{id}/step`` | AEC ``{"action": str \\| null, "agent": str?}``; Parallel ``{"actions": {agent: str}}`` | the state |
| ``GET /sessions/{id}/state`` | - | the state |
| ``GET /sessions/{id}/render`` | - | ``{"render": str \\| null}`` |
| ``POST /sessions/{id}/fork`` | - | 201, a new session holding a deep copy of the env |
| ``DELETE /sessions/{id}`` | - | ``{"session_id", "closed": true}`` |
| ``GET /health`` | - | ``{"status": "healthy", "sessions", "max_sessions", "uptime_s", "run_id"}`` |
| ``GET /envs`` | - | the served env ids with their default kwargs, and the limits |
| ``WS /ws`` | messages, below | one connection, one session |
| ``POST /reset``, ``POST /step``, ``GET /state``, ``GET /metadata``, ``GET /schema`` | OpenEnv's | OpenEnv's (`envs.serving.openenv`), on a server serving one env |

The session: ``session_id``, ``env_id``, ``api`` (``"aec"`` or ``"parallel"``), ``kwargs`` (the
client's), ``possible_agents``, ``max_turns``, ``metadata``, ``render_mode``,
``observation_spaces`` and ``action_spaces`` (per agent, `envs.serving.protocol.describe_space`),
``idle_timeout_s``.

The state: ``session_id``, ``env_id``, ``api``, ``episode_id``, ``step_count`` (steps since the
reset), ``agents``, ``agent_selection`` (AEC: whose turn; Parallel: null), ``observations``,
``rewards``, ``cumulative_rewards`` (AEC: what ``last()`` returns; Parallel: the step's rewards),
``terminations``, ``truncations``, ``infos`` (each keyed by agent) and ``done`` (an episode was
started and no agent is left). AEC: every live agent's ``observe(agent)`` and the env's reward,
termination, truncation and info dicts after the call. Parallel: what the last ``reset`` (rewards
0, no termination) or ``step`` returned, so the observations of agents that just finished are
there. Values pass through `envs.serving.protocol.jsonable` (its table says what becomes what).

WebSocket: the first message makes the session, ``{"type": "create", "data": {"env_id",
"kwargs"}}`` (on a server serving one env, a first ``reset``, ``step`` or ``state`` makes one
too and the connection speaks OpenEnv: `envs.serving.openenv`), or adopts one made over HTTP
(a fork), ``{"type": "attach", "data": {"session_id"}}``; then ``{"type": "reset" | "step", "data": <the HTTP body>}``, ``{"type":
"state" | "render" | "fork"}`` and ``{"type": "close"}``. Answers: ``{"type": "session", "data":
<the session>}``, ``{"type": "observation", "data": <the state>}`` (reset, step), ``{"type":
"state", "data": <the state>}``, ``{"type": "render", "data": {"render"}}``, ``{"type": "closed",
"data": {"session_id"}}`` and ``{"type": "error", "data": {"status", "code", "field", "message"}}``
(``status`` is the HTTP status the same failure gets). The session closes with the connection.

How this follows OpenEnv (``openenv.core.env_server``) and where it differs:

- Same verbs and message envelope: reset / step / state over HTTP, and a WebSocket where one
  connection is one session speaking ``{"type": "reset" | "step" | "state" | "close", "data"}``
  and answered ``{"type": "observation" | "state" | "error", "data"}``; ``/health`` answers
  ``"healthy"``; a reset takes ``seed`` and ``episode_id``; the state has ``episode_id`` and
  ``step_count``; an idle timeout reaps sessions; capacity is a session count.
- Multi-agent results: OpenEnv answers one ``observation``, ``reward`` and ``done``; a PettingZoo
  env has one of each per agent, so the state carries PettingZoo's per-agent dicts (and ``done``
  for the episode).
- HTTP sessions: OpenEnv's HTTP ``/reset`` and ``/step`` build a fresh env per request, so an
  episode only lives over its WebSocket. A multi-agent episode spans many requests, so here HTTP
  has explicit sessions (``/sessions/{id}/...``) and the WebSocket opens with ``create``.
- OpenEnv's own protocol: on a server serving one env (``--env ENV_ID``), a WebSocket whose
  first message is ``reset``, ``step`` or ``state`` opens a session of that env by itself and
  speaks OpenEnv's messages, and the root routes ``/reset``, ``/step``, ``/state``,
  ``/metadata`` and ``/schema`` answer as OpenEnv's do, so a stock OpenEnv client
  (``GenericEnvClient``) plays the env. How a multi-agent step maps onto OpenEnv's one action,
  observation, reward and ``done`` is `envs.serving.openenv`'s docstring.
- Extra verbs for a PettingZoo client: ``fork`` (deep copy and pickle of a remote env, which
  `envs.check_env` requires), ``render``, ``attach``.
- Strict bodies: unknown fields are refused (422 naming them), where OpenEnv lets them through.

Limits, each answered with ``{"error": "<field>: <message>", "field", "code"}`` naming the
field: an env id that is not served 404 (a malformed one 422); kwargs the env refuses, a client
setting a kwarg in ``blocked_kwargs`` (file paths, the sandbox: only the operator sets those, with
``env_kwargs``), a verifier that is not a registered name (no import paths, no ``remote:``), a
number over ``kwarg_limits`` or an env with more than ``max_agents`` agents 422; an unknown
session 404 (one reaped for idleness says so, ``SESSION_CLOSED``; one made by an earlier run of
the server, ``SESSION_LOST``: sessions live in the server's memory, so a restart loses every
session, and each session id starts with the ``run_id`` of the run that made it); a step naming an agent whose turn it is not, a step
before the first reset or after the episode ended 409; a malformed body or an action the env
refuses (a non-string) 422; a body over ``max_body_bytes`` 413; more than ``max_sessions``
sessions 429 (with ``Retry-After``); a reset, step, state or render that runs past
``step_timeout_s`` (60 s) 504 ``STEP_TIMEOUT``, its session then closed. Anything else an env
raises is a 500 with the error, and the server goes on.

Concurrency: every session has its own env; requests to one session wait for each other (an
asyncio lock), and env work (making, reset, step, observe, copy, close) runs on a thread pool of
``workers`` threads, never on the event loop, so a slow step (``math/tool-v0`` runs a program in a
sandbox) holds up only its own session. A session's call that runs past ``step_timeout_s`` is
answered 504 and the session closed (its env's state is unknown once a step is cut off); the
worker finishes the call, which every env bounds itself (verifier timeouts, the sandbox's wall
clock), then closes the env. The stateless OpenEnv routes are bounded by the env alone. A background task closes HTTP sessions idle
for more than ``idle_timeout_s``; a WebSocket session closes when its connection sends nothing for
that long (close code 4408, the reason saying so).

FastAPI and uvicorn are imported inside the functions (``pip install -e ".[server]"``), so
``import envs`` stays light; WebSocket serving also needs ``websockets``. This module has no
``from __future__ import annotations``: FastAPI reads annotations at run time.
"""

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from envs.registry import spec
from envs.serving import openenv
from envs.serving.protocol import jsonable
from envs.serving.sessions import (
    DEFAULT_BLOCKED_KWARGS,
    DEFAULT_KWARG_LIMITS,
    ApiError,
    EnvServerConfig,
    Session,
    SessionStore,
    parse_json,
    request_models,
    validate,
    validation_error,
)
from rewards.serving.http import BodyLimit, json_response_class

__all__ = [
    "DEFAULT_BLOCKED_KWARGS",
    "DEFAULT_KWARG_LIMITS",
    "IDLE_CLOSE_CODE",
    "ApiError",
    "EnvServerConfig",
    "SessionStore",
    "create_app",
    "serve",
]

logger = logging.getLogger(__name__)

IDLE_CLOSE_CODE = 4408  # WebSocket close code of an idle session (private range; HTTP's 408)
WS_KINDS = ("reset", "step", "state", "render", "fork", "close")  # after create / attach


def create_app(config: EnvServerConfig | None = None) -> Any:
    """The FastAPI app serving registered envs (see the module docstring for the routes).

    Args:
        config: what is served and the limits (defaults: `EnvServerConfig()`).

    Returns:
        An ASGI app (FastAPI wrapped in the body-size limit). Its ``store`` attribute is the
        `SessionStore` (for tests and monitoring).
    """
    from fastapi import FastAPI, Request, WebSocket
    from fastapi.exceptions import RequestValidationError

    config = config or EnvServerConfig()
    store = SessionStore(config)
    respond = json_response_class()

    @contextlib.asynccontextmanager
    async def lifespan(_app: Any) -> Any:
        reaper = asyncio.create_task(store.reap_forever())
        try:
            yield
        finally:
            reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reaper
            await store.shutdown()

    app = FastAPI(title="mathteams env server", default_response_class=respond, lifespan=lifespan)
    app.state.store = store

    def failure(exc: ApiError) -> Any:
        return respond(exc.body(), status_code=exc.status, headers=exc.headers or None)

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> Any:
        return failure(exc)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> Any:
        return failure(validation_error(exc.errors()))

    async def body(request: Request, model: Any) -> Any:
        return validate(parse_json(await request.body()), model)

    _add_info_routes(app, store, respond)
    _add_session_routes(app, store, body, respond)
    openenv.add_routes(app, store, body, respond)

    @app.websocket("/ws")
    async def websocket(ws: WebSocket) -> None:
        await _ws_serve(store, ws)

    wrapped = BodyLimit(app, config.max_body_bytes)
    wrapped.store = store
    return wrapped


# Routes answer with `respond(...)` rather than a dict: FastAPI would pass a dict through
# jsonable_encoder first, slow on a state with long observations, and it is JSON already.


def _add_info_routes(app: Any, store: SessionStore, respond: Any) -> None:
    """``GET /health`` and ``GET /envs``."""
    config, started = store.config, time.time()

    @app.get("/health")
    async def health() -> Any:
        return respond(
            {
                "status": "healthy",
                "sessions": len(store.sessions),
                "max_sessions": config.max_sessions,
                "uptime_s": time.time() - started,
                "run_id": store.run_id,
            }
        )

    @app.get("/envs")
    async def served_envs() -> Any:
        entries = []
        for env_id in store.served():
            env_spec = spec(env_id)
            entries.append(
                {
                    "id": env_id,
                    "default_kwargs": jsonable(env_spec.defaults()),
                    "max_turns": env_spec.max_turns,
                }
            )
        return respond({"envs": entries, "limits": config.limits()})


def _add_session_routes(app: Any, store: SessionStore, body: Any, respond: Any) -> None:
    """The ``/sessions`` routes. `body(request, model)` reads and validates a request body."""
    from fastapi import Request

    models = request_models()

    @app.post("/sessions", status_code=201)
    async def create(request: Request) -> Any:
        parsed = await body(request, models["create"])
        session = await store.create(parsed.env_id, parsed.kwargs, owner="http")
        return respond(session.description, status_code=201)

    @app.get("/sessions/{session_id}")
    async def describe(session_id: str) -> Any:
        return respond(store.get(session_id).description)

    @app.post("/sessions/{session_id}/reset")
    async def reset(session_id: str, request: Request) -> Any:
        session = store.get(session_id)
        parsed = await body(request, models["reset"])
        return respond(await store.reset(session, parsed.seed, parsed.options, parsed.episode_id))

    @app.post("/sessions/{session_id}/step")
    async def step(session_id: str, request: Request) -> Any:
        session = store.get(session_id)
        parsed = await body(request, models["parallel_step" if session.parallel else "aec_step"])
        return respond(await store.step(session, parsed.model_dump()))

    @app.get("/sessions/{session_id}/state")
    async def state(session_id: str) -> Any:
        return respond(await store.state(store.get(session_id)))

    @app.get("/sessions/{session_id}/render")
    async def render(session_id: str) -> Any:
        return respond(await store.render(store.get(session_id)))

    @app.post("/sessions/{session_id}/fork", status_code=201)
    async def fork(session_id: str) -> Any:
        clone = await store.fork(store.get(session_id), owner="http")
        return respond(clone.description, status_code=201)

    @app.delete("/sessions/{session_id}")
    async def delete(session_id: str) -> Any:
        session = store.get(session_id)
        async with session.lock:  # let a running step finish first
            await store.close(session, "closed: deleted by its client")
        return respond({"session_id": session_id, "closed": True})


# ---------------------------------------------------------------------- the WebSocket


@dataclass
class _Connection:
    """One WebSocket: its session, once made or adopted, and whether it speaks OpenEnv."""

    session: Session | None = None
    openenv: bool = False


async def _ws_serve(store: SessionStore, ws: Any) -> None:
    """Answer one WebSocket's messages until it closes, idles out or sends ``close``."""
    from starlette.websockets import WebSocketDisconnect, WebSocketState

    await ws.accept()
    connection, models = _Connection(), request_models()
    idle_s = store.config.idle_timeout_s
    try:
        while True:
            try:
                message = await asyncio.wait_for(ws.receive(), idle_s)
            except asyncio.TimeoutError:
                # A close frame, not an error message: the client may be sending right now,
                # and it learns the reason from the close either way.
                reason = f"idle for more than idle_timeout_s={idle_s:g} s"
                await ws.close(code=IDLE_CLOSE_CODE, reason=reason)
                break
            if message["type"] == "websocket.disconnect":
                break
            text = message.get("text")
            if text is None:
                text = (message.get("bytes") or b"").decode("utf-8", "replace")
            reply, done = await _ws_handle(store, models, connection, text)
            await ws.send_text(_ws_json(reply))
            if done:
                break
    except WebSocketDisconnect:  # the client went away mid-reply: the session closes below
        pass
    finally:
        session = connection.session
        if session is not None and session.closed is None:
            async with session.lock:
                await store.close(session, "closed: its WebSocket connection ended")
        if ws.client_state == WebSocketState.CONNECTED:
            with contextlib.suppress(RuntimeError):  # the client may be gone already
                await ws.close()


def _ws_json(payload: Mapping[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=True, separators=(",", ":"))


def _ws_error(exc: ApiError) -> dict[str, Any]:
    return {"status": exc.status, "code": exc.code, "field": exc.field, "message": str(exc)}


def _ws_message(text: str, max_bytes: int) -> tuple[str, Any]:
    """A WebSocket message's ``type`` and ``data``; ApiError for anything else."""
    if len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        raise ApiError(
            413,
            "body",
            "BODY_TOO_LARGE",
            f"message of {len(text)} characters exceeds max_body_bytes={max_bytes}",
        )
    message = parse_json(text)
    if not isinstance(message, dict) or not isinstance(message.get("type"), str):
        raise ApiError(422, "type", "VALIDATION_ERROR", "a message is {'type': str, 'data': {...}}")
    extra = set(message) - {"type", "data"}
    if extra:
        raise ApiError(422, min(extra), "VALIDATION_ERROR", "unknown message field")
    return message["type"], message.get("data", {})


async def _ws_open(
    store: SessionStore, models: Mapping[str, Any], connection: _Connection, kind: str, data: Any
) -> dict[str, Any]:
    """``create`` (a new session) or ``attach`` (adopt one made over HTTP, e.g. a fork)."""
    if connection.session is not None:
        raise ApiError(
            409,
            "type",
            "SESSION_EXISTS",
            f"this connection already has session {connection.session.id}",
        )
    if kind == "create":
        parsed = validate(data, models["create"])
        session = await store.create(parsed.env_id, parsed.kwargs, owner="ws")
    else:
        parsed = validate(data, models["attach"])
        session = store.get(parsed.session_id)
        if session.owner != "http":
            raise ApiError(
                409, "session_id", "SESSION_OWNED", "that session belongs to another WebSocket"
            )
        session.owner = "ws"
        session.touch()
    connection.session = session
    return {"type": "session", "data": session.description}


async def _ws_session(store: SessionStore, connection: _Connection, kind: str) -> Session:
    """The connection's session; a first OpenEnv message opens one on a one-env server."""
    if connection.session is not None:
        return connection.session
    if kind in openenv.OPENING_KINDS and len(store.served()) == 1:
        connection.session = await openenv.open_session(store, owner="ws")
        connection.openenv = True
        return connection.session
    raise ApiError(
        409,
        "type",
        "NO_SESSION",
        "send {'type': 'create', 'data': {'env_id': ...}} first (a server serving one env "
        "opens the session itself on an OpenEnv reset, step or state)",
    )


async def _ws_answer(
    store: SessionStore, models: Mapping[str, Any], connection: _Connection, kind: str, data: Any
) -> tuple[dict[str, Any], bool]:
    """The answer to a message after create / attach -> (the answer, whether the connection ends)."""
    session = await _ws_session(store, connection, kind)
    if kind == "reset":
        parsed = validate(data, models["reset"])
        if connection.openenv:
            return {
                "type": "observation",
                "data": await openenv.reset(store, session, parsed),
            }, False
        state = await store.reset(session, parsed.seed, parsed.options, parsed.episode_id)
        return {"type": "observation", "data": state}, False
    if kind == "step":
        if connection.openenv:
            played = await openenv.play(store, session, openenv.parse_action(data))
            return {"type": "observation", "data": played}, False
        parsed = validate(data, models["parallel_step" if session.parallel else "aec_step"])
        return {
            "type": "observation",
            "data": await store.step(session, parsed.model_dump()),
        }, False
    if kind == "state":
        return {"type": "state", "data": await store.state(session)}, False
    if kind == "render":
        return {"type": "render", "data": await store.render(session)}, False
    if kind == "fork":
        clone = await store.fork(session, owner="http")
        return {"type": "session", "data": clone.description}, False
    async with session.lock:
        await store.close(session, "closed: its client sent close")
    return {"type": "closed", "data": {"session_id": session.id}}, True


async def _ws_handle(
    store: SessionStore, models: Mapping[str, Any], connection: _Connection, text: str
) -> tuple[dict[str, Any], bool]:
    """One WebSocket message -> (the answer, whether the connection ends)."""
    try:
        kind, data = _ws_message(text, store.config.max_body_bytes)
        if kind in ("create", "attach"):
            return await _ws_open(store, models, connection, kind, data), False
        if kind not in WS_KINDS:
            raise ApiError(
                422,
                "type",
                "UNKNOWN_TYPE",
                f"unknown message type {kind!r:.40}; expected create, attach, reset, step, state, "
                "render, fork or close",
            )
        return await _ws_answer(store, models, connection, kind, data)
    except ApiError as exc:
        return {"type": "error", "data": _ws_error(exc)}, False
    except Exception as exc:  # an env's own failure: report it, keep the connection
        logger.exception("WebSocket message failed")
        error = ApiError(500, "server", "EXECUTION_ERROR", f"{type(exc).__name__}: {exc}")
        return {"type": "error", "data": _ws_error(error)}, False


def serve(
    host: str = "127.0.0.1",
    port: int = 8001,
    config: EnvServerConfig | None = None,
    log_level: str = "info",
) -> None:
    """Run the env server with uvicorn until interrupted."""
    import uvicorn

    from envs.serving import memory

    config = config or EnvServerConfig()
    memory.limit_arenas()  # before uvicorn and the session workers start their threads
    uvicorn.run(
        create_app(config),
        host=host,
        port=port,
        log_level=log_level,
        ws_max_size=config.max_body_bytes + 1024,
        # longer than the client's keep-alive (envs.serving.connections.KEEPALIVE_EXPIRY_S), so
        # that the client, not the server, ends an idle connection
        timeout_keep_alive=75,
    )
