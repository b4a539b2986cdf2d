"""The sessions of an env server; both transports drive them.

`SessionStore` holds every open session (one env of one client) and does everything done to
them: make (with the client's kwargs checked against `EnvServerConfig`, `envs.serving.limits`),
fork, reset, step, read the state, render, close, and reap the idle ones. Env work runs on a
thread pool, never on the event loop; requests to one session wait for each other. Everything
refused raises `ApiError` (`envs.serving.bodies`: an HTTP status, the field at fault, a stable
code); `envs.serving.server` answers it over HTTP or WebSocket, and its module docstring lists
the routes, messages and limits.

Sessions live in this process's memory: a restarted server holds none of the sessions of its
earlier run. Each session id starts with the store's `run_id`, so a request naming a session of
another run is answered 404 ``SESSION_LOST`` (saying so), not ``UNKNOWN_SESSION``.

The limits (`envs.serving.limits`) and the reading of request bodies (`envs.serving.bodies`:
`request_models`, `parse_json`, `validate`) are re-exported here, where they lived first.
"""

import asyncio
import copy
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from envs.errors import RegistryError, UnknownEnvError
from envs.registry import list_envs, make, spec
from envs.serving import memory
from envs.serving.bodies import ApiError, parse_json, request_models, validate, validation_error
from envs.serving.limits import (
    DEFAULT_BLOCKED_KWARGS,
    DEFAULT_KWARG_LIMITS,
    MAX_SEED,
    EnvServerConfig,
    kwarg_named,
)
from envs.serving.protocol import describe_space, jsonable

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

MAX_EXPIRED_REMEMBERED = 4096
RUN_ID_CHARS = 8  # the hex characters of a session id naming the server run that made it


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
        # This run of the server: every session id starts with it, so that a session of an
        # earlier run (the server restarted) is told apart from an id never made here.
        self.run_id = uuid.uuid4().hex[:RUN_ID_CHARS]
        self.started_at = time.time()

    def new_id(self) -> str:
        """A new session id: this run's `run_id`, then random hex (32 hex characters)."""
        return self.run_id + uuid.uuid4().hex[RUN_ID_CHARS:]

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

    def _build(self, env_id: str, kwargs: dict[str, Any]) -> Any:
        """Make the env (on a worker thread); ApiError for what the env refuses."""
        from pettingzoo import AECEnv, ParallelEnv

        merged = {**self.config.env_kwargs.get(env_id, {}), **kwargs}
        try:
            env = make(env_id, **merged)
        except (TypeError, ValueError, KeyError) as exc:  # KeyError: a task's missing option
            message = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
            raise ApiError(
                422, kwarg_named(message, kwargs), "INVALID_KWARGS", f"{env_id} refused: {message}"
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
        self.config.check_kwargs(kwargs)
        self._reserve()
        try:
            env = await self._run(self._build, env_id, kwargs)
        finally:
            self.reserved -= 1
        session = Session(self.new_id(), env_id, kwargs, env, owner)
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
            clone = Session(self.new_id(), session.env_id, dict(session.kwargs), env, owner)
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
        if self._of_another_run(session_id):
            started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.started_at))
            raise ApiError(
                404,
                "session_id",
                "SESSION_LOST",
                f"session {session_id} was made by another run of this server (this run, "
                f"{self.run_id}, started {started}): sessions live in the server's memory and "
                "do not survive a restart; create a new one (POST /sessions)",
            )
        raise ApiError(
            404,
            "session_id",
            "UNKNOWN_SESSION",
            f"no session {session_id!r:.80} on this server (create one: POST /sessions)",
        )

    def _of_another_run(self, session_id: str) -> bool:
        """Whether `session_id` reads as a session id of a run other than this one."""
        return (
            len(session_id) == 32
            and all(c in "0123456789abcdef" for c in session_id)
            and not session_id.startswith(self.run_id)
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
        """Reap idle sessions, and now and then hand freed heap pages back to the system
        (`envs.serving.memory.trim`: the worker threads' freed memory otherwise stays with the
        process, and its resident size creeps up under a steady load)."""
        interval = min(max(self.config.idle_timeout_s / 4, 0.01), 5.0)
        last_trim = time.monotonic()
        while True:
            await asyncio.sleep(interval)
            await self.reap()
            if time.monotonic() - last_trim >= memory.TRIM_EVERY_S:
                memory.trim()
                last_trim = time.monotonic()

    async def shutdown(self) -> None:
        for session in list(self.sessions.values()):
            try:
                await self.close(session, "closed: the server shut down")
            except Exception:
                logger.exception("closing session %s at shutdown failed", session.id)
        self.executor.shutdown(wait=False, cancel_futures=True)
