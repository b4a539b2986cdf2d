"""Which problems a run plays: one frozen `ProblemSet` (task, split, levels, count, offset, data
file, verifier), the one home of that question for training and evaluation alike.

A training run holds two (`trainers.run.args.Job.train_set`, `Job.eval_set`), an evaluation one
(`trainers.evaluation.config.EvalConfig.problem_set`). Each gives the env kwargs that play it
(`env_kwargs`), its problem source (`source`), its problems (`problems`), the levels of a
generated task that hold their share of it (`held`) and what it shares with another set
(`overlap`)::

    >>> test = ProblemSet("unknown", split="test", levels=(2, 3), count=4)
    >>> [p["id"].split("/")[1] for p in test.problems()]
    ['test', 'test', 'test', 'test']
    >>> test.overlap(ProblemSet("unknown", split="train", levels=(2, 3), count=50))
    []
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from envs.tasks import default_levels, is_procedural, levels_holding, make_task
from envs.tasks.mixed import member_names
from envs.tasks.sources import Problem, ProblemSource
from envs.tasks.splits import overlap

logger = logging.getLogger(__name__)

LevelsArg = Sequence[int] | Mapping[str, Sequence[int]] | None
# The task a run plays unless told, its one home: the embedded model is built on it
# (`trainers.embedded.EMBEDDED_TASK`), and the envs whose runs default to a task name it.
DEFAULT_TASK = "unknown"


def _frozen_levels(levels: LevelsArg) -> Any:
    """`levels` as a hashable value: a tuple, or a mixed task's sorted (member, tuple) pairs."""
    if levels is None:
        return None
    if isinstance(levels, Mapping):
        return tuple((str(k), tuple(v)) for k, v in levels.items())
    if isinstance(levels, int):
        return (levels,)
    return tuple(levels)


def _field(default: Any, text: str, cli_type: Any = None) -> Any:
    """A field with its one-line help, ``metadata["help"]``, and where its annotation is not
    what a command line writes, ``metadata["cli_type"]`` (`trainers.run.problem_args`)."""
    metadata: dict[str, Any] = {"help": text}
    if cli_type is not None:
        metadata["cli_type"] = cli_type
    return dataclasses.field(default=default, metadata=metadata)


