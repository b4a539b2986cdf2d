"""Several tasks in one env: ``make_task("unknown+arithmetic+reach")``.

A mixed task plays its members' problems interleaved (one of each member in turn, while each
lasts), so the first ``n`` problems hold about ``n / members`` of each. Every problem keeps its
member's id (``reach/train/d2/s0/7``) and is scored by its member's verifier, and the env shows
each episode its member's instructions and answer format (`envs.core.TaskEnvMixin` switches them
when an episode's problem comes from another member). A training run names one with ``--task``;
its logs and its evaluation report each member (`member_of`).

Keyword arguments go to every member whose factory takes them; ``difficulty`` and ``data_path``
may instead map member names to their own value (``difficulty={"reach": [2, 3], "unknown":
[1, 2, 3]}``); a member missing from such a mapping gets its factory's default.
"""

from __future__ import annotations

import bisect
import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from envs.tasks.sources import Problem, ProblemSource

SEPARATOR = "+"
PER_MEMBER = ("difficulty", "data_path")  # kwargs that may map member name -> value


def task_of(problem_id: str) -> str:
    """The task a problem id names first (``reach/test/d2/s0/7`` -> ``reach``): a mixed task's
    member, for the generated tasks and any task whose ids start with its name."""
    return str(problem_id).split("/", 1)[0]


def member_names(task: Any) -> list[str]:
    """The members of a mixed task name (``"unknown+reach"`` -> ``["unknown", "reach"]``), or
    ``[task]`` for a plain name or a task object's name."""
    name = task if isinstance(task, str) else getattr(task, "name", str(task))
    return [part.strip() for part in name.split(SEPARATOR)] if SEPARATOR in name else [name]


def is_mixed(task: Any) -> bool:
    """Whether `task` (a name or a task) mixes several tasks."""
    return len(member_names(task)) > 1


class MixedSource(ProblemSource):
    """The members' problems interleaved: member 0's first, member 1's first, ..., then each
    member's second, while it lasts. ``get`` finds a problem in the member its id names."""

    def __init__(self, sources: Sequence[ProblemSource], names: Sequence[str]) -> None:
        self.sources, self.names = list(sources), list(names)
        self.name = SEPARATOR.join(self.names)
        lengths = [len(s) for s in self.sources]
        # segments of rounds in which the same members still have problems
        self._starts: list[int] = []
        self._segments: list[tuple[int, list[int]]] = []  # (first round, active members)
        start, first_round = 0, 0
        for end_round in sorted(set(lengths)):
            if end_round <= first_round:
                continue
            active = [j for j, n in enumerate(lengths) if n > first_round]
            self._starts.append(start)
            self._segments.append((first_round, active))
            start += (end_round - first_round) * len(active)
            first_round = end_round
        self._length = start

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: int) -> Problem:
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError(f"problem index {index} out of range for {self._length} problems")
        segment = bisect.bisect_right(self._starts, index) - 1
        first_round, active = self._segments[segment]
        offset = index - self._starts[segment]
        member = active[offset % len(active)]
        return self.sources[member][first_round + offset // len(active)]

    def member_index(self, problem_id: str) -> int:
        """The member a problem id belongs to: the one its first path part names, else the
        first whose source holds it. Raises KeyError naming the members."""
        head = task_of(problem_id)
        if head in self.names:
            return self.names.index(head)
        for j, source in enumerate(self.sources):
            try:
                source.get(problem_id)
            except KeyError:
                continue
            return j
        raise KeyError(f"no problem with id {problem_id!r} in any member of {self.name!r}")

    def get(self, problem_id: str) -> Problem:
        return self.sources[self.member_index(problem_id)].get(problem_id)


def member_kwargs(name: str, factory: Any, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The kwargs of member `name`: a per-member mapping's entry, and only what `factory`
    takes (a data task takes no ``difficulty``, a generated one no ``data_path``)."""
    params = inspect.signature(factory).parameters
    takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    out = {}
    for key, value in kwargs.items():
        if key in PER_MEMBER and isinstance(value, Mapping):
            if name not in value:
                continue
            value = value[name]
        if takes_any or key in params:
            out[key] = value
    return out


def check_members(names: Sequence[str], kwargs: Mapping[str, Any]) -> None:
    """Refuse a mix that repeats a member, or a per-member mapping naming a non-member."""
    if len(set(names)) != len(names) or not all(names):
        raise ValueError(f"a mixed task names each member once, got {SEPARATOR.join(names)!r}")
    for key in PER_MEMBER:
        value = kwargs.get(key)
        if isinstance(value, Mapping):
            strangers = sorted(set(value) - set(names))
            if strangers:
                raise ValueError(
                    f"{key} names {strangers}, which are not members of "
                    f"{SEPARATOR.join(names)!r}; expected some of {list(names)}"
                )
