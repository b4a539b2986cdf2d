"""Environment registry: `register`, `make`, `spec`, `list_envs`.

Ids read ``namespace/name-vN`` (for example ``math/reflection-v0``). Entry points are either a
callable or a ``"module:callable"`` string, imported only when the env is made, so listing the
registered envs imports no env module.

A spec may carry the env's options dataclass (``options=ReflectionOptions``, a subclass of
`envs.options.TaskOptions`, as reasoning-gym's ``config_cls``): then `EnvSpec.options_for`
checks a set of keyword arguments once, with the env's own errors, and `EnvSpec.facts` states the
env's agents, roles, answering and reviewing roles and turn slots for them, with no env built.
Command lines derive their env group from it (`trainers.run.options`).
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from envs.errors import DuplicateEnvError, RegistryError, UnknownEnvError
from envs.option_hints import forget_options, note_options
from envs.options import TaskOptions, problem_kwargs
from envs.tasks.family import declared_run_defaults, family_run_defaults

ENV_ID_RE = re.compile(
    r"^(?P<namespace>[a-z][a-z0-9_]*)/(?P<name>[a-z][a-z0-9_]*)-v(?P<version>\d+)$"
)


@dataclass(frozen=True)
class EnvSpec:
    """A registered environment.

    Args:
        id (`str`): ``namespace/name-vN``.
        entry_point (`str | Callable`): ``"module:callable"`` or a callable returning the env.
        kwargs (`dict`): default keyword arguments, overridden by those given to `make`.
        max_turns (`int | None`): upper bound on agent turns (AEC) or rounds (Parallel) with the
            default kwargs; informational, the env's own `max_turns` attribute is authoritative.
            With `options` and no `max_turns`, the options' facts for the defaults state it.
        options (`type | None`): the env's options dataclass (an `envs.options.TaskOptions`
            subclass with a ``facts()`` method): every keyword the env takes, checked in one
            place. None: an env registered without one (its facts are learnt by making it).
        run_task (`str | None`): the task a training or evaluation run of the env plays when
            none is given (None: the env's own default task).
        run_options (`dict[str, dict]`): per task, the settings a run plays where they differ
            from the env's own defaults (its options, and the run's ``max_completion_length``);
            ``"*"`` holds every other task's. The training scripts and ``mathteams evaluate``
            both read them (`run_defaults`), so a run and its evaluation play one protocol.
            A task family declares its own with it (`envs.tasks.family.TaskFamily.run_defaults`).
    """

    id: str
    entry_point: str | Callable[..., Any]
    kwargs: dict[str, Any] = field(default_factory=dict)
    max_turns: int | None = None
    options: type | None = None
    run_task: str | None = None
    run_options: dict[str, dict[str, Any]] = field(default_factory=dict)

    def run_defaults(self, task: str | None) -> dict[str, Any]:
        """The settings a run on `task` plays beyond the env's defaults: those its task family
        declares for this env (`envs.tasks.family.TaskFamily.run_defaults`), else `run_options`'
        (the task's entry, else ``"*"``; a mixed task reads ``"*"``)."""
        declared = family_run_defaults(self.id, task)
        if declared is not None:
            return declared
        return dict(self.run_options.get(str(task), self.run_options.get("*", {})))

    def run_tables(self) -> dict[str, dict[str, Any]]:
        """Every task's run settings that differ from the env's defaults: `run_options` and the
        task families' declarations for this env (which `run_defaults` reads first)."""
        return {**self.run_options, **declared_run_defaults(self.id)}

    def options_for(self, **kwargs: Any) -> Any:
        """The env's options for `kwargs` over the spec's defaults, checked (the errors the env
        gives), or a RegistryError when the spec has no options class."""
        if self.options is None:
            raise RegistryError(
                f"{self.id!r} was registered without an options class; pass options= to "
                "register() to state its options and facts"
            )
        merged = {**self.kwargs, **problem_kwargs(kwargs)}
        merged.pop("wrapped", None)  # make()'s own switch, not an option of the env
        names = {f.name for f in dataclasses.fields(self.options)}
        unknown = sorted(set(merged) - names)
        if unknown:
            raise TypeError(
                f"{self.id} takes no option {', '.join(repr(n) for n in unknown)}; its options "
                f"are {', '.join(sorted(names))}"
            )
        return self.options(**merged)

    def defaults(self) -> dict[str, Any]:
        """The env's own options with their defaults (its options class's fields beyond the
        task's, then the spec's kwargs over them); the spec's kwargs alone without a class."""
        if self.options is None:
            return dict(self.kwargs)
        shared = TaskOptions if issubclass(self.options, TaskOptions) else None
        task_fields = {f.name for f in dataclasses.fields(shared)} if shared else set()
        made = self.options_for()
        own = {
            f.name: getattr(made, f.name)
            for f in dataclasses.fields(self.options)
            if f.name not in task_fields
        }
        return {**own, **self.kwargs}

    def facts(self, **kwargs: Any) -> Any:
        """The env's static facts for `kwargs` (`envs.options.EnvFacts`: agents, roles, answer
        and review roles, turn slots), from its options class; no env is built."""
        return self.options_for(**kwargs).facts()

    @property
    def namespace(self) -> str:
        return parse_env_id(self.id)[0]

    @property
    def name(self) -> str:
        return parse_env_id(self.id)[1]

    @property
    def version(self) -> int:
        return parse_env_id(self.id)[2]

    def load(self) -> Callable[..., Any]:
        """Return the entry point as a callable, importing its module if needed."""
        if callable(self.entry_point):
            return self.entry_point
        module_name, _, attr = self.entry_point.partition(":")
        if not attr:
            raise RegistryError(
                f"entry point {self.entry_point!r} of {self.id!r} must read 'module:callable'"
            )
        module = importlib.import_module(module_name)
        try:
            return getattr(module, attr)
        except AttributeError as err:
            raise RegistryError(
                f"entry point {self.entry_point!r} of {self.id!r}: module {module_name!r} has no "
                f"attribute {attr!r}"
            ) from err


_REGISTRY: dict[str, EnvSpec] = {}


def parse_env_id(env_id: str) -> tuple[str, str, int]:
    """Split ``namespace/name-vN`` into its parts, or raise naming the expected format."""
    if not isinstance(env_id, str):
        raise TypeError(f"env id must be a str like 'math/solve-v0', got {type(env_id).__name__}")
    match = ENV_ID_RE.match(env_id)
    if match is None:
        raise RegistryError(
            f"malformed env id {env_id!r}: expected 'namespace/name-vN' in lower case, "
            "for example 'math/reflection-v0'"
        )
    return match["namespace"], match["name"], int(match["version"])


def register(
    env_id: str,
    entry_point: str | Callable[..., Any],
    *,
    max_turns: int | None = None,
    override: bool = False,
    options: type | None = None,
    run_task: str | None = None,
    run_options: dict[str, dict[str, Any]] | None = None,
    **kwargs: Any,
) -> EnvSpec:
    """Register an environment under `env_id`; `options` is its options dataclass, `run_task`
    and `run_options` what a run of it plays by default (`EnvSpec`), and `kwargs` its default
    keyword arguments.

    Raises:
        DuplicateEnvError: the id is taken and `override` is False.
    """
    parse_env_id(env_id)
    if env_id in _REGISTRY and not override:
        raise DuplicateEnvError(
            f"env id {env_id!r} is already registered; pass override=True to replace it, "
            "or bump the version (-vN+1) if the behaviour changed"
        )
    if options is not None and not (
        isinstance(options, type)
        and dataclasses.is_dataclass(options)
        and hasattr(options, "facts")
    ):
        raise RegistryError(
            f"options of {env_id!r} must be a dataclass with a facts() method (an "
            f"envs.options.TaskOptions subclass), got {options!r}"
        )
    env_spec = EnvSpec(
        env_id,
        entry_point,
        dict(kwargs),
        max_turns,
        options,
        run_task,
        {task: dict(values) for task, values in (run_options or {}).items()},
    )
    if options is not None and max_turns is None:  # stated by the options, for the defaults
        env_spec = dataclasses.replace(env_spec, max_turns=env_spec.facts().max_turns)
    _REGISTRY[env_id] = env_spec
    if options is not None:  # named in another env's error for one of them
        note_options(env_id, options.own_names())
    return env_spec


def deregister(env_id: str) -> None:
    """Remove a registered id (for tests and notebooks)."""
    spec(env_id)
    del _REGISTRY[env_id]
    forget_options(env_id)


def spec(env_id: str) -> EnvSpec:
    """Return the `EnvSpec` of `env_id`, with a "did you mean" when it is unknown."""
    if env_id in _REGISTRY:
        return _REGISTRY[env_id]
    parse_env_id(env_id)
    close = difflib.get_close_matches(env_id, list(_REGISTRY), n=3, cutoff=0.6)
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
    raise UnknownEnvError(
        f"no env registered as {env_id!r}.{hint} Registered: {', '.join(sorted(_REGISTRY))}"
    )


def registered_specs() -> list[EnvSpec]:
    """Every registered `EnvSpec`, in registration order (the built-in table first)."""
    return list(_REGISTRY.values())


def list_envs(namespace: str | None = None) -> list[str]:
    """Sorted registered ids, optionally only those of one namespace."""
    return sorted(i for i in _REGISTRY if namespace is None or i.startswith(f"{namespace}/"))


def make(env_id: str, **kwargs: Any) -> Any:
    """Build the env registered as `env_id`; keyword arguments override the spec's defaults.

    ``make(env_id, wrapped=False)`` returns the raw env (no order-enforcing wrapper), if the
    entry point supports it.
    """
    env_spec = spec(env_id)
    return env_spec.load()(**{**env_spec.kwargs, **kwargs})
