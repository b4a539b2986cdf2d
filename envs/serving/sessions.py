"""The sessions of an env server, its limits and its refusals; both transports drive them.

`SessionStore` holds every open session (one env of one client) and does everything done to
them: make (with the client's kwargs checked against `EnvServerConfig`), fork, reset, step, read
the state, render, close, and reap the idle ones. Env work runs on a thread pool, never on the
event loop; requests to one session wait for each other. Everything refused raises `ApiError`
(an HTTP status, the field at fault, a stable code); `envs.serving.server` answers it over HTTP
or WebSocket, and its module docstring lists the routes, messages and limits.

`request_models`, `parse_json` and `validate` read request bodies the same way for every
transport (strict: unknown fields are refused, naming them).
"""

import asyncio
import copy
import json
import logging
import re
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from envs.errors import RegistryError, UnknownEnvError
from envs.registry import list_envs, make, spec
from envs.serving.protocol import describe_space, jsonable
from rewards.serving.http import field_name

__all__ = [
    "DEFAULT_BLOCKED_KWARGS",
    "DEFAULT_KWARG_LIMITS",
    "ApiError",
    "EnvServerConfig",
    "Session",
    "SessionStore",
    "parse_json",
    "request_models",
    "validate",
    "validation_error",
]

logger = logging.getLogger(__name__)

# Keyword arguments only the operator may set: they name files or hosts, or loosen the sandbox.
DEFAULT_BLOCKED_KWARGS = ("data_path", "hub_id", "sandbox", "wrapped")
# Upper bounds on integer keyword arguments (at any depth of `task_kwargs` too); other integers
# are bounded by `max_int_kwarg`. They keep one request from building an env that never finishes.
DEFAULT_KWARG_LIMITS = {
    "num_agents": 64,
    "rounds": 64,
    "max_action_chars": 1 << 20,
    "max_obs_chars": 1 << 20,
    "max_output_chars": 1 << 20,
    "cache_size": 4096,
}
MAX_SEED = 2**63
MAX_EXPIRED_REMEMBERED = 4096


@dataclass(frozen=True)
class EnvServerConfig:
    """What an env server serves and its limits.

    Args:
        envs: the env ids served (None: every registered id, looked up per request).
        env_kwargs: env id -> keyword arguments the operator sets for every session of that env
            (e.g. ``{"math/solve-v0": {"task": "gsm8k", "data_path": "test.jsonl"}}``); a client's
            kwargs override them, except those in `blocked_kwargs`.
        max_sessions: sessions open at once (HTTP and WebSocket) before new ones get 429.
        idle_timeout_s: seconds without a request after which a session is closed.
        max_body_bytes: bytes per request body or WebSocket message.
        workers: threads running env work.
        blocked_kwargs: keyword arguments clients may not set, also inside ``task_kwargs``.
        kwarg_limits: the largest integer a client may give each named keyword argument.
        max_int_kwarg: the largest magnitude of any other integer in a client's kwargs.
        max_agents: the most agents a session's env may have.
        step_timeout_s: seconds a session's reset, step, state or render may take (waiting for
            a worker included) before the request is answered 504 ``STEP_TIMEOUT`` and the
            session closed (its env's state is unknown once a step is cut off); the worker
            finishes the env call, bounded by the env's own limits (verifier timeouts, the
            sandbox's wall clock), and then closes the env.
    """

    envs: tuple[str, ...] | None = None
    env_kwargs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    max_sessions: int = 256
    idle_timeout_s: float = 300.0
    max_body_bytes: int = 16 * 1024 * 1024
    workers: int = 8
    blocked_kwargs: tuple[str, ...] = DEFAULT_BLOCKED_KWARGS
    kwarg_limits: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_KWARG_LIMITS))
    max_int_kwarg: int = 10**9
    max_agents: int = 64
    step_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        for key in (
            "max_sessions",
            "idle_timeout_s",
            "max_body_bytes",
            "workers",
            "max_int_kwarg",
            "max_agents",
            "step_timeout_s",
        ):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"EnvServerConfig.{key} must be a positive number, got {value!r}")
        if self.envs is not None:
            object.__setattr__(self, "envs", tuple(self.envs))
            for env_id in self.envs:
                spec(env_id)  # raises naming the unknown id, with a "did you mean"
        for env_id, kwargs in self.env_kwargs.items():
            spec(env_id)
            if not isinstance(kwargs, Mapping):
                raise TypeError(f"EnvServerConfig.env_kwargs[{env_id!r}] must be a mapping")
        if isinstance(self.blocked_kwargs, str):
            raise TypeError("EnvServerConfig.blocked_kwargs must be a sequence of names, not a str")
        object.__setattr__(self, "blocked_kwargs", tuple(self.blocked_kwargs))

    def limits(self) -> dict[str, Any]:
        """The limits a client may want to know (``GET /envs``)."""
        shown = asdict(self)
        shown.pop("env_kwargs")  # the operator's settings (paths) are not the clients' business
        return jsonable(shown)


