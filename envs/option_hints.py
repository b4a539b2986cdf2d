"""What an env's unexpected keyword argument should have been, named in its error: a task's
keyword (``difficulty``: pass ``task_kwargs`` or a ``ProblemSet``), another registered env's option
(``refiner_mode`` to debate: the envs that take it), or a near miss of the env's own names."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

# A generated task's own keywords (`envs.tasks`' factories), often passed to an env by mistake.
TASK_KEYWORDS = ("difficulty", "size", "seed", "repeat", "levels")
# option -> the registered envs that take it (`note_options`, called by `envs.register`).
_TAKERS: dict[str, list[str]] = {}


def note_options(env_id: str, names: Sequence[str]) -> None:
    """Note that the registered `env_id` takes the options `names`."""
    for name in names:
        takers = _TAKERS.setdefault(name, [])
        if env_id not in takers:
            takers.append(env_id)


def forget_options(env_id: str) -> None:
    """Forget the options of `env_id` (`envs.deregister`)."""
    for takers in _TAKERS.values():
        if env_id in takers:
            takers.remove(env_id)


def unexpected(name: str, names: Sequence[str]) -> str:
    """The hint, after an env's error for the keyword `name`, given the env's own `names`."""
    if name in TASK_KEYWORDS:
        return (
            f"; {name!r} is the task's, not the env's: pass task_kwargs={{{name!r}: ...}} or "
            "problems=envs.tasks.problems.ProblemSet(...)"
        )
    if _TAKERS.get(name):
        return f"; {name!r} is an option of {', '.join(_TAKERS[name])}, not of this env"
    close = difflib.get_close_matches(name, names, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""
