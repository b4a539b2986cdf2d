"""PettingZoo envs whose every call goes to an env server (`envs.serving.server`).

``envs.serving.remote(url, env_id, **kwargs)`` (also ``envs.remote``) opens a session of
`env_id` on the server at `url` and returns a `RemoteAECEnv` or a `RemoteParallelEnv` (whichever
the served env is): a PettingZoo env like the one `envs.make(env_id, **kwargs)` builds, so
`envs.check_env` and PettingZoo's ``api_test`` / ``parallel_api_test`` run against it unchanged::

    env = envs.serving.remote("http://127.0.0.1:8001", "math/reflection-v0", rounds=2)
    env.reset(seed=0)
    for agent in env.agent_iter():
        obs, reward, terminated, truncated, info = env.last()
        env.step(None if terminated or truncated else my_llm(obs["prompt"]))
    env.close()  # closes the session on the server

``transport="ws"`` speaks the server's WebSocket instead of HTTP (one connection per env, no
HTTP request per call). Spaces are rebuilt from the server's description
(`envs.serving.protocol.build_space`); infos and observations arrive as JSON
(`envs.serving.protocol.jsonable`: tuples come back as lists).

Failures are loud and never replaced by defaults: a server that cannot be reached, dies or answers
garbage raises `EnvServerError` naming the URL, the session and the call; a request the server
refuses (a 4xx: an unknown env, bad kwargs, a session that expired, a step after the episode
ended) raises `EnvRequestError` (also a `ValueError`) with the server's message, which names the
field. Nothing is retried: a step is not idempotent. A non-string action raises `TypeError` here,
as the local env does, before any request.

Copies: ``copy.deepcopy(env)`` forks the session on the server (``POST /sessions/{id}/fork``), so
the copy continues from the same point on its own. ``pickle.dumps(env)`` forks a snapshot
session, and each ``pickle.loads`` of the bytes forks the snapshot again; the snapshot is
closed by the server's idle timeout. Sessions the client never closes are closed by that timeout
too (nothing is sent from ``__del__``).

httpx (``pip install -e ".[server]"``) and, for ``transport="ws"``, websockets are imported on
first use; each remote env holds its own connection (`envs.serving.connections`), closed by
``close()`` (or, without a request, when the env is garbage-collected).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from gymnasium import spaces
from pettingzoo import AECEnv, ParallelEnv

from envs.serving.connections import (
    Connection,
    EnvRequestError,
    EnvServerError,
    HTTPConnection,
    connect,
    open_session,
)
from envs.serving.protocol import build_space

__all__ = ["EnvRequestError", "EnvServerError", "RemoteAECEnv", "RemoteParallelEnv", "remote"]


def _restore(
    cls: type, url: str, transport: str, timeout_s: float, snapshot_id: str, state: dict
) -> Any:
    """Unpickle a remote env: fork its snapshot session again and attach to the fork."""
    forked = HTTPConnection(url, timeout_s)
    forked.session_id = snapshot_id
    try:
        description = forked.fork()
    finally:
        forked.abandon()
    connection = connect(url, transport, timeout_s)
    description = connection.attach(description["session_id"])
    return cls._from_connection(connection, description, state)


class _RemoteEnv:
    """What both remote env kinds share: the session, the spaces, copies, closing."""

    api = ""
    _connection: Connection
    _state: dict[str, Any]

    def __init__(
        self,
        url: str,
        env_id: str,
        *,
        transport: str = "http",
        timeout_s: float = 30.0,
        **kwargs: Any,
    ) -> None:
        super().__init__()  # PettingZoo's AECEnv / ParallelEnv, after this class in the MRO
        self._connect(url, env_id, transport, timeout_s, kwargs)

    def _connect(
        self, url: str, env_id: str, transport: str, timeout_s: float, kwargs: dict[str, Any]
    ) -> None:
        """Open a session of `env_id` on the server at `url` and take it on; a session of the
        wrong kind closes its connection before the error leaves."""
        connection, description = open_session(url, transport, timeout_s, env_id, kwargs)
        try:
            self._init_remote(connection, description, None)
        except (TypeError, EnvServerError):
            connection.close()
            raise

    def _init_remote(
        self, connection: Connection, description: Mapping[str, Any], state: Mapping | None
    ) -> None:
        if description.get("api") != self.api:
            raise TypeError(
                f"{description.get('env_id')} is served as a {description.get('api')} env; use "
                f"{'RemoteAECEnv' if description.get('api') == 'aec' else 'RemoteParallelEnv'} "
                "or envs.remote(), which picks the kind"
            )
        self._connection = connection
        self.url = connection.url
        self.env_id = description.get("env_id")
        self.session_id = description.get("session_id")
        self._closed = False
        try:
            if not isinstance(self.session_id, str) or not isinstance(self.env_id, str):
                raise TypeError("no session_id or env_id")
            self.possible_agents = list(description["possible_agents"])
            self.metadata = dict(description.get("metadata") or {})
            self.render_mode = description.get("render_mode")
            self.max_turns = description.get("max_turns")
            self._observation_spaces = {
                a: build_space(description["observation_spaces"][a], f"observation_spaces.{a}")
                for a in self.possible_agents
            }
            self._action_spaces = {
                a: build_space(description["action_spaces"][a], f"action_spaces.{a}")
                for a in self.possible_agents
            }
        except (KeyError, TypeError, ValueError) as exc:
            raise EnvServerError(
                f"env server {self.url} described session {self.session_id} badly: {exc}",
                self.url,
            ) from exc
        self._checked(state or _EMPTY_STATE, "describe")

    @classmethod
    def _from_connection(
        cls, connection: Connection, description: Mapping[str, Any], state: Mapping | None = None
    ) -> Any:
        env = cls.__new__(cls)
        env._init_remote(connection, description, state)
        return env

    def _read(self, state: Mapping[str, Any]) -> dict[str, Any]:
        """The attributes `state` gives this env (raises on a malformed state)."""
        raise NotImplementedError

    def _checked(self, state: Any, verb: str) -> dict[str, Any]:
        """`state` applied to this env, all of it or (EnvServerError) none of it."""
        try:
            self.__dict__.update(self._read(state))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise EnvServerError(
                f"env server {self.url}: {verb} of session {self.session_id} ({self.env_id}) "
                f"answered a malformed state ({type(exc).__name__}: {exc})",
                self.url,
            ) from exc
        self._state = dict(state)
        return self._state

    def _call(self, verb: str, *args: Any) -> dict[str, Any]:
        if self._closed:
            raise EnvRequestError(
                f"remote env {self.env_id} (session {self.session_id}) is closed; make a new one",
                self.url,
            )
        return getattr(self._connection, verb)(*args)

    # ------------------------------------------------------------------ PettingZoo

    def observation_space(self, agent: str) -> spaces.Space:
        return self._observation_spaces[agent]

    def action_space(self, agent: str) -> spaces.Space:
        return self._action_spaces[agent]

    def render(self) -> Any:
        """The served env's ``render()`` (mode ``"ansi"``: the transcript)."""
        return self._call("render")["render"]

    def close(self) -> None:
        """Close the session on the server; closing again does nothing. A session the server
        has already dropped (expired, restarted) counts as closed."""
        if self._closed:
            return
        self._closed = True
        try:
            self._connection.close()
        except EnvRequestError as exc:
            if exc.status != 404:
                raise

    def remote_state(self) -> dict[str, Any]:
        """The server's state of this session (``GET /sessions/{id}/state``), fetched now."""
        return self._checked(self._call("state"), "state")

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.url!r}, {self.env_id!r}, session={self.session_id!r}, "
            f"transport={self._connection.transport!r})"
        )

    def __str__(self) -> str:
        return str(self.metadata.get("name", self.env_id))

    # ------------------------------------------------------------------ copies

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        description = self._call("fork")
        connection = connect(self.url, self._connection.transport, self._connection.timeout_s)
        connection.attach(description["session_id"])
        return type(self)._from_connection(connection, description, copy.deepcopy(self._state))

    def __reduce__(self) -> tuple[Any, ...]:
        snapshot = self._call("fork")
        transport, timeout_s = self._connection.transport, self._connection.timeout_s
        return (
            _restore,
            (type(self), self.url, transport, timeout_s, snapshot["session_id"], self._state),
        )


