"""Tasks: a problem source, a verifier and prompt settings, registered by name.

Built-in: ``arithmetic`` (procedural, offline; the envs' default), ``unknown`` (procedural,
offline: find the start; checking costs as much as solving; the training scripts' default),
``reach`` (procedural, offline: put operators between numbers to reach a target; checking is much
cheaper than solving), the task families (each declared in its own folder and registered in one
line, `register_family`: `envs.tasks.family`; `families()` lists them), ``gsm8k``, ``math`` and
``anli`` (hub id through `datasets`, or ``data_path=`` a local JSONL file).

Register your own::

    from envs import register_task, Task, ListSource, make_problem
    register_task("capitals", lambda **kw: Task(
        "capitals", ListSource([make_problem("c/0", "Capital of France?", "Paris")]),
        verifier="label", answer_format="give the answer as \\\\boxed{city}."))

A generated one (``generate(index, *, difficulty, seed) -> Problem``) declares its levels, and
gets hash splits, the overlap guard, default levels and the command line with them::

    from envs import Levels, register_generated
    register_generated("parity", make_parity, Levels((1, 2, 3), default=(1, 2)))

A family (its generator, levels, verifier, prompts, faults, run defaults, the embedded recipe's
scripted replies and its probe: `TaskFamily`) is one folder and one line::

    from envs.tasks import register_family
    register_family(my_family.FAMILY)
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from envs.errors import DuplicateTaskError, UnknownTaskError
from envs.tasks import coloring, prompts, reach, unknown
from envs.tasks.arithmetic import ArithmeticSource, GeneratedSource
from envs.tasks.family import BOXED, Levels, TaskFamily, add_family, remove_family
from envs.tasks.family import EmbeddedPart as EmbeddedPart
from envs.tasks.family import FamilyProbe as FamilyProbe
from envs.tasks.family import families as families
from envs.tasks.family import family_run_defaults as family_run_defaults
from envs.tasks.family import get_family as get_family
from envs.tasks.mixed import MixedSource, check_members, is_mixed, member_kwargs, member_names
from envs.tasks.sources import Problem, ProblemSource, load_hub, load_jsonl, require
from rewards import Verifier, deregister_verifier, get_verifier, register_verifier
from rewards.extract import last_boxed


def is_procedural(task: Any) -> bool:
    """Whether `task` (a name, or a mixed task's ``a+b`` name) is generated: every member of
    it registered with `Levels`. A generated task takes `difficulty`, `size`, `seed` and
    `repeat`; a problem's split is a hash of its text (`envs.tasks.splits`), so its "validation" and
    "test" splits are held out."""
    return all(name in _LEVELS for name in member_names(task))


def procedural_tasks() -> list[str]:
    """The registered generated tasks (those with `Levels`)."""
    return sorted(_LEVELS)


def task_levels(task: str) -> Levels:
    """The `Levels` `task` was registered with; a task that is not generated raises, naming the
    generated ones."""
    if task not in _LEVELS:
        raise ValueError(
            f"task {task!r} has no levels: it is not generated (generated: "
            f"{', '.join(procedural_tasks())})"
        )
    return _LEVELS[task]


def default_levels(task: str) -> list[int]:
    """The levels a run of the generated `task` plays when none are given (`Levels.default`)."""
    return list(task_levels(task).default)


@dataclass
class Task:
    """A problem source with its verifier and prompt settings.

    Args:
        name (`str`): registry name.
        source (`ProblemSource`): the problems.
        verifier (`str | Verifier`, defaults to "math"): a verifier or its registry name.
        answer_format (`str`): how answering roles must state the answer; filled into the
            role instructions.
        instructions (`Mapping[str, str]`): per-role overrides of `prompts.DEFAULT_INSTRUCTIONS`.
        faults (`envs.tasks.faults.FaultModel | None`): the task's named faults (a critic names what
            is wrong, a refiner patches it, the verifier can play the critic); None: a review
            is a verdict alone.
        review_first (`bool`, False): a review's prompt shows the answer before the problem,
            so each piece of the problem is checked where it stands (graph colouring: the
            colouring, then the edges to check against it).
    """

    name: str
    source: ProblemSource
    verifier: str | Verifier = "math"
    answer_format: str = BOXED
    instructions: Mapping[str, str] = field(default_factory=dict)
    faults: Any = None
    review_first: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.source, ProblemSource):
            raise TypeError(
                f"Task {self.name!r}: source must be a ProblemSource (e.g. ListSource([...])), "
                f"got {type(self.source).__name__}"
            )
        if isinstance(self.verifier, str):
            self.verifier = get_verifier(self.verifier)
        if not isinstance(self.verifier, Verifier):
            raise TypeError(
                f"Task {self.name!r}: verifier must be a name or have verify(response, reference), "
                f"got {type(self.verifier).__name__}"
            )
        unknown = set(self.instructions) - set(prompts.DEFAULT_INSTRUCTIONS)
        if unknown:
            raise ValueError(
                f"Task {self.name!r}: unknown roles {sorted(unknown)} in instructions; "
                f"expected some of {sorted(prompts.DEFAULT_INSTRUCTIONS)}"
            )

    def instruction(self, role: str, template: str | None = None) -> str:
        """The system instruction for `role`, with the task's answer format filled in."""
        text = template or self.instructions.get(role) or prompts.DEFAULT_INSTRUCTIONS[role]
        return text.replace("{answer_format}", self.answer_format)


