"""An env's own options as a command-line group, derived from its registered options dataclass.

Each registered env states its options once, in its options dataclass (`envs.options`:
``ReflectionOptions``, ``DebateOptions``, ...; ``envs.spec(env_id).options``). A training
script adds its env's options as one argument group (`options_group`): its fields beyond the
task's (`envs.options.TaskOptions`: task, split, verifier, ... have the generic env group),
typed for the command line, with the dataclass's defaults and help; ``scripts/evaluate.py``, whose
env is a flag, adds every env's options once each (`add_all_groups`). Adding an option to an env
is one edit, in its options dataclass: it then shows in ``--help``, reaches training and
evaluation (`envs.protocol.Protocol.env_kwargs`), and is checked there by the dataclass itself.

A sequence option (reflection's ``audit``) reads as a comma-separated string on the command line
(``--audit critic,refiner``; ``--audit ""``: none). Options whose type a command line cannot
write (the tool env's ``sandbox``, a `SandboxConfig`) are left out of the group; they keep their
defaults.
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

import envs
from envs.options import TaskOptions

SCALARS = (bool, int, float, str)
GROUP_PREFIX = "env options"


def options_class(env_id: str) -> type | None:
    """The options dataclass `env_id` was registered with, or None."""
    return envs.spec(env_id).options


def _scalar(annotation: Any) -> tuple[type | None, bool, bool]:
    """``(scalar type, optional, sequence)`` of a field's annotation, or ``(None, ..)`` when a
    command line cannot write it."""
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        if len(members) == 1:
            scalar, _, sequence = _scalar(members[0])
            if sequence:  # a comma list cannot say None (the env's own) apart from empty
                return None, False, False
            return scalar, len(members) < len(args), sequence
        return None, False, False
    if origin in (tuple, list, Sequence, typing.Sequence) or annotation in (tuple, list):
        inner = [a for a in args if a is not Ellipsis]
        if all(a is str for a in inner):
            return str, False, True
        return None, False, False
    if annotation in SCALARS:
        return annotation, False, False
    return None, False, False


def _annotation(cls: type, f: dataclasses.Field) -> Any:
    """A field's annotation, resolved in its class's module; None when it cannot be (a name
    imported for type checkers only)."""
    if not isinstance(f.type, str):
        return f.type
    for klass in cls.__mro__:
        if f.name in getattr(klass, "__annotations__", {}):
            module = sys.modules.get(klass.__module__)
            try:
                return eval(f.type, vars(module) if module else {})  # a source annotation
            except NameError:
                return None
    return None


def _fields(cls: type) -> list[tuple[dataclasses.Field, type, bool, bool]]:
    task = {f.name for f in dataclasses.fields(TaskOptions)}
    out = []
    for f in dataclasses.fields(cls):
        if f.name in task:
            continue
        scalar, optional, sequence = _scalar(_annotation(cls, f))
        if scalar is not None:
            out.append((f, scalar, optional, sequence))
    return out


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def options_group(env_id: str) -> type | None:
    """A dataclass of `env_id`'s own options, for `transformers.HfArgumentParser` (and so TRL's
    `TrlParser`) or `add_all_groups`: one field per option its command line can write, with the
    spec's and then the options class's default, the help of the field's ``metadata``, and
    ``_argument_group_name`` "env options (ENV_ID)". None: the env has no options class, or
    none beyond the task's."""
    cls = options_class(env_id)
    if cls is None:
        return None
    spec_defaults = envs.spec(env_id).kwargs
    specs = []
    for f, scalar, optional, sequence in _fields(cls):
        default = spec_defaults.get(f.name, _default(f))
        if sequence:
            default = ",".join(default or ())
        metadata = {"help": f.metadata.get("help", "")}
        if "choices" in f.metadata:
            metadata["choices"] = list(f.metadata["choices"])
        typ: Any = scalar | None if optional and not sequence else scalar
        specs.append((f.name, typ, dataclasses.field(default=default, metadata=metadata)))
    if not specs:
        return None
    name = "".join(part.capitalize() for part in envs.spec(env_id).name.split("_"))
    return dataclasses.make_dataclass(
        f"{name}OptionArguments",
        specs,
        namespace={"_argument_group_name": f"{GROUP_PREFIX} ({env_id})", "env_id": env_id},
    )


def option_kwargs(env_id: str, parsed: Any) -> dict[str, Any]:
    """The env kwargs of a parsed `options_group` (or a mapping of its field values): each
    option as the options class takes it (a comma-separated sequence as a tuple)."""
    cls = options_class(env_id)
    if cls is None or parsed is None:
        return {}
    values = parsed if isinstance(parsed, Mapping) else vars(parsed)
    out: dict[str, Any] = {}
    for f, _, _, sequence in _fields(cls):
        if f.name not in values:
            continue
        value = values[f.name]
        if sequence and isinstance(value, str):
            value = tuple(part.strip() for part in value.split(",") if part.strip())
        out[f.name] = value
    return out


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "yes", "1", "t", "y"):
        return True
    if lowered in ("false", "no", "0", "f", "n"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def add_all_groups(parser: Any) -> dict[str, list[str]]:
    """Add every registered env's options to an `argparse.ArgumentParser` as one group, each
    flag once (an option several envs share, like ``--rounds``, is one flag), defaulting to
    None (not given: the protocol's value, else the env's); returns option -> the envs that
    take it (``mathteams evaluate``, whose env is one of its flags)."""
    takers: dict[str, list[str]] = {}
    fields: dict[str, dataclasses.Field] = {}
    for env_id in envs.list_envs():
        group_cls = options_group(env_id)
        for f in dataclasses.fields(group_cls) if group_cls is not None else ():
            takers.setdefault(f.name, []).append(env_id)
            fields.setdefault(f.name, f)
    group = parser.add_argument_group(
        f"{GROUP_PREFIX} (each of the envs named; not given: the trained protocol's, else the env's)"
    )
    for name, f in fields.items():
        scalar, _, _ = _scalar(f.type)
        short = ", ".join(env.split("/")[1] for env in takers[name])
        kwargs: dict[str, Any] = {
            "default": None,
            "help": f"{f.metadata.get('help') or name} [{short}]",
        }
        if "choices" in f.metadata:
            kwargs["choices"] = f.metadata["choices"]
        if scalar is bool:
            kwargs.update(type=_bool, nargs="?", const=True, metavar="BOOL")
        else:
            kwargs["type"] = scalar
        group.add_argument(f"--{name}", **kwargs)
    return takers


def group_defaults(env_id: str) -> dict[str, Any]:
    """`env_id`'s options group's defaults by option (as its command line writes them)."""
    group_cls = options_group(env_id)
    return {} if group_cls is None else {f.name: f.default for f in dataclasses.fields(group_cls)}