_EMPTY_STATE: dict[str, Any] = {
    "agents": [],
    "agent_selection": None,
    "observations": {},
    "rewards": {},
    "cumulative_rewards": {},
    "terminations": {},
    "truncations": {},
    "infos": {},
    "step_count": 0,
    "episode_id": None,
}


class RemoteAECEnv(_RemoteEnv, AECEnv):
    """An AEC env served by an env server (see the module docstring).

    Args:
        url: the server's base URL, ``http(s)://host:port``.
        env_id: a served env id (``math/reflection-v0``).
        transport: ``"http"`` or ``"ws"``.
        timeout_s: seconds one call may take.
        **kwargs: the env's keyword arguments, as for `envs.make`.

    Raises:
        EnvRequestError: the server refused the env id or the kwargs.
        EnvServerError: the server cannot be reached.
        TypeError: the env is a Parallel env (use `RemoteParallelEnv` or `envs.remote`).
    """

    api = "aec"

    def _read(self, state: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "agents": [str(a) for a in state["agents"]],
            "agent_selection": state["agent_selection"],
            "_observations": dict(state["observations"]),
            "rewards": {a: float(v) for a, v in state["rewards"].items()},
            "_cumulative_rewards": {a: float(v) for a, v in state["cumulative_rewards"].items()},
            "terminations": {a: bool(v) for a, v in state["terminations"].items()},
            "truncations": {a: bool(v) for a, v in state["truncations"].items()},
            "infos": {a: dict(v) for a, v in state["infos"].items()},
            "step_count": int(state["step_count"]),
            "episode_id": state["episode_id"],
        }

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self._checked(self._call("reset", {"seed": seed, "options": options}), "reset")

    def observe(self, agent: str) -> Any:
        try:
            observation = self._observations[agent]
        except KeyError:
            raise KeyError(
                f"no observation of {agent!r} in session {self.session_id}: the server sends "
                f"those of live agents, {self.agents}"
            ) from None
        return copy.deepcopy(observation)

    def step(self, action: str | None) -> None:
        agent = self.agent_selection
        dead = bool(self.terminations.get(agent) or self.truncations.get(agent))
        if not isinstance(action, str) and not (action is None and dead):
            raise TypeError(
                f"action of {agent!r} must be a str (the agent's reply), got {type(action).__name__}"
            )
        self._checked(self._call("step", {"action": action, "agent": agent}), "step")


