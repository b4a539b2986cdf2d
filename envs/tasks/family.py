"""Task families: a generated task declared in one folder and registered once.

A family is everything one kind of problem brings, in one `TaskFamily` declaration: its generator
and levels, its verifier (registered into `rewards` with it), its prompts, its named faults, the
run defaults it needs per env, and what the embedded recipe (`EmbeddedPart`: the scripted replies
its roles learn from) and its probe (`FamilyProbe`) read of it. The family's folder holds the
declaration and its parts (graph colouring's is one); `envs.tasks.register_family` registers
it, in one line, as a generated task (`envs.tasks.register_generated`). Code above the task layer
(the env registry's run defaults, the embedded recipe, the probes, the scripts) looks a family up
here by task name (`get_family`, `families`) and never names one.

Everything here is data and pure Python: the envs layer stays free of torch. A family's hooks are
handed what they play (an env, a policy, a recipe) by the layer that calls them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from envs.errors import DuplicateTaskError
from envs.tasks.sources import Problem

BOXED = "give the final answer as \\boxed{...} at the end."


@dataclass(frozen=True)
class Levels:
    """A generated task's levels, declared where it is registered (`register_task`).

    Args:
        all (`tuple[int, ...]`): every level its generator makes (1-based).
        default (`tuple[int, ...]`, defaults to `all`): the levels a run plays when none are
            given: training's, and evaluation's (less those too small for the problems asked:
            `levels_holding`).
    """

    all: tuple[int, ...]
    default: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        every = tuple(self.all)
        if not every or any(not isinstance(v, int) or isinstance(v, bool) or v < 1 for v in every):
            raise ValueError(f"Levels.all must be ints >= 1, like (1, 2, 3); got {self.all!r}")
        default = tuple(self.default) or every
        outside = sorted(set(default) - set(every))
        if outside:
            raise ValueError(f"Levels.default {default} holds {outside}, not among all={every}")
        object.__setattr__(self, "all", every)
        object.__setattr__(self, "default", default)


@dataclass(frozen=True)
class EmbeddedPart:
    """What the embedded recipe (`trainers.embedded`) reads of a family. The recipe gains the
    fields ``<name>_problems`` (train problems turned into transcripts, 0 by default) and
    ``<name>_difficulty`` (their levels, the family's default levels), plus `fields`.

    Args:
        rows (`Callable`): ``rows(problem, rng, reflection, ensemble, debate, review_fraction,
            second_round, team_fraction, work_fraction)``: one problem's scripted turns, played
            through the envs given (reflection made with the family's run protocol), as
            ``(observation, reply, role)`` triples; the recipe turns each into a chat row.
        version (`int`, 1): bumped whenever the family's transcripts change; keyed into the
            recipes that hold its rows.
        fields (`Mapping[str, Any]`): further recipe fields of the family, with their defaults.
        drills (`Callable | None`): ``drills(recipe, problems)``: extra SFT rows (messages
            and role) of a recipe, where ``problems(size)`` gives the recipe's train problems of
            the family.
        key (`Callable | None`): ``key(fields)`` edits the recipe's fields (a dict) into those
            its key hashes: by default the family's fields drop out of a recipe without its
            problems, and ``<name>_version`` joins one with them.
        variant (`Mapping[str, Any]`): the recipe changes of the family's own model
            (``build_embedded.py --variant <name>``); empty: none.
        model (`str`): the folder, beside the shipped model, of the family's own model (the one
            that plays it by default); empty: the shipped model plays it.
    """

    rows: Callable[..., list[tuple[Mapping[str, str], str, str]]]
    version: int = 1
    fields: Mapping[str, Any] = field(default_factory=dict)
    drills: Callable[[Any, Callable[[int], list[Any]]], list[dict[str, Any]]] | None = None
    key: Callable[[dict[str, Any]], None] | None = None
    variant: Mapping[str, Any] = field(default_factory=dict)
    model: str = ""


@dataclass(frozen=True)
class FamilyProbe:
    """A family's probe: how a model plays its roles (``mathteams probe <name>``,
    `trainers.embedded.probe_family`, which loads the model and makes the env).

    Args:
        summary (`str`): its one line in ``mathteams --help``.
        description (`str`): its ``--help`` text.
        add_arguments (`Callable`): adds its own flags to the probe's parser.
        run (`Callable`): ``run(policy, env, args)``: the lines to print, one at a time, where
            `policy` has ``act(observations) -> replies`` and `env` is ``math/reflection-v0`` on
            the family, unwrapped, with its run protocol.
    """

    summary: str
    description: str
    add_arguments: Callable[[Any], None]
    run: Callable[[Any, Any, Any], Any]


@dataclass(frozen=True)
class TaskFamily:
    """One generated task family, declared in its own folder (`register_family` registers it).

    Args:
        name (`str`): the task's name (``task="<name>"``, ``--task <name>``).
        generate (`Callable`): ``generate(index, *, difficulty, seed) -> Problem``, pure.
        levels (`Levels`): its levels and default levels.
        default_difficulty (`int | Sequence[int] | None`): the level a task made without
            `difficulty` plays (None: ``levels.default``).
        verifier (`str`): the verifier name its problems are scored with.
        verifiers (`Mapping[str, Callable]`): verifiers the family brings, registered into
            `rewards` under these names with it.
        answer_format, instructions, faults, review_first: the `envs.tasks.Task` fields.
        run_defaults (`Mapping[str, Mapping[str, Any]]`): per env id, the settings a run of that
            env on the family plays (`envs.EnvSpec.run_defaults`), in place of the env's own.
        embedded (`EmbeddedPart | None`): what the embedded recipe reads of it.
        probe (`FamilyProbe | None`): its probe.
        fuzz_references (`tuple[str, ...]`): well-formed references the fuzzer's verifier
            cases score model text against (`envs.testing.fuzz`).
    """

    name: str
    generate: Callable[..., Problem]
    levels: Levels
    default_difficulty: int | Sequence[int] | None = None
    verifier: str = "math"
    verifiers: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    answer_format: str = BOXED
    instructions: Mapping[str, str] = field(default_factory=dict)
    faults: Any = None
    review_first: bool = False
    run_defaults: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    embedded: EmbeddedPart | None = None
    probe: FamilyProbe | None = None
    fuzz_references: tuple[str, ...] = ()


_FAMILIES: dict[str, TaskFamily] = {}


def add_family(family: TaskFamily, override: bool = False) -> None:
    """Record `family` (`envs.tasks.register_family` also registers its task and verifiers)."""
    if not isinstance(family, TaskFamily):
        raise TypeError(f"expected a TaskFamily, got {type(family).__name__}")
    if family.name in _FAMILIES and not override:
        raise DuplicateTaskError(
            f"family {family.name!r} is already registered; pass override=True"
        )
    _FAMILIES[family.name] = family


def remove_family(name: str) -> None:
    """Forget the family `name`, if one is registered (`envs.tasks.deregister_task`)."""
    _FAMILIES.pop(name, None)


def get_family(task: Any) -> TaskFamily | None:
    """The family of `task` (a name, a `Task`, or a mixed task whose first member decides), or
    None when it is no registered family."""
    name = str(getattr(task, "name", task) or "").split("+")[0]
    return _FAMILIES.get(name)


def families() -> list[TaskFamily]:
    """The registered families, in registration order."""
    return list(_FAMILIES.values())


def declared_run_defaults(env_id: str) -> dict[str, dict[str, Any]]:
    """Per family that declares run defaults for `env_id`, those defaults."""
    return {f.name: dict(f.run_defaults[env_id]) for f in families() if env_id in f.run_defaults}


def family_run_defaults(env_id: str, task: Any) -> dict[str, Any] | None:
    """The run defaults the family of `task` declares for `env_id`, or None (none declared)."""
    family = _FAMILIES.get(str(task))  # a mixed task plays the env's defaults
    if family is None or env_id not in family.run_defaults:
        return None
    return dict(family.run_defaults[env_id])
