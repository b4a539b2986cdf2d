"""A trained model carries the protocol it was trained in: ``final/mathteams.json``.

A training run writes, beside the weights it saves, the env it played, the task and levels of
its problems, the env's options (rounds, rewards, refiner mode, audit, ...) and its tokens per
turn and temperature (`write_protocol`). ``mathteams evaluate --model_name_or_path DIR`` reads
it (`read_protocol`) and plays that protocol unless a flag overrides a value, and says which one
it plays (`describe`): evaluated with the env's own defaults instead, a model trained by the main
job played another protocol and scored a tenth of its trained figure.

The file is JSON, one object; ``format`` is its version. Data files are not carried: a run's
data file is its train split, and an evaluation names its own (``--data_path``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

PROTOCOL_FILE = "mathteams.json"
FORMAT = 1
# The keys a protocol file holds (any other is refused, naming these).
KEYS = (
    "format",
    "env_id",
    "task",
    "difficulty",
    "env_options",
    "max_completion_length",
    "temperature",
    "algo",
)


class ProtocolError(ValueError):
    """A protocol file that cannot be read: it names the file and what was expected."""


def _plain(value: Any) -> Any:
    """`value` as JSON writes it (tuples as lists, mappings' keys as strings)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def protocol_of(job: Any, config: Any, algo: str) -> dict[str, Any]:
    """The protocol a run with `job` (a `trainers.run.args.Job`) and `config` (its algorithm's
    config) trains in."""
    levels = job.env.levels()
    return {
        "format": FORMAT,
        "env_id": job.env_id,
        "task": job.env.task,
        "difficulty": _plain(levels),
        "env_options": _plain(job.env_options()),
        "max_completion_length": getattr(config, "max_completion_length", None),
        "temperature": getattr(config, "temperature", None),
        "algo": algo,
    }


def write_protocol(folder: str | Path, protocol: Mapping[str, Any]) -> Path:
    """Write `protocol` into `folder`/mathteams.json (atomically) and return its path."""
    from trainers.algorithms.checkpoint import write_json_atomic

    path = Path(folder) / PROTOCOL_FILE
    write_json_atomic(path, dict(protocol))
    return path


def read_protocol(model: str | Path | None) -> dict[str, Any] | None:
    """The protocol a local model folder carries (its mathteams.json), or None: a hub id, a
    folder without one, or no model. A file that is not a protocol raises `ProtocolError`."""
    if not model:
        return None
    path = Path(model) / PROTOCOL_FILE
    if not path.is_file():
        return None
    try:
        protocol = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(
            f"{path} is not readable JSON ({exc}); delete it or rewrite it"
        ) from None
    if not isinstance(protocol, dict):
        raise ProtocolError(f"{path} holds a {type(protocol).__name__}; expected an object")
    unknown = sorted(set(protocol) - set(KEYS))
    if unknown or protocol.get("format") != FORMAT or not isinstance(protocol.get("env_id"), str):
        raise ProtocolError(
            f"{path} is not a protocol file of format {FORMAT}: expected the keys "
            f"{', '.join(KEYS)} with format {FORMAT} and a string env_id; got keys "
            f"{', '.join(sorted(protocol))}"
        )
    if not isinstance(protocol.get("env_options", {}), dict):
        raise ProtocolError(f"{path}: env_options must be an object of the env's options")
    return protocol


def describe(protocol: Mapping[str, Any], path: str | Path) -> str:
    """One line naming the protocol evaluated and where it came from."""
    options = ", ".join(f"{k}={v}" for k, v in sorted(protocol.get("env_options", {}).items()))
    return (
        f"plays the protocol {Path(path) / PROTOCOL_FILE} was trained in (flags override): "
        f"{protocol['env_id']} on {protocol.get('task')} levels {protocol.get('difficulty')}, "
        f"{protocol.get('max_completion_length')} tokens a turn"
        + (f", {options}" if options else "")
    )