class MixedTask(Task):
    """Several tasks played as one (`envs.tasks.mixed`): its source interleaves the members'
    problems, and `member_of` gives the member (with its own verifier, answer format and
    instructions) a problem belongs to. As a plain `Task` it reads as its first member."""

    def __init__(self, members: Sequence[Task]) -> None:
        self.members = list(members)
        first = self.members[0]
        names = [m.name for m in self.members]
        source = MixedSource([m.source for m in self.members], names)
        super().__init__(
            source.name, source, first.verifier, first.answer_format, first.instructions
        )

    def member_of(self, problem: Mapping[str, Any] | str) -> Task:
        """The member task of `problem` (a problem or its id)."""
        pid = problem if isinstance(problem, str) else problem["id"]
        return self.members[self.source.member_index(pid)]  # type: ignore[attr-defined]


def mixed_task(names: Sequence[str], **kwargs: Any) -> MixedTask:
    """Build the members of a mixed task (`envs.tasks.mixed`) with their share of `kwargs`."""
    check_members(names, kwargs)
    members = []
    for name in names:
        if name not in _TASKS:
            make_task(name)  # raises UnknownTaskError with the registered names
        factory = _TASKS[name]
        members.append(factory(**member_kwargs(name, factory, kwargs)))
    return MixedTask(members)


TaskFactory = Callable[..., Task]
_TASKS: dict[str, TaskFactory] = {}
_LEVELS: dict[str, Levels] = {}


def register_task(
    name: str,
    factory: TaskFactory,
    *,
    levels: Levels | Sequence[int] | None = None,
    override: bool = False,
) -> None:
    """Register `factory(**kwargs) -> Task` under `name`; a taken name raises unless `override`.

    `levels` declares a generated task (its factory takes `split`, `size`, `difficulty`, `seed`
    and `repeat`, as `generated_task`'s do): its levels and the default ones (a sequence: all of
    them, each the default). Runs and evaluations then default to them, split it by hash, guard
    its overlap and list it on the command line with no other edit."""
    if not isinstance(name, str) or not name or "+" in name:
        raise ValueError(f"task name must be a non-empty str without '+', got {name!r}")
    if name in _TASKS and not override:
        raise DuplicateTaskError(f"task {name!r} is already registered; pass override=True")
    if levels is not None and not isinstance(levels, Levels):
        levels = Levels(tuple(levels))
    _TASKS[name] = factory
    _LEVELS.pop(name, None)
    if levels is not None:
        _LEVELS[name] = levels