class RemoteParallelEnv(_RemoteEnv, ParallelEnv):
    """A Parallel env served by an env server (arguments as for `RemoteAECEnv`)."""

    api = "parallel"

    def _read(self, state: Mapping[str, Any]) -> dict[str, Any]:
        last = (
            dict(state["observations"]),
            {a: float(v) for a, v in state["rewards"].items()},
            {a: bool(v) for a, v in state["terminations"].items()},
            {a: bool(v) for a, v in state["truncations"].items()},
            {a: dict(v) for a, v in state["infos"].items()},
        )
        return {
            "agents": [str(a) for a in state["agents"]],
            "last_transition": last,
            "step_count": int(state["step_count"]),
            "episode_id": state["episode_id"],
        }

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        self._checked(self._call("reset", {"seed": seed, "options": options}), "reset")
        observations, _, _, _, infos = self.last_transition
        return observations, infos

    def step(self, actions: Mapping[str, str]) -> tuple[dict, dict, dict, dict, dict]:
        if not isinstance(actions, Mapping):
            raise TypeError(f"actions must be a dict agent -> str, got {type(actions).__name__}")
        for agent, action in actions.items():
            if not isinstance(action, str):
                raise TypeError(
                    f"action of {agent!r} must be a str (the agent's reply), "
                    f"got {type(action).__name__}"
                )
        self._checked(self._call("step", {"actions": dict(actions)}), "step")
        return self.last_transition


def remote(
    url: str, env_id: str, *, transport: str = "http", timeout_s: float = 30.0, **kwargs: Any
) -> RemoteAECEnv | RemoteParallelEnv:
    """A session of `env_id` on the env server at `url`, as the right kind of PettingZoo env.

    Args:
        url: the server's base URL, ``http(s)://host:port``.
        env_id: a served env id.
        transport: ``"http"`` (a request per call) or ``"ws"`` (one WebSocket connection).
        timeout_s: seconds one call may take.
        **kwargs: the env's keyword arguments, as for `envs.make`.

    Raises:
        EnvRequestError: the server refused the env id or the kwargs (the message names which).
        EnvServerError: the server cannot be reached.

    Example:
        >>> env = remote("http://127.0.0.1:8001", "math/debate-v0", rounds=1)  # doctest: +SKIP
        >>> observations, infos = env.reset(seed=0)  # doctest: +SKIP
    """
    connection, description = open_session(url, transport, timeout_s, env_id, kwargs)
    cls = RemoteParallelEnv if description.get("api") == "parallel" else RemoteAECEnv
    try:
        return cls._from_connection(connection, description)
    except (TypeError, EnvServerError):
        connection.close()
        raise
