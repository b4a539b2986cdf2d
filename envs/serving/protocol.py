"""The wire format shared by the env server (`envs.serving.server`) and its client
(`envs.serving.client`).

Three things cross the wire besides plain JSON: env outputs, which may hold values JSON has no
word for (`jsonable`), and spaces, which the client rebuilds from a description
(`describe_space` / `build_space`).

`jsonable(value)` turns any env output into JSON, deterministically, never raising:

| in | out |
|---|---|
| ``None``, ``bool``, ``int``, ``str`` | themselves (``str`` subclasses and ``IntEnum`` members become plain values) |
| finite ``float`` | itself |
| ``nan``, ``inf``, ``-inf`` | the strings ``"nan"``, ``"inf"``, ``"-inf"`` (``float()`` reads them back) |
| NumPy scalars / arrays | ``.item()`` / ``.tolist()`` |
| mappings | objects; keys that are not ``str`` become ``str(key)`` |
| lists, tuples | arrays (a tuple comes back as a list) |
| sets, frozensets | arrays sorted by ``repr`` |
| dataclass instances (e.g. a ``Verdict``) | objects of their fields |
| enums | their ``value`` |
| ``bytes`` | UTF-8 text, undecodable bytes as ``\\xNN`` escapes |
| anything else, or nesting deeper than 64 | ``repr(value)``, at most 1000 characters |

The project's envs put only strings in observations and only JSON values (plus tuples) in infos,
so for them the round trip is exact up to tuple -> list. Strings pass unchanged, lone surrogates
of model output included: the server writes JSON with ASCII escapes.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from gymnasium import spaces

from envs.core import AnyText

__all__ = ["MAX_DEPTH", "build_space", "describe_space", "jsonable"]

MAX_DEPTH = 64
MAX_REPR_CHARS = 1000


def _repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= MAX_REPR_CHARS else text[: MAX_REPR_CHARS - 3] + "..."


def jsonable(value: Any, _depth: int = 0) -> Any:
    """`value` as JSON data (see the module docstring for each type); never raises."""
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is float:
        return value if math.isfinite(value) else ("nan" if math.isnan(value) else repr(value))
    if _depth > MAX_DEPTH:
        return _repr(value)
    if isinstance(value, enum.Enum):
        return jsonable(value.value, _depth + 1)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return jsonable(float(value), _depth + 1)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, np.generic):
        return jsonable(value.item(), _depth + 1)
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist(), _depth + 1)
    if isinstance(value, Mapping):
        return {
            (k if isinstance(k, str) else str(k)): jsonable(v, _depth + 1) for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [jsonable(v, _depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        return [jsonable(v, _depth + 1) for v in sorted(value, key=repr)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: jsonable(getattr(value, f.name), _depth + 1) for f in dataclasses.fields(value)
        }
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "backslashreplace")
    return _repr(value)


def describe_space(space: spaces.Space) -> dict[str, Any]:
    """A JSON description of `space` that `build_space` turns back into an equal space.

    Raises:
        TypeError: a space other than ``Dict``, ``Text`` (`envs.core.AnyText` included) or
            ``Discrete``, which the served envs do not use.
    """
    if isinstance(space, spaces.Dict):
        return {"type": "Dict", "spaces": {k: describe_space(s) for k, s in space.spaces.items()}}
    if isinstance(space, spaces.Text):
        described = {
            "type": "Text",
            "min_length": int(space.min_length),
            "max_length": int(space.max_length),
            "charset": space.characters,
        }
        if isinstance(space, AnyText):
            described["any_text"] = True  # contains() checks type and length, not the charset
        return described
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    raise TypeError(
        f"cannot describe a {type(space).__name__} space over JSON; served envs use Dict, Text "
        "and Discrete spaces"
    )


def build_space(described: Any, where: str = "space") -> spaces.Space:
    """The space `describe_space` described.

    Raises:
        TypeError: `described` is not an object.
        ValueError: it is not a space description (the message names `where`).
    """
    if not isinstance(described, Mapping):
        raise TypeError(f"{where}: expected a space description object, got {described!r:.80}")
    kind = described.get("type")
    try:
        if kind == "Dict":
            parts = described["spaces"]
            if not isinstance(parts, Mapping):
                raise ValueError(f"'spaces' must be an object, got {type(parts).__name__}")
            return spaces.Dict({k: build_space(v, f"{where}.{k}") for k, v in parts.items()})
        if kind == "Text":
            if described.get("any_text"):
                if described.get("min_length", 0) != 0:
                    raise ValueError("an any_text space has min_length 0")
                return AnyText(int(described["max_length"]))
            return spaces.Text(
                int(described["max_length"]),
                min_length=int(described["min_length"]),
                charset=str(described["charset"]),
            )
        if kind == "Discrete":
            return spaces.Discrete(int(described["n"]), start=int(described.get("start", 0)))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{where}: malformed {kind} space description: {exc}") from exc
    raise ValueError(f"{where}: unknown space type {kind!r}; expected Dict, Text or Discrete")