def generated_task(
    name: str,
    generate: Callable[..., Problem],
    levels: Levels,
    verifier: str | Verifier = "math",
    answer_format: str = BOXED,
    instructions: Mapping[str, str] | None = None,
    default_difficulty: int | Sequence[int] | None = None,
    **task_fields: Any,
) -> TaskFactory:
    """The factory of a generated task: ``generate(index, *, difficulty, seed) -> Problem`` (a
    pure function; `GeneratedSource` gives each problem its id and hash split), at `levels`; a
    call without `difficulty` plays `default_difficulty` (default: ``levels.default``).

    `register_generated` registers one in one line.
    """
    unset = list(levels.default) if default_difficulty is None else default_difficulty

    def factory(
        split: str = "train",
        size: int | None = None,
        difficulty: int | Sequence[int] | None = None,
        seed: int = 0,
        verifier: str | Verifier = verifier,
        repeat: bool = False,
    ) -> Task:
        source = GeneratedSource(
            generate,
            name,
            size,
            unset if difficulty is None else difficulty,
            split,
            seed,
            max_difficulty=max(levels.all),
            repeat=repeat,
        )
        return Task(
            name,
            source,
            verifier,
            answer_format=answer_format,
            instructions=dict(instructions or {}),
            **task_fields,
        )

    return factory


def register_generated(
    name: str,
    generate: Callable[..., Problem],
    levels: Levels | Sequence[int],
    *,
    override: bool = False,
    **task_fields: Any,
) -> None:
    """Register the generated task `name` (`generated_task`: `generate` at `levels`, with the
    `Task` fields `task_fields`: verifier, answer_format, instructions...)."""
    levels = levels if isinstance(levels, Levels) else Levels(tuple(levels))
    factory = generated_task(name, generate, levels, **task_fields)
    register_task(name, factory, levels=levels, override=override)


def register_family(family: TaskFamily, *, override: bool = False) -> None:
    """Register the task family `family` (`envs.tasks.family`), declared in its own folder: its
    verifiers (into `rewards`), its generated task and the family itself, which the env
    registry's run defaults, the embedded recipe and the probes look up by name."""
    if family.name in _TASKS and not override:
        raise DuplicateTaskError(f"task {family.name!r} is already registered; pass override=True")
    for name, factory in family.verifiers.items():
        register_verifier(name, factory, override=override)
    register_generated(
        family.name,
        family.generate,
        family.levels,
        override=override,
        default_difficulty=family.default_difficulty,
        verifier=family.verifier,
        answer_format=family.answer_format,
        instructions=dict(family.instructions),
        faults=family.faults,
        review_first=family.review_first,
    )
    add_family(family, override=override)


def deregister_task(name: str) -> None:
    """Remove the task `name` (its levels, and if it is a family, the family and its verifiers);
    an unknown name raises `UnknownTaskError`."""
    if name not in _TASKS:
        raise UnknownTaskError(f"no task named {name!r}; registered: {', '.join(list_tasks())}")
    del _TASKS[name]
    _LEVELS.pop(name, None)
    family = get_family(name)
    if family is not None and family.name == name:
        remove_family(name)
        for verifier in family.verifiers:
            deregister_verifier(verifier)


def list_tasks() -> list[str]:
    return sorted(_TASKS)


def make_task(task: str | Task, **kwargs: Any) -> Task:
    """Build a registered task (kwargs such as `split`, `data_path`, `verifier` go to its factory).

    Names joined by ``+`` (``"unknown+arithmetic+reach"``) build a `MixedTask` of those tasks
    (`envs.tasks.mixed`).

    A `Task` instance is returned as is, with `verifier` swapped if one is given.
    """
    if isinstance(task, Task):
        verifier = kwargs.pop("verifier", None)
        if kwargs:
            raise TypeError(f"options {sorted(kwargs)} apply to a task name, not a Task object")
        if verifier is None:
            return task
        if isinstance(task, MixedTask):
            return MixedTask([make_task(m, verifier=verifier) for m in task.members])
        return dataclasses.replace(task, verifier=verifier)
    if is_mixed(task):
        return mixed_task(member_names(task), **{k: v for k, v in kwargs.items() if v is not None})
    if task not in _TASKS:
        close = difflib.get_close_matches(str(task), list(_TASKS), n=3)
        hint = f" Did you mean {' or '.join(map(repr, close))}?" if close else ""
        raise UnknownTaskError(
            f"no task named {task!r}.{hint} Registered: {', '.join(list_tasks())}"
        )
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    return _TASKS[task](**kwargs)


