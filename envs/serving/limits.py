"""What an env server serves and its limits (`EnvServerConfig`), and the check of a client's
keyword arguments against them.

A client's kwargs may not set what only the operator may (`DEFAULT_BLOCKED_KWARGS`: files, hosts,
the sandbox), nor integers past the limits (`DEFAULT_KWARG_LIMITS`, else ``max_int_kwarg``), at
any depth of ``task_kwargs`` too; a refusal is an `ApiError` naming the field. An env's own
refusal of its kwargs is pinned on the argument its message names first (`kwarg_named`).
"""

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from envs.registry import spec
from envs.serving.bodies import ApiError
from envs.serving.protocol import jsonable

__all__ = [
    "DEFAULT_BLOCKED_KWARGS",
    "DEFAULT_KWARG_LIMITS",
    "MAX_SEED",
    "EnvServerConfig",
    "kwarg_named",
]

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

    def check_kwargs(self, kwargs: Mapping[str, Any], prefix: str = "kwargs") -> None:
        """Raise `ApiError` (422, naming the field) when a client's `kwargs` set a blocked
        argument, an unregistered verifier, or an integer past the limits."""
        from rewards import list_verifiers

        for key, value in kwargs.items():
            where = f"{prefix}.{key}"
            if key in self.blocked_kwargs:
                raise ApiError(
                    422,
                    where,
                    "BLOCKED_KWARG",
                    f"{key!r} is set by the server's operator only (blocked_kwargs="
                    f"{list(self.blocked_kwargs)})",
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
                self.check_kwargs(value, where)

    def _check_numbers(self, key: str, value: Any, where: str) -> None:
        if isinstance(value, bool):
            return
        if isinstance(value, int):
            limit = self.kwarg_limits.get(key, self.max_int_kwarg)
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


def kwarg_named(message: str, kwargs: Mapping[str, Any]) -> str:
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
