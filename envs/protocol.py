"""What a run plays, typed once: `Protocol` (the env, its problems, its own options, tokens per
turn, temperature, the base model).

Training holds two (what it trains on, what its before/after evaluation plays:
`trainers.run.args.Job.protocol`, `Job.eval_protocol`), an evaluation one
(`trainers.evaluation.config.EvalConfig.protocol`), and a model a run saved carries its own in
``final/mathteams.json`` (`Protocol.to_dict`, read back with `Protocol.from_dict`). The env is
made from it (`Protocol.env_kwargs`), and so is the env of a baseline that plays the same
problems (the model alone's ``math/solve-v0``)::

    >>> from envs.tasks.problems import ProblemSet
    >>> p = Protocol("math/reflection-v0", ProblemSet("unknown", split="test", levels=(2,)),
    ...              options={"rounds": 1})
    >>> p.env_kwargs("math/solve-v0")["task"], "rounds" in p.env_kwargs("math/solve-v0")
    ('unknown', False)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from envs.registry import spec
from envs.tasks.problems import ProblemSet

DEFAULT_ENV = "math/reflection-v0"


class ProtocolError(ValueError):
    """A serialised protocol that cannot be read: it names where it came from and what was
    expected."""


def plain(value: Any) -> Any:
    """`value` as JSON writes it (tuples as lists, mappings' keys as strings, a dataclass as its
    fields, other objects as their text)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # a sandbox config
        return plain(dataclasses.asdict(value))
    return str(value)


@dataclass(frozen=True)
class Protocol:
    """What a run plays.

    Args:
        env_id (`str`, "math/reflection-v0"): the registered env.
        problems (`ProblemSet`): which problems, the verifier among them
            (`envs.tasks.problems`).
        options (`Mapping`): the env's own options beyond its task (rounds, rewards, audit,
            ...), as the env takes them; checked by the env's options class.
        max_completion_length (`int | None`): tokens per turn; None: the player's default.
        temperature (`float | None`): sampling temperature; None: the player's default.
        base_model (`str | None`): the model the run started from (a hub id, a catalog name,
            a local folder; None: the embedded default).

    Raises:
        TypeError, ValueError: an unknown env id, a `problems` that is no `ProblemSet`, or an
            option the env does not take or rejects (the env's own error).
    """

    env_id: str = DEFAULT_ENV
    problems: ProblemSet = field(default_factory=ProblemSet)
    options: Mapping[str, Any] = field(default_factory=dict)
    max_completion_length: int | None = None
    temperature: float | None = None
    base_model: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.problems, ProblemSet):
            raise TypeError(
                f"Protocol.problems must be an envs.tasks.problems.ProblemSet, got "
                f"{self.problems!r}"
            )
        options = dict(self.options)
        verifier = options.pop("verifier", None)
        if verifier is not None:  # given among the options: the set's, its one home
            problems = dataclasses.replace(self.problems, verifier=verifier)
            object.__setattr__(self, "problems", problems)
        object.__setattr__(self, "options", options)
        env = spec(self.env_id)  # an unknown id raises, naming the registered ones
        if env.options is not None:  # the env's own errors, before any model loads
            env.options_for(**self.env_kwargs())
        # a sequence as the env holds it, so a protocol read back from JSON equals its own
        typed = {k: tuple(v) if isinstance(v, list) else v for k, v in options.items()}
        object.__setattr__(self, "options", typed)

    def env_kwargs(self, env_id: str | None = None) -> dict[str, Any]:
        """The kwargs of `env_id` (default: the protocol's env) playing these problems: the
        set's (`ProblemSet.env_kwargs`) and the env's options; another env (a baseline: the
        model alone's solve-v0, the model with the tool's code-v0) gets only the options its
        own options class shares (the tool's sandbox and output bound)."""
        options = dict(self.options)
        if env_id is not None and env_id != self.env_id:
            own = getattr(spec(env_id).options, "own_names", tuple)()
            options = {k: v for k, v in options.items() if k in own}
        return self.problems.env_kwargs(options)

    @property
    def task(self) -> str:
        """The task it plays (``problems.task``)."""
        return self.problems.task

    def to_dict(self) -> dict[str, Any]:
        """Its JSON form: its fields, the problems' by `ProblemSet` field."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["problems"] = {
            f.name: getattr(self.problems, f.name) for f in dataclasses.fields(ProblemSet)
        }
        return plain(data)

    @classmethod
    def from_dict(cls, data: Any, where: str = "a protocol") -> Protocol:
        """The protocol `data` (`to_dict`'s form) holds; `ProtocolError` names `where` and the
        expected keys when it is not one."""
        names = [f.name for f in dataclasses.fields(cls)]
        sets = [f.name for f in dataclasses.fields(ProblemSet)]
        if not isinstance(data, Mapping) or not isinstance(data.get("problems", {}), Mapping):
            raise ProtocolError(f"{where}: expected an object with keys {', '.join(names)}")
        unknown = sorted(set(data) - set(names))
        unknown += sorted(f"problems.{k}" for k in set(data.get("problems", {})) - set(sets))
        if unknown or not isinstance(data.get("env_id", DEFAULT_ENV), str):
            raise ProtocolError(
                f"{where}: unexpected keys {unknown} or a non-string env_id; expected the keys "
                f"{', '.join(names)}, and problems with {', '.join(sets)}"
            )
        values = dict(data)
        values["problems"] = ProblemSet(**data.get("problems", {}))
        try:
            return cls(**values)
        except (TypeError, ValueError, KeyError) as exc:
            raise ProtocolError(f"{where}: {exc}") from None

    def describe(self) -> str:
        """One line: the env, the task and levels, the tokens per turn and the options."""
        levels = self.problems.level_list() or self.problems.data_path or "its file"
        options = ", ".join(f"{k}={v}" for k, v in sorted(self.options.items()))
        return (
            f"{self.env_id} on {self.task} levels {plain(levels)}, "
            f"{self.max_completion_length} tokens a turn" + (f", {options}" if options else "")
        )