# ---------------------------------------------------------------- built-in tasks


def arithmetic_task(
    split: str = "train",
    size: int | None = None,
    difficulty: int | list[int] = 1,
    seed: int = 0,
    verifier: str | Verifier = "math",
    repeat: bool = False,
) -> Task:
    return Task("arithmetic", ArithmeticSource(size, difficulty, split, seed, repeat), verifier)


UNKNOWN_FORMAT = "end with \\boxed{N}."
UNKNOWN_INSTRUCTIONS = {
    "solver": "Find x; {answer_format}",
    "critic": (
        "Check the answer: replay the steps from it and compare the result. End with "
        "'Verdict: correct' or 'Verdict: incorrect'."
    ),
    "refiner": "Keep an accepted answer; repair a rejected one by the check's miss; {answer_format}",
}


REACH_FORMAT = "end with the chain in \\boxed{}, like \\boxed{a + b = c, c * d = e}."
REACH_INSTRUCTIONS = {
    "solver": "Reach the target; {answer_format}",
    "critic": (
        "Check the answer: replay its operators on the numbers and compare the end with the "
        "target. End with 'Verdict: correct' or 'Verdict: incorrect'."
    ),
    "refiner": "Keep an accepted answer; replace a rejected one with another chain; "
    "{answer_format}",
}


