"""Which problems, on a command line: one argument group derived from the fields of
`envs.tasks.problems.ProblemSet`, as the env's options group is derived from its options
dataclass (`trainers.run.options`).

A command names the fields it exposes and the flag each one takes; the type, the help and the
checks come from `ProblemSet`. It is used three times, with the flags users type today:

- training (`trainers.run.args.EnvArguments`): ``--task --data_path --split --difficulty
  --train_problems --verifier``;
- the before/after evaluation of a run (`trainers.run.args.EvalArguments`): ``--eval_split
  --eval_difficulty --eval_problems --eval_data_path`` (its task and verifier are training's);
- ``mathteams evaluate`` (`trainers.run.evaluate_args`): ``--task --data_path --split
  --difficulty --num_problems --offset``.

A group is a dataclass, for `transformers.HfArgumentParser` (and so TRL's `TrlParser`), or added
to an `argparse.ArgumentParser` (`add_problem_flags`). Its ``problem_values()`` gives the parsed
values by `ProblemSet` field, so a caller builds the set with ``ProblemSet(**values)``.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any

from envs.tasks.problems import ProblemSet

FIELDS = {f.name: f for f in dataclasses.fields(ProblemSet)}


def _cli_type(name: str) -> Any:
    """The type a command line writes for `ProblemSet` field `name`: its ``cli_type`` metadata
    (levels: ``list[int]``) or its annotation."""
    f = FIELDS[name]
    if "cli_type" in f.metadata:
        return f.metadata["cli_type"]
    return typing.get_type_hints(ProblemSet)[name]


def problem_arguments(
    name: str,
    flags: Mapping[str, str],
    group: str,
    defaults: Mapping[str, Any] | None = None,
    helps: Mapping[str, str] | None = None,
) -> type:
    """A dataclass with one field per `ProblemSet` field of `flags` (field -> flag name), typed
    and helped as `ProblemSet` states them, with `defaults` and `helps` (by field) replacing its
    own where a command's differ; ``_argument_group_name`` is `group`.

    Raises:
        ValueError: a name of `flags`, `defaults` or `helps` that is no field of `ProblemSet`.
    """
    for given in (flags, defaults or {}, helps or {}):
        unknown = sorted(set(given) - set(FIELDS))
        if unknown:
            raise ValueError(
                f"{name}: {unknown} are no fields of ProblemSet; expected some of {list(FIELDS)}"
            )
    specs = []
    for key, flag in flags.items():
        default = (defaults or {}).get(key, FIELDS[key].default)
        text = (helps or {}).get(key) or FIELDS[key].metadata["help"]
        typ = _cli_type(key)
        if isinstance(default, list):  # a mutable default: a fresh copy for each instance
            spec = dataclasses.field(
                default_factory=lambda d=default: list(d), metadata={"help": text}
            )
        else:
            if default is None and type(None) not in typing.get_args(typ):
                typ = typ | None
            spec = dataclasses.field(default=default, metadata={"help": text})
        specs.append((flag, typ, spec))
    return dataclasses.make_dataclass(
        name,
        specs,
        namespace={
            "_argument_group_name": group,
            "PROBLEM_FLAGS": dict(flags),
            "problem_values": _problem_values,
        },
    )


def _problem_values(self: Any) -> dict[str, Any]:
    """The parsed values by `ProblemSet` field (``{"levels": [2, 3], "count": 200, ...}``)."""
    return {key: getattr(self, flag) for key, flag in type(self).PROBLEM_FLAGS.items()}


def add_problem_flags(
    parser: Any, group_cls: type, choices: Mapping[str, list[str]] | None = None
) -> list[str]:
    """Add `group_cls`'s flags (a `problem_arguments` class) to an `argparse.ArgumentParser`,
    as one argument group; `choices` by field (the registered tasks). Returns the flag names."""
    group = parser.add_argument_group(group_cls._argument_group_name)
    by_flag = {flag: key for key, flag in group_cls.PROBLEM_FLAGS.items()}
    names = []
    for f in dataclasses.fields(group_cls):
        typ = f.type
        args = [a for a in typing.get_args(typ) if a is not type(None)] or [typ]
        scalar = args[0]
        kwargs: dict[str, Any] = {"help": f.metadata["help"]}
        if typing.get_origin(scalar) is list:
            kwargs.update(type=typing.get_args(scalar)[0], nargs="+")
        else:
            kwargs["type"] = scalar
        kwargs["default"] = (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        )
        if choices and by_flag[f.name] in choices:
            kwargs["choices"] = choices[by_flag[f.name]]
        group.add_argument(f"--{f.name}", **kwargs)
        names.append(f.name)
    return names