@dataclass(frozen=True)
class ProblemSet:
    """Which problems: the task and where its problems come from, how many, from which index.

    Args:
        task (`str`, "unknown"): a registered task, or several joined by ``+`` (`envs.tasks.mixed`).
        split (`str | None`): the task's split; None: a generated task's "train" for a
            training set (`repeat`), "test" for an evaluation set; a file task's own default.
        levels (`Sequence[int] | Mapping[str, Sequence[int]] | None`): a generated task's
            levels (a mixed task's: per member); None: the task's declared defaults.
        count (`int | None`): problems; None: the source's size.
        offset (`int`, 0): the first problem's index.
        data_path (`str | None`): a local JSONL file for a file task (gsm8k, math, anli).
        verifier (`str | None`): a verifier name replacing the task's own.
        repeat (`bool`, False): a level with fewer distinct problems than asked cycles them
            (training's epochs); an evaluation counts each problem once.
    """

    task: str = _field(DEFAULT_TASK, "a registered task, or several joined by '+' (mixed)")
    split: str | None = _field(
        None,
        "the task's split: train, validation or test (generated tasks: test reports, "
        "validation chooses settings; a problem's split is a hash of its text)",
    )
    levels: Any = _field(  # noqa: RUF009 - _field makes a field()
        None, "levels of a generated task (default: the task's declared defaults)", list[int]
    )
    count: int | None = _field(None, "how many problems (default: all of the source)")
    offset: int = _field(0, "the first problem's index")
    data_path: str | None = _field(None, "a local JSONL file of a file task (gsm8k, math, anli)")
    verifier: str | None = _field(None, "a verifier name instead of the task's own, e.g. 'math'")
    repeat: bool = _field(False, "cycle a level's problems when asked for more (training)")

    def __post_init__(self) -> None:
        object.__setattr__(self, "levels", _frozen_levels(self.levels))
        if self.count is not None and self.count < 0:
            raise ValueError(f"ProblemSet count must be >= 0 or None, got {self.count}")
        if self.offset < 0:
            raise ValueError(f"ProblemSet offset must be >= 0, got {self.offset}")

    @property
    def generated(self) -> bool:
        """Whether the task is generated (every member registered with `envs.tasks.Levels`)."""
        return is_procedural(self.task)

    def level_list(self) -> list[int] | dict[str, list[int]]:
        """The levels as the tasks take them: a list, or a mixed task's member -> list; the
        task's declared defaults where none are given ([] for a file task)."""
        if not self.generated:
            return []
        names, given = member_names(self.task), self.levels
        if len(names) == 1:
            return list(given) if given else default_levels(self.task)
        if given and isinstance(given[0], tuple):  # a mapping: each member its own
            chosen = dict(given)
            return {name: list(chosen.get(name) or default_levels(name)) for name in names}
        return {name: list(given) if given else default_levels(name) for name in names}

    def env_kwargs(self, options: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The kwargs of an env playing this set, with the env's own `options` (rounds,
        rewards, protocol, the verifier) passed as they are. A generated task gets its levels and
        the problems up to ``offset + count`` (a mixed task's members their share of them)."""
        kwargs: dict[str, Any] = {"task": self.task}
        if self.data_path:
            kwargs["data_path"] = self.data_path
        if self.split:
            kwargs["split"] = self.split
        if self.generated:
            size = None if self.count is None else self.offset + self.count
            members = len(member_names(self.task))
            if size is not None and members > 1:  # interleaved: the first `size` hold this many
                size = -(-size // members)
            task_kwargs: dict[str, Any] = {"difficulty": self.level_list(), "size": size}
            if self.repeat:
                task_kwargs["repeat"] = True
            kwargs["task_kwargs"] = task_kwargs
        if self.verifier:
            kwargs["verifier"] = self.verifier
        return {**kwargs, **(options or {})}

    def source(self) -> ProblemSource:
        """The task's problem source for this set (`envs.make_task`)."""
        kwargs = self.env_kwargs()
        options = dict(kwargs.pop("task_kwargs", None) or {})
        for key in ("data_path", "split", "verifier"):
            if kwargs.get(key) is not None:
                options[key] = kwargs[key]
        return make_task(self.task, **options).source

    def problems(self) -> list[Problem]:
        """Problems ``offset .. offset + count - 1`` (at most the source's)."""
        source = self.source()
        end = len(source) if self.count is None else min(self.offset + self.count, len(source))
        return [source[i] for i in range(self.offset, end)]

    def overlap(self, other: ProblemSet) -> list[str]:
        """The texts this set shares with `other` (`envs.overlap`: whitespace and case ignored)."""
        return overlap(self.problems(), other.problems())

    def evaluated(self, inherited: LevelsArg = None) -> ProblemSet:
        """This set as an evaluation plays it, the one home of that rule: a generated task's
        split is "test" unless given (held out by construction, `envs.tasks.splits`); its levels
        are its own where given (as chosen), else `inherited` (a training run's) or the task's
        declared defaults, of which only those that hold their share of the set as distinct
        texts of the split are kept (`held`). A file task's set is returned as it is."""
        if not self.generated:
            return self
        problems = self if self.split else dataclasses.replace(self, split="test")
        if not problems.levels:
            problems = dataclasses.replace(problems, levels=inherited or None).held()
        return dataclasses.replace(problems, levels=problems.level_list())

    def held(self, split: str = "test") -> ProblemSet:
        """This set with only the levels of a generated task that hold their share of its
        problems as distinct texts of its split (default `split`; a mixed task's members
        each their share), each dropped one logged: ``unknown`` level 1 holds 48 test
        problems, fewer than a third of 200. A file task's set is returned as it is."""
        if not self.generated:
            return self
        levels = self.level_list()
        size = self.offset + (self.count or 0)
        own = self.split or split
        if isinstance(levels, dict):
            share = -(-size // len(levels))  # interleaved: the first `size` hold this many
            kept: Any = {name: _held(name, own, lv, share) for name, lv in levels.items()}
        else:
            kept = _held(self.task, own, levels, size)
        return dataclasses.replace(self, levels=kept)


def _held(task: str, split: str, levels: list[int], size: int) -> list[int]:
    """`levels` of `task` that hold their share of `size` distinct `split` problems, each
    dropped one logged (`envs.tasks.levels_holding`)."""
    kept, dropped = levels_holding(task, split, levels, size)
    for level, count in dropped.items():
        logger.warning(
            "%s level %d left out of the evaluation: it holds %d distinct %s problems, fewer "
            "than its share of %d problems over levels %s (choose levels with difficulty)",
            task,
            level,
            count,
            split,
            size,
            levels,
        )
    return kept