def levels_holding(
    task: str, split: str, levels: list[int], size: int, seed: int = 0
) -> tuple[list[int], dict[int, int]]:
    """The levels of a generated task that can serve `size` distinct problems of `split` between
    them (each level an equal share), and the dropped ones with how many problems they hold.

    A small level (``unknown`` level 1 holds 48 test problems) is dropped rather than repeated:
    an evaluation must not count a problem twice. Raises when no level is left.
    """
    source = make_task(task, split=split, size=1, difficulty=levels[:1], seed=seed).source
    if not isinstance(source, GeneratedSource):
        return list(levels), {}
    kept, dropped = list(dict.fromkeys(levels)), {}
    while kept:
        need = -(-size // len(kept))  # ceil
        short = {lv: source.stream(lv).ensure(split, need) for lv in kept}
        short = {lv: held for lv, held in short.items() if held < need}
        if not short:
            return kept, dropped
        dropped.update(short)
        kept = [lv for lv in kept if lv not in short]
    raise ValueError(
        f"{task}: no level of {levels} holds {size} distinct {split} problems "
        f"(they hold {dropped}); ask for fewer problems or higher levels"
    )


def _source(
    data_path: str | None, hub_id: str, config: str | None, split: str, parse_row: Any, name: str
) -> ProblemSource:
    """A local JSONL file when `data_path` is given, else the hub dataset's split."""
    if data_path:
        return load_jsonl(data_path, parse_row, name)
    return load_hub(hub_id, config, split, parse_row, name)


def _gsm8k_row(row: Mapping[str, Any], index: int, where: str) -> Problem:
    solution = str(require(row, "answer"))
    if "####" not in solution:
        raise ValueError(f"field 'answer' has no '#### <final answer>' line: {solution[-80:]!r}")
    final = solution.rsplit("####", 1)[1].strip().replace(",", "")
    return Problem(
        id=f"gsm8k/{index}",
        question=str(require(row, "question")),
        answer=final,
        metadata={"source": "gsm8k", "index": index, "solution": solution},
    )


def gsm8k_task(
    split: str = "test",
    data_path: str | None = None,
    verifier: str | Verifier = "gsm8k",
    hub_id: str = "openai/gsm8k",
) -> Task:
    return Task("gsm8k", _source(data_path, hub_id, "main", split, _gsm8k_row, "gsm8k"), verifier)


def _math_row(row: Mapping[str, Any], index: int, where: str) -> Problem:
    solution = str(row.get("solution") or "")
    answer = row.get("answer")
    if answer is None or not str(answer).strip():
        if not solution:
            raise KeyError("answer")
        answer = last_boxed(solution)
        if answer is None:
            raise ValueError("no 'answer' field and the 'solution' has no \\boxed{} answer")
    metadata = {"source": "math", "index": index, "solution": solution}
    metadata.update({k: row[k] for k in ("level", "type", "subject", "unique_id") if k in row})
    return Problem(
        id=str(row.get("unique_id") or f"math/{index}"),
        question=str(require(row, "problem", "question")),
        answer=str(answer).strip(),
        metadata=metadata,
    )


def math_task(
    split: str = "test",
    data_path: str | None = None,
    verifier: str | Verifier = "math",
    hub_id: str = "HuggingFaceH4/MATH-500",
) -> Task:
    return Task("math", _source(data_path, hub_id, None, split, _math_row, "math"), verifier)


ANLI_LABELS = {
    "e": "entailment",
    "n": "neutral",
    "c": "contradiction",
    0: "entailment",
    1: "neutral",
    2: "contradiction",
}


def _anli_row(row: Mapping[str, Any], index: int, where: str) -> Problem:
    raw = require(row, "label")
    label = ANLI_LABELS.get(raw.strip().lower() if isinstance(raw, str) else raw, raw)
    if label not in ANLI_LABELS.values():
        raise ValueError(f"field 'label' is {raw!r}; expected e/n/c, 0/1/2 or a full label name")
    premise, hypothesis = require(row, "premise", "context"), require(row, "hypothesis")
    return Problem(
        id=str(row.get("uid") or f"anli/{index}"),
        question=f"Premise: {premise}\nHypothesis: {hypothesis}\n"
        "Does the premise entail the hypothesis, contradict it, or neither (neutral)?",
        answer=label,
        metadata={"source": "anli", "index": index, "reason": row.get("reason", "")},
    )


def anli_task(
    split: str = "dev_r1",
    data_path: str | None = None,
    verifier: str | Verifier = "label",
    hub_id: str = "facebook/anli",
) -> Task:
    return Task(
        "anli",
        _source(data_path, hub_id, None, split, _anli_row, "anli"),
        verifier,
        answer_format="give the final label as \\boxed{entailment}, \\boxed{neutral} or "
        "\\boxed{contradiction} at the end.",
    )


# The generated tasks' levels. The defaults are what the embedded model was built on (its
# recipe reads them: `trainers.embedded.EmbeddedRecipe`); ``unknown`` level 4 is held back for a
# harder run.
register_task("arithmetic", arithmetic_task, levels=Levels((1, 2, 3, 4, 5), default=(1, 2, 3)))
# A task made without `difficulty` plays level 1 (`envs.make(..., task="unknown")`), as before
# levels were declared; runs and evaluations play the declared defaults.
# ``unknown``: find the start of a chain of additions and subtractions (`envs.tasks.unknown`).
register_generated(
    "unknown",
    unknown.generate_problem,
    Levels((1, 2, 3, 4), default=(1, 2, 3)),
    default_difficulty=1,
    answer_format=UNKNOWN_FORMAT,
    instructions=UNKNOWN_INSTRUCTIONS,
)
# ``reach``: put +, - or * between numbers to reach a target (`envs.tasks.reach`), scored by the
# ``reach`` verifier (`rewards.reach`: the numbers in order, every step exact, the target reached).
register_generated(
    "reach",
    reach.generate_problem,
    Levels((1, 2, 3, 4)),
    default_difficulty=1,
    verifier="reach",
    answer_format=REACH_FORMAT,
    instructions=REACH_INSTRUCTIONS,
)
# The task families, each declared in its own folder (`envs.tasks.family`).
register_family(coloring.FAMILY)
register_task("gsm8k", gsm8k_task)
register_task("math", math_task)
register_task("anli", anli_task)
