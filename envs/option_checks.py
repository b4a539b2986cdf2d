"""The checks every env option's value goes through, each raising an error that names the
option and what it takes, and the field helpers of the options dataclasses (`envs.options`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from typing import Any


def check_choice(name: str, value: Any, choices: Sequence[str]) -> str:
    """`value` if it is one of `choices`, else an error naming `name` and the choices."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}")
    return value


def check_count(name: str, value: Any, low: int) -> int:
    """`value` if it is an int >= `low` (not a bool), else an error naming `name`: the one check
    of every count an env takes (``rounds``, ``num_agents``, ``max_action_chars``, ...)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return value


def check_weight(name: str, value: float) -> float:
    """A reward weight: a finite number >= 0, as a float, or an error naming `name`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number >= 0, got {value!r}")
    if not 0.0 <= value < float("inf"):
        raise ValueError(f"{name} must be a finite number >= 0, got {value}")
    return float(value)


def _option(default: Any, text: str) -> Any:
    """A field with its default and its one-line help, ``metadata["help"]``."""
    return field(default=default, metadata={"help": text})


def _normalise(options: Any, name: str, value: Any) -> None:
    """Store a checked field's normal form (a float, a tuple) on a frozen dataclass."""
    object.__setattr__(options, name, value)


def _one_each(roles: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(roles))