class ApiError(Exception):
    """A request the server refuses: an HTTP status, the field at fault and a message.

    Attributes:
        status: the HTTP status (WebSocket errors carry it too).
        field: the request field at fault (``env_id``, ``kwargs.rounds``, ``action``, ...).
        code: a stable machine-readable name (``UNKNOWN_ENV``, ``NOT_YOUR_TURN``, ...).
    """

    def __init__(
        self,
        status: int,
        field: str,
        code: str,
        message: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(f"{field}: {message}")
        self.status, self.field, self.code = status, field, code
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        return {"error": str(self), "field": self.field, "code": self.code}


def validation_error(errors: Sequence[Mapping[str, Any]]) -> ApiError:
    """A pydantic error list as one 422 naming the first field at fault."""
    problems = [f"{field_name(e.get('loc', ()))}: {e.get('msg', 'invalid')}" for e in errors]
    first = field_name(errors[0].get("loc", ())) if errors else "body"
    rest = "; ".join(problems[1:10])
    message = errors[0].get("msg", "invalid") if errors else "invalid"
    return ApiError(422, first, "VALIDATION_ERROR", message + (f" (also {rest})" if rest else ""))


def _kwarg_named(message: str, kwargs: Mapping[str, Any]) -> str:
    """The field of the keyword argument an env's error names first (``kwargs.rounds``,
    ``kwargs.task_kwargs.difficulty``), or ``kwargs``: envs name the argument they refuse."""
    candidates = {name: f"kwargs.{name}" for name in kwargs}
    task_kwargs = kwargs.get("task_kwargs")
    if isinstance(task_kwargs, Mapping):
        candidates.update({name: f"kwargs.task_kwargs.{name}" for name in task_kwargs})
    found = [
        (m.start(), where)
        for name, where in candidates.items()
        if (m := re.search(rf"(?<![\w.]){re.escape(str(name))}(?!\w)", message))
    ]
    return min(found)[1] if found else "kwargs"


class Session:
    """One env of one client, with its lock and bookkeeping (server side)."""

    def __init__(
        self, session_id: str, env_id: str, kwargs: dict[str, Any], env: Any, owner: str
    ) -> None:
        from pettingzoo import ParallelEnv

        self.id, self.env_id, self.kwargs, self.env, self.owner = (
            session_id,
            env_id,
            kwargs,
            env,
            owner,
        )
        self.raw = getattr(env, "unwrapped", env)
        self.parallel = isinstance(self.raw, ParallelEnv)
        self.lock = asyncio.Lock()
        self.created = self.last_used = time.monotonic()
        self.closed: str | None = None  # why, once closed
        self.started = False
        self.episode_id: str | None = None
        self.step_count = 0
        self.last: dict[str, Any] | None = None  # Parallel: what the last reset/step returned
        self.description: dict[str, Any] = {}

    def touch(self) -> None:
        self.last_used = time.monotonic()


class SessionStore:
    """The sessions of one server and everything done to them; both transports call this.

    Every method that fails raises `ApiError`. Env work runs on the store's thread pool.
    """

    def __init__(self, config: EnvServerConfig) -> None:
        self.config = config
        self.sessions: dict[str, Session] = {}
        self.expired: OrderedDict[str, str] = OrderedDict()  # closed id -> why
        self.reserved = 0
        self.executor = ThreadPoolExecutor(config.workers, thread_name_prefix="env-session")

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` on the thread pool; what an env raises beyond `ApiError` becomes a 500."""
        return await self._await(fn, asyncio.wrap_future(self.executor.submit(fn, *args)))

    # ------------------------------------------------------------------ making sessions

    def served(self) -> list[str]:
        return list(self.config.envs) if self.config.envs is not None else list_envs()

    def _reserve(self) -> None:
        open_now = len(self.sessions) + self.reserved
        if open_now >= self.config.max_sessions:
            raise ApiError(
                429,
                "sessions",
                "CAPACITY_REACHED",
                f"{open_now} sessions are open, max_sessions={self.config.max_sessions}; close "
                "one (DELETE /sessions/{id}) or retry later",
                headers={"Retry-After": "1"},
            )
        self.reserved += 1

    def _check_env_id(self, env_id: str) -> None:
        try:
            spec(env_id)
        except UnknownEnvError as exc:
            raise ApiError(404, "env_id", "UNKNOWN_ENV", str(exc)) from exc
        except RegistryError as exc:  # malformed
            raise ApiError(422, "env_id", "VALIDATION_ERROR", str(exc)) from exc
        served = self.served()
        if env_id not in served:
            raise ApiError(
                404, "env_id", "UNKNOWN_ENV", f"{env_id!r} is not served here; served: {served}"
            )

    def _check_kwargs(self, kwargs: Mapping[str, Any], prefix: str = "kwargs") -> None:
        from rewards import list_verifiers

        for key, value in kwargs.items():
            where = f"{prefix}.{key}"
            if key in self.config.blocked_kwargs:
                raise ApiError(
                    422,
                    where,
                    "BLOCKED_KWARG",
                    f"{key!r} is set by the server's operator only (blocked_kwargs="
                    f"{list(self.config.blocked_kwargs)})",
                )
            if key == "verifier" and value is not None and value not in list_verifiers():
                raise ApiError(
                    422,
                    where,
                    "VALIDATION_ERROR",
                    f"verifier must be a registered name, one of {list_verifiers()}; got "
                    f"{value!r:.80} (import paths and remote verifiers are not taken from clients)",
                )
            self._check_numbers(key, value, where)
            if key == "task_kwargs" and isinstance(value, Mapping):
                self._check_kwargs(value, where)

    def _check_numbers(self, key: str, value: Any, where: str) -> None:
        if isinstance(value, bool):
            return
        if isinstance(value, int):
            limit = self.config.kwarg_limits.get(key, self.config.max_int_kwarg)
            if abs(value) > limit:
                raise ApiError(
                    422, where, "KWARG_TOO_LARGE", f"{value} exceeds this server's limit of {limit}"
                )
        elif isinstance(value, list):
            for index, item in enumerate(value):
                self._check_numbers(key, item, f"{where}.{index}")
        elif isinstance(value, Mapping) and key != "task_kwargs":
            for inner, item in value.items():
                self._check_numbers(inner, item, f"{where}.{inner}")

    def _build(self, env_id: str, kwargs: dict[str, Any]) -> Any:
        """Make the env (on a worker thread); ApiError for what the env refuses."""
        from pettingzoo import AECEnv, ParallelEnv

        merged = {**self.config.env_kwargs.get(env_id, {}), **kwargs}
        try:
            env = make(env_id, **merged)
        except (TypeError, ValueError, KeyError) as exc:  # KeyError: a task's missing option
            message = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
            raise ApiError(
                422, _kwarg_named(message, kwargs), "INVALID_KWARGS", f"{env_id} refused: {message}"
            ) from exc
        raw = getattr(env, "unwrapped", env)
        problem = None
        if not isinstance(raw, (AECEnv, ParallelEnv)):
            problem = ApiError(
                500,
                "env_id",
                "NOT_A_PETTINGZOO_ENV",
                f"{env_id} made a {type(raw).__name__}, not a PettingZoo AECEnv or ParallelEnv",
            )
        elif len(raw.possible_agents) > self.config.max_agents:
            problem = ApiError(
                422,
                "kwargs",
                "TOO_MANY_AGENTS",
                f"{env_id} has {len(raw.possible_agents)} agents; "
                f"max_agents={self.config.max_agents}",
            )
        if problem is not None:
            env.close()
            raise problem
        return env

    def _describe(self, session: Session) -> dict[str, Any]:
        env, raw = session.env, session.raw
        try:
            observation_spaces = {
                a: describe_space(env.observation_space(a)) for a in raw.possible_agents
            }
            action_spaces = {a: describe_space(env.action_space(a)) for a in raw.possible_agents}
        except TypeError as exc:
            raise ApiError(500, "env_id", "UNSERVABLE_SPACE", f"{session.env_id}: {exc}") from exc
        max_turns = getattr(raw, "max_turns", None)
        return {
            "session_id": session.id,
            "env_id": session.env_id,
            "api": "parallel" if session.parallel else "aec",
            "kwargs": jsonable(session.kwargs),
            "possible_agents": list(raw.possible_agents),
            "max_turns": max_turns
            if isinstance(max_turns, int)
            else spec(session.env_id).max_turns,
            "metadata": jsonable(getattr(raw, "metadata", {})),
            "render_mode": jsonable(getattr(raw, "render_mode", None)),
            "observation_spaces": observation_spaces,
            "action_spaces": action_spaces,
            "idle_timeout_s": self.config.idle_timeout_s,
        }

    def _register(self, session: Session) -> Session:
        session.description = self._describe(session)
        self.sessions[session.id] = session
        return session

    async def create(self, env_id: str, kwargs: Mapping[str, Any], owner: str) -> Session:
        """A new session of `env_id` built with the client's `kwargs`."""
        self._check_env_id(env_id)
        kwargs = dict(kwargs)
        self._check_kwargs(kwargs)
        self._reserve()
        try:
            env = await self._run(self._build, env_id, kwargs)
        finally:
            self.reserved -= 1
        session = Session(uuid.uuid4().hex, env_id, kwargs, env, owner)
        try:
            return self._register(session)
        except ApiError:
            await self._run(env.close)
            raise

    async def fork(self, session: Session, owner: str) -> Session:
        """A new session holding a deep copy of `session`'s env, episode bookkeeping included."""
        async with session.lock:
            self._check_open(session)
            self._reserve()
            try:
                env = await self._run(copy.deepcopy, session.env)
            finally:
                self.reserved -= 1
            session.touch()
            clone = Session(uuid.uuid4().hex, session.env_id, dict(session.kwargs), env, owner)
            clone.started, clone.episode_id = session.started, session.episode_id
            clone.step_count, clone.last = session.step_count, copy.deepcopy(session.last)
            return self._register(clone)

    # ------------------------------------------------------------------ finding sessions

    def get(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is not None:
            return session
        why = self.expired.get(session_id)
        if why is not None:
            raise ApiError(404, "session_id", "SESSION_CLOSED", f"session {session_id} {why}")
        raise ApiError(
            404,
            "session_id",
            "UNKNOWN_SESSION",
            f"no session {session_id!r:.80} on this server (create one: POST /sessions)",
        )

    def _check_open(self, session: Session) -> None:
        if session.closed is not None:  # closed while this request waited for the lock
            raise ApiError(
                404, "session_id", "SESSION_CLOSED", f"session {session.id} {session.closed}"
            )

    # ------------------------------------------------------------------ episodes

    def snapshot(self, session: Session) -> dict[str, Any]:
        """The session's state (on a worker thread: observing may be real work; the caller holds
        the session's lock)."""
        raw = session.raw
        agents = list(raw.agents) if session.started else []
        state: dict[str, Any] = {
            "session_id": session.id,
            "env_id": session.env_id,
            "api": "parallel" if session.parallel else "aec",
            "episode_id": session.episode_id,
            "step_count": session.step_count,
            "agents": agents,
            "agent_selection": None,
        }
        if session.parallel:
            last = session.last or {}
            state.update(
                observations=last.get("observations", {}),
                rewards=last.get("rewards", {}),
                cumulative_rewards=last.get("rewards", {}),
                terminations=last.get("terminations", {}),
                truncations=last.get("truncations", {}),
                infos=last.get("infos", {}),
            )
        elif session.started:
            state.update(
                agent_selection=raw.agent_selection,
                observations={a: jsonable(session.env.observe(a)) for a in agents},
                rewards=jsonable(dict(raw.rewards)),
                cumulative_rewards=jsonable(dict(raw._cumulative_rewards)),
                terminations={a: bool(v) for a, v in raw.terminations.items()},
                truncations={a: bool(v) for a, v in raw.truncations.items()},
                infos=jsonable(dict(raw.infos)),
            )
        else:
            state.update(
                observations={},
                rewards={},
                cumulative_rewards={},
                terminations={},
                truncations={},
                infos={},
            )
        state["done"] = session.started and not agents
        return state

    def _reset(self, session: Session, seed: int | None, options: dict | None) -> dict[str, Any]:
        try:
            result = session.env.reset(seed=seed, options=options)
        except (TypeError, ValueError, KeyError) as exc:
            message = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
            raise ApiError(422, "options", "INVALID_RESET", message) from exc
        if session.parallel:
            observations, infos = result
            agents = list(session.raw.agents)
            session.last = {
                "observations": jsonable(observations),
                "rewards": dict.fromkeys(agents, 0.0),
                "terminations": dict.fromkeys(agents, False),
                "truncations": dict.fromkeys(agents, False),
                "infos": jsonable(infos),
            }
        session.started, session.step_count = True, 0
        return self.snapshot(session)

    def apply_step(self, session: Session, body: dict[str, Any]) -> dict[str, Any]:
        """One step of the body's action(s) (on a worker thread, holding the session's lock)."""
        raw = session.raw
        where = "actions" if session.parallel else "action"
        if not session.started:
            raise ApiError(
                409, where, "NO_EPISODE", "no episode yet: reset the session before stepping"
            )
        if not raw.agents:
            raise ApiError(
                409,
                where,
                "EPISODE_OVER",
                f"the episode {session.episode_id} is over (after {session.step_count} steps); "
                "reset the session to start another",
            )
        try:
            if session.parallel:
                observations, rewards, terminations, truncations, infos = session.env.step(
                    body["actions"]
                )
                session.last = {
                    "observations": jsonable(observations),
                    "rewards": jsonable(rewards),
                    "terminations": {a: bool(v) for a, v in terminations.items()},
                    "truncations": {a: bool(v) for a, v in truncations.items()},
                    "infos": jsonable(infos),
                }
            else:
                agent = body.get("agent")
                if agent is not None and agent != raw.agent_selection:
                    raise ApiError(
                        409,
                        "agent",
                        "NOT_YOUR_TURN",
                        f"it is {raw.agent_selection!r}'s turn, not {agent!r:.80}",
                    )
                session.env.step(body["action"])
        except (TypeError, ValueError) as exc:
            raise ApiError(422, where, "INVALID_ACTION", str(exc)) from exc
        session.step_count += 1
        return self.snapshot(session)

    async def locked(self, session: Session, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(session, *args)` on the thread pool, holding the session's lock, the session open,
        within ``step_timeout_s`` (`EnvServerConfig`): past it, 504 and the session closed."""
        async with session.lock:
            self._check_open(session)
            session.touch()
            work = self.executor.submit(fn, session, *args)
            waiting = asyncio.wrap_future(work)
            limit = self.config.step_timeout_s
            try:
                # asyncio.wait, not wait_for: a TimeoutError the env itself raises stays a 500
                done, _ = await asyncio.wait({waiting}, timeout=limit)
                if not done:
                    waiting.cancel()  # the worker's call runs on; only our wait ends
                    await self._cut_off(session, work, limit)
                    raise ApiError(
                        504,
                        "server",
                        "STEP_TIMEOUT",
                        f"the env took more than step_timeout_s={limit:g} s; session "
                        f"{session.id} is closed (its env's state is unknown): create a new one",
                    )
                return await self._await(fn, waiting)
            finally:
                session.touch()

    async def _await(self, fn: Callable[..., Any], waiting: Any) -> Any:
        """`waiting`'s result; what the env raised beyond `ApiError` becomes a 500."""
        try:
            return await waiting
        except ApiError:
            raise
        except Exception as exc:
            logger.exception("env work %s failed", getattr(fn, "__name__", fn))
            raise ApiError(
                500, "server", "EXECUTION_ERROR", f"{type(exc).__name__}: {exc}"
            ) from exc

    async def _cut_off(self, session: Session, work: Any, limit: float) -> None:
        """Close `session` whose env call `work` ran past `limit`: no request reaches it again,
        and its env is closed on the worker once the call returns (never while it runs)."""
        why = f"closed: a call ran past step_timeout_s={limit:g} s"
        logger.warning("session %s (%s) %s", session.id, session.env_id, why)
        self._forget(session, why)

        def close_env(_: Any) -> None:
            try:
                session.env.close()
            except Exception:  # the request was answered; a failing close is only logged
                logger.exception("closing cut-off session %s failed", session.id)

        work.add_done_callback(close_env)

    async def reset(
        self, session: Session, seed: int | None, options: dict | None, episode_id: str | None
    ) -> dict[str, Any]:
        if seed is not None and not -MAX_SEED < seed < MAX_SEED:
            raise ApiError(
                422, "seed", "VALIDATION_ERROR", f"seed must be within +-2**63, got {seed}"
            )

        def run(s: Session) -> dict[str, Any]:
            s.episode_id = episode_id or uuid.uuid4().hex
            return self._reset(s, seed, options)

        return await self.locked(session, run)

    async def step(self, session: Session, body: dict[str, Any]) -> dict[str, Any]:
        return await self.locked(session, self.apply_step, body)

    async def state(self, session: Session) -> dict[str, Any]:
        return await self.locked(session, self.snapshot)

    async def render(self, session: Session) -> dict[str, Any]:
        if not session.started:
            raise ApiError(
                409, "session_id", "NO_EPISODE", "no episode yet: reset the session first"
            )
        return {"render": jsonable(await self.locked(session, lambda s: s.env.render()))}

    # ------------------------------------------------------------------ closing

    async def close(self, session: Session, why: str) -> None:
        """Close `session` (its env's ``close()`` on a worker thread); idempotent."""
        if session.closed is not None:
            return
        self._forget(session, why)
        await self._run(session.env.close)

    def _forget(self, session: Session, why: str) -> None:
        """Mark `session` closed for `why`: gone from the open sessions, remembered as expired."""
        session.closed = why
        if self.sessions.get(session.id) is session:
            del self.sessions[session.id]
        self.expired[session.id] = why
        while len(self.expired) > MAX_EXPIRED_REMEMBERED:
            self.expired.popitem(last=False)

    async def reap(self) -> int:
        """Close the HTTP sessions idle longer than ``idle_timeout_s``; returns how many."""
        now, limit = time.monotonic(), self.config.idle_timeout_s
        idle = [
            s
            for s in list(self.sessions.values())
            if s.owner == "http" and not s.lock.locked() and now - s.last_used > limit
        ]
        for session in idle:
            try:
                await self.close(session, f"expired: idle for more than idle_timeout_s={limit:g} s")
            except Exception:  # an env whose close() fails must not stop the reaper
                logger.exception("closing idle session %s (%s) failed", session.id, session.env_id)
        return len(idle)

    async def reap_forever(self) -> None:
        interval = min(max(self.config.idle_timeout_s / 4, 0.01), 5.0)
        while True:
            await asyncio.sleep(interval)
            await self.reap()

    async def shutdown(self) -> None:
        for session in list(self.sessions.values()):
            try:
                await self.close(session, "closed: the server shut down")
            except Exception:
                logger.exception("closing session %s at shutdown failed", session.id)
        self.executor.shutdown(wait=False, cancel_futures=True)


# ---------------------------------------------------------------------- request bodies


def request_models() -> dict[str, Any]:
    from pydantic import BaseModel, ConfigDict, Field

    strict = ConfigDict(extra="forbid", strict=True)

    class CreateRequest(BaseModel):
        model_config = strict
        env_id: str
        kwargs: dict[str, Any] = Field(default_factory=dict)

    class AttachRequest(BaseModel):
        model_config = strict
        session_id: str

    class ResetRequest(BaseModel):
        model_config = strict
        seed: int | None = None
        options: dict[str, Any] | None = None
        episode_id: str | None = Field(default=None, max_length=255)

    class AECStepRequest(BaseModel):
        model_config = strict
        action: str | None
        agent: str | None = None

    class ParallelStepRequest(BaseModel):
        model_config = strict
        actions: dict[str, str]

    return {
        "create": CreateRequest,
        "attach": AttachRequest,
        "reset": ResetRequest,
        "aec_step": AECStepRequest,
        "parallel_step": ParallelStepRequest,
    }


def parse_json(text: str | bytes) -> Any:
    """JSON text as data (Python's parser: it reads the lone surrogate escapes of model output);
    ApiError 422 for anything else, absurd nesting included."""
    try:
        return json.loads(text) if text else {}
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise ApiError(422, "body", "INVALID_JSON", f"not JSON: {exc}") from exc


def validate(data: Any, model: Any) -> Any:
    """`data` validated by `model`; ApiError 422 naming the first field at fault otherwise."""
    from pydantic import ValidationError

    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise validation_error(exc.errors(include_url=False, include_input=False)) from exc
