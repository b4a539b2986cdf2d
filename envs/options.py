"""Every env's options as one frozen dataclass, checked once, and the static facts they imply.

`TaskOptions` holds what every env takes for its task and its text bounds; `SolveOptions`,
`ReflectionOptions`, `DebateOptions`, `EnsembleOptions`, `ToolOptions` and `CodeOptions` add
each env's own arguments, with the names and defaults of the env's keyword arguments, and raise
the errors the env raises for a bad one (the env checks nothing itself). Each field's
``metadata["help"]`` is one line, for a command line derived from the class.

``options.facts()`` states what an env made with these options will be, with no env built
(`EnvFacts`): its agents, roles, answering and reviewing roles, and which agents act at each step
of an episode that runs to its end.

This module imports no env module, no PettingZoo and no Gymnasium: a registry or a command line
reads it without building an env. `envs.core` re-exports `TaskOptions` and the ``check_*``
helpers, their old home; the value checks live in `envs.option_checks`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from envs.option_checks import (
    _normalise,
    _one_each,
    _option,
    check_choice,
    check_count,
    check_weight,
)
from envs.option_hints import unexpected
from envs.sandbox.config import SandboxConfig

if TYPE_CHECKING:
    from envs.tasks import Task
    from rewards import Verifier

# How a revising turn (reflection's refiner, a debater after round 0, the tool env's executor
# after round 0) is paid: "score", its answer's own score; "improvement", that score plus
# `improvement_bonus` times the change it made against the answer it revised (SCoRe's shaped
# second-attempt reward): with the bonus at 1, a fix earns 2, a kept right answer 1, a kept wrong
# one 0 and a break -1, so breaking a right answer costs more than failing to fix a wrong one.
REVISION_REWARDS = ("score", "improvement")
CRITIC_REWARDS = ("verdict", "balanced", "outcome", "counterfactual")  # envs.reflection
REFINER_MODES = ("revise", "resolve", "patch")  # envs.reflection
FEEDBACK_FORMS = ("full", "verdict", "fault", "faults")  # envs.reflection, envs.tasks.faults
PROMPT_STYLES = ("default", "instruct")  # envs.tasks.prompts.ASKS
FAULT_RULES = ("any", "first")  # envs.reflection
VERIFIER_REWARDS = ("verdict", "counterfactual")  # envs.tool


def check_revision_reward(revision_reward: str, improvement_bonus: float) -> float:
    """Validate a revising role's reward settings; returns the bonus as a float."""
    check_choice("revision_reward", revision_reward, REVISION_REWARDS)
    return check_weight("improvement_bonus", improvement_bonus)


@dataclass(frozen=True)
class EnvFacts:
    """What an env is, for given options, before any env is built (`TaskOptions.facts`).

    Args:
        agents (`tuple[str, ...]`): the env's ``possible_agents``, in order.
        roles (`tuple[str, ...]`): the agents' roles in turn order, each once (`envs.roles`).
        answer_roles (`tuple[str, ...]`): the roles whose turns state an answer (the env
            class's ``answer_roles``).
        review_roles (`tuple[str, ...]`): the roles that judge another's answer with a verdict
            (reflection's critic, the tool env's verifier).
        slots (`tuple[tuple[str, ...], ...]`): the agents that act at each step, in order, in
            an episode that runs to its end (no early stop): one agent a step for an AEC env,
            every agent each round for a Parallel one.
        immediate_rewards (`bool`, False): every reward is paid on the step it is for (no team
            reward at the end, nothing paid for a later turn), so a rollout may branch turns.
        alone_with_tool (`str | None`): the single-agent env that plays the team's answers
            alone with the same tool (math/tool-v0: math/code-v0), the baseline evaluation sets
            against the team; None: the env has no tool.
    """

    agents: tuple[str, ...]
    roles: tuple[str, ...]
    answer_roles: tuple[str, ...]
    review_roles: tuple[str, ...]
    slots: tuple[tuple[str, ...], ...]
    immediate_rewards: bool = False
    alone_with_tool: str | None = None

    @property
    def max_turns(self) -> int:
        """The most steps an episode takes: the env's ``max_turns``."""
        return len(self.slots)

    @property
    def turns(self) -> int:
        """The most agent turns an episode records: every agent of every step."""
        return sum(len(step) for step in self.slots)


@dataclass(frozen=True)
class TaskOptions:
    """The arguments every env takes for its task and its text bounds, checked once here.

    Every env accepts these as keyword arguments (``envs.make("math/reflection-v0",
    task="gsm8k", split="test")``), as one ``problems=ProblemSet(...)`` (which problems:
    `envs.tasks.problems`, `problem_kwargs`) or as one ``task_options=TaskOptions(...)``; keyword
    arguments override the set's and the object's fields. Each env's own options class adds its arguments to these.

    Args:
        task (`str | Task`, "arithmetic"): a registered task name or a `Task`.
        data_path (`str | None`): a local JSONL file instead of the task's source.
        split (`str | None`): the task's split ("train", "validation", "test").
        verifier (`str | Verifier | None`): a verifier or its name; None: the task's own.
        task_kwargs (`Mapping | None`): further options of the task (size, difficulty, ...).
        max_action_chars (`int`, 8192), max_obs_chars (`int`, 32768): text bounds, >= 64.
        render_mode (`str | None`): "ansi" makes `render()` return the transcript.
        per_step_rewards (`bool`, False): show each reward on its step and full infos (the
            trainer's view; never a policy's input).

    Raises:
        ValueError, TypeError: an argument out of range or of the wrong type, named.
    """

    task: str | Task = _option(  # noqa: RUF009 - _option makes a field()
        "arithmetic", "a registered task name or a Task"
    )
    data_path: str | None = _option(None, "a local JSONL file instead of the task's source")
    split: str | None = _option(None, "the task's split: train, validation or test")
    verifier: str | Verifier | None = _option(  # noqa: RUF009 - a field()
        None, "a verifier or its name; None: the task's own"
    )
    task_kwargs: Mapping[str, Any] | None = _option(
        None, "further options of the task (size, difficulty, ...)"
    )
    max_action_chars: int = _option(8192, "an action's length bound (longer ones are clipped)")
    max_obs_chars: int = _option(32768, "an observation field's length bound (clipped beyond)")
    render_mode: str | None = _option(None, "'ansi' makes render() return the transcript")
    per_step_rewards: bool = _option(
        False, "pay each reward on its step and show full infos (the trainer's view)"
    )

    def __post_init__(self) -> None:
        if self.render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {self.render_mode!r}")
        if not isinstance(self.per_step_rewards, bool):
            raise TypeError(f"per_step_rewards must be a bool, got {self.per_step_rewards!r}")
        check_count("max_action_chars", self.max_action_chars, 64)
        check_count("max_obs_chars", self.max_obs_chars, 64)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The field names: the keyword arguments an env with these options takes."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def own_names(cls) -> tuple[str, ...]:
        """The field names beyond `TaskOptions`'s: the env's own arguments."""
        return tuple(name for name in cls.names() if name not in TaskOptions.names())

    @classmethod
    def build(
        cls, owner: str, base: TaskOptions | None, overrides: Mapping[str, Any]
    ) -> TaskOptions:
        """`base` with `overrides`, as a `cls`; an unknown name raises as Python does for an
        unexpected keyword argument of `owner`.

        `base` may be None (the defaults), a `cls` (all its fields are kept) or another
        `TaskOptions` (its task fields are kept: an env's ``task_options``).
        """
        if base is not None and not isinstance(base, TaskOptions):
            raise TypeError(f"task_options must be a TaskOptions or None, got {base!r}")
        overrides = problem_kwargs(overrides)
        for name in overrides:
            if name not in cls.names():
                raise TypeError(
                    f"{owner}() got an unexpected keyword argument {name!r}"
                    f"{unexpected(name, cls.names())}"
                )
        if isinstance(base, cls):
            return dataclasses.replace(base, **overrides)
        kept = {} if base is None else {n: getattr(base, n) for n in TaskOptions.names()}
        return cls(**{**kept, **overrides})

    def facts(self) -> EnvFacts:
        """The static facts of the env these options make (`EnvFacts`)."""
        raise NotImplementedError(f"{type(self).__name__} are no env's options")


def problem_kwargs(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """`kwargs` with a ``problems`` (an `envs.tasks.problems.ProblemSet`) given as the task
    keywords that play it (`ProblemSet.env_kwargs`: task, split, data_path, verifier and the
    task's levels and size); the other keywords override the set's, as they override a
    ``task_options``'s fields::

        envs.make("math/reflection-v0", problems=ProblemSet("unknown", split="test", levels=(2,)))
    """
    if "problems" not in kwargs:
        return dict(kwargs)
    from envs.tasks.problems import ProblemSet  # the task layer, only when a set is given

    rest = dict(kwargs)
    problems = rest.pop("problems")
    if not isinstance(problems, ProblemSet):
        raise TypeError(
            f"problems must be an envs.tasks.problems.ProblemSet, got {problems!r}; or pass "
            "task=, split=, data_path=, task_kwargs= as keywords"
        )
    return {**problems.env_kwargs(), **rest}


@dataclass(frozen=True)
class SolveOptions(TaskOptions):
    """The options of ``math/solve-v0`` (`envs.solve`): the task's, nothing more."""

    def facts(self) -> EnvFacts:
        return EnvFacts(("solver_0",), ("solver",), ("solver",), (), (("solver_0",),))


@dataclass(frozen=True)
class ScheduledOptions(TaskOptions):
    """The options of an env whose agents take turns on a fixed schedule: the first role once,
    then the two roles of `CYCLE` in turn for ``rounds`` rounds (`envs.scheduled`); one agent a
    role, ``<role>_0``.

    Args:
        rounds (`int`, 2): rounds K of the cycle; at most 1 + 2K agent turns.
        stop_on_accept (`bool`, False): end the episode when the reviewer says correct.
        team_reward (`bool`, False): one shared reward for the final answer instead of per role.
    """

    ROLES: ClassVar[tuple[str, ...]] = ()  # in possible_agents order
    FIRST: ClassVar[str] = ""  # the role that acts once, first
    CYCLE: ClassVar[tuple[str, str]] = ("", "")  # the roles that take turns each round
    ANSWER_ROLES: ClassVar[tuple[str, ...]] = ()
    REVIEW_ROLES: ClassVar[tuple[str, ...]] = ()

    rounds: int = _option(2, "review/revision rounds K; at most 1 + 2K agent turns")
    stop_on_accept: bool = _option(False, "end the episode when the reviewer says correct")
    team_reward: bool = _option(False, "one shared reward for the final answer instead of per role")

    def __post_init__(self) -> None:
        check_count("rounds", self.rounds, 1)
        super().__post_init__()

    @classmethod
    def agent(cls, role: str) -> str:
        """The one agent of `role`."""
        return f"{role}_0"

    def schedule(self) -> list[str]:
        """The agent of each turn: the first role's, then the cycle's for ``rounds`` rounds."""
        return [self.agent(role) for role in (self.FIRST, *self.CYCLE * self.rounds)]

    def facts(self) -> EnvFacts:
        schedule = self.schedule()
        return EnvFacts(
            agents=tuple(self.agent(role) for role in self.ROLES),
            roles=_one_each([role for role in (self.FIRST, *self.CYCLE)]),
            answer_roles=self.ANSWER_ROLES,
            review_roles=self.REVIEW_ROLES,
            slots=tuple((agent,) for agent in schedule),
        )


@dataclass(frozen=True)
class ReflectionOptions(ScheduledOptions):
    """The options of ``math/reflection-v0`` (`envs.reflection`, whose docstring tells each).

    Args:
        rounds (`int`, 2): critic/refiner rounds K; at most 1 + 2K agent turns.
        stop_on_accept (`bool`, False): end the episode when the critic says correct.
        team_reward (`bool`, False): one shared reward for the final answer instead of per role.
        critic_reward (`str`, "verdict"): "verdict", "balanced", "outcome" or "counterfactual".
        audit (`Sequence[str]`, ()): roles whose turns earn 0 when they state a false equation
            (stored as a tuple).
        revision_reward (`str`, "score"): the refiner's pay: "score" or "improvement".
        improvement_bonus (`float`, 1.0): weight of the change in an "improvement" refiner's pay.
        counterfactual_weight (`float`, 1.0): weight of the change in a counterfactual critic's
            pay.
        refiner_mode (`str`, "revise"): "revise", "resolve" (solve afresh after a rejection) or
            "patch" (the reply's boxed pieces are laid over the latest answer; a task with named
            faults, `envs.tasks.faults`).
        feedback (`str`, "full"): what the refiner is shown of a review: "full", "verdict",
            "fault" (the verdict and the first named fault) or "faults" (every named fault).
        fault_bonus (`float`, 0.0): added to a critic's pay when it rejects a wrong answer and
            names a real fault of it (`fault_rule`: "any" of its faults, or the "first").
        fault_rule (`str`, "any"): which named fault earns `fault_bonus`.
        oracle_critic (`bool`, False): the verifier plays the critic (its verdict and every
            fault), whatever the critic agent writes: the ceiling of a review, for evaluation.
        prompt_style (`str`, "default"): how each user message ends (`envs.tasks.prompts.ASKS`):
            "default" (the texts the embedded model learnt) or "instruct" (each role's answer
            form asked at the end of its message, which a small pretrained instruct model
            follows: a brief solution ending in the task's answer format; a one-word verdict).
    """

    ROLES: ClassVar[tuple[str, ...]] = ("solver", "critic", "refiner")
    FIRST: ClassVar[str] = "solver"
    CYCLE: ClassVar[tuple[str, str]] = ("critic", "refiner")
    ANSWER_ROLES: ClassVar[tuple[str, ...]] = ("solver", "refiner")
    REVIEW_ROLES: ClassVar[tuple[str, ...]] = ("critic",)

    rounds: int = _option(2, "critic/refiner rounds K; at most 1 + 2K agent turns")
    stop_on_accept: bool = _option(False, "end the episode when the critic says correct")
    critic_reward: str = _option(
        "verdict",
        "the critic's pay: verdict, balanced (class-balanced by the trainer), outcome (the "
        "revision's score) or counterfactual (the verdict plus what the revision changed)",
    )
    audit: Sequence[str] = _option(
        (), "roles (solver, critic, refiner) whose turns earn 0 when they state a false equation"
    )
    revision_reward: str = _option(
        "score", "the refiner's pay: score, or improvement (plus the bonus times its change)"
    )
    improvement_bonus: float = _option(
        1.0, "weight of the change in an 'improvement' refiner's pay"
    )
    counterfactual_weight: float = _option(
        1.0, "weight of the change in a counterfactual critic's pay"
    )
    refiner_mode: str = _option(
        "revise",
        "revise (the refiner applies the feedback), resolve (solves afresh after a rejection) "
        "or patch (its boxed pieces are laid over the latest answer; tasks with named faults)",
    )
    feedback: str = _option(
        "full",
        "what the refiner sees of a review: full (as written), verdict, fault (the verdict and "
        "the first named fault) or faults (every named fault); tasks with named faults",
    )
    fault_bonus: float = _option(
        0.0, "added to a critic's pay for rejecting a wrong answer and naming a real fault"
    )
    fault_rule: str = _option("any", "the named fault that earns fault_bonus: any or first")
    oracle_critic: bool = _option(
        False, "the verifier plays the critic (verdict and every fault): a ceiling, for evaluation"
    )
    prompt_style: str = _option(
        "default",
        "how each user message ends: default (the embedded model's texts) or instruct (each "
        "role's answer form asked last, for pretrained instruct models)",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("critic_reward", self.critic_reward, CRITIC_REWARDS)
        bonus = check_revision_reward(self.revision_reward, self.improvement_bonus)
        _normalise(self, "improvement_bonus", bonus)
        weight = check_weight("counterfactual_weight", self.counterfactual_weight)
        _normalise(self, "counterfactual_weight", weight)
        check_choice("refiner_mode", self.refiner_mode, REFINER_MODES)
        check_choice("feedback", self.feedback, FEEDBACK_FORMS)
        check_choice("fault_rule", self.fault_rule, FAULT_RULES)
        check_choice("prompt_style", self.prompt_style, PROMPT_STYLES)
        _normalise(self, "fault_bonus", check_weight("fault_bonus", self.fault_bonus))
        if not isinstance(self.oracle_critic, bool):
            raise TypeError(f"oracle_critic must be a bool, got {self.oracle_critic!r}")
        audit, roles = self.audit, self.ROLES
        if isinstance(audit, str) or any(role not in roles for role in audit):
            raise ValueError(f"audit must be a sequence of roles from {roles}, got {audit!r}")
        _normalise(self, "audit", tuple(audit))

    def facts(self) -> EnvFacts:
        """Each turn is paid on its own step, but with a team reward, or a critic paid (in
        part) by the revision that follows it."""
        own = not self.team_reward and self.critic_reward not in ("outcome", "counterfactual")
        return dataclasses.replace(super().facts(), immediate_rewards=own)


def _check_instructions(instructions: Sequence[str] | None) -> tuple[str, ...] | None:
    """Instruction templates as a tuple (None stays None), or a TypeError."""
    if instructions is None:
        return None
    templates = tuple(instructions)
    if not all(t is None or isinstance(t, str) for t in templates):
        raise TypeError("instructions must be a sequence of str")
    return templates


@dataclass(frozen=True)
class DebateOptions(TaskOptions):
    """The options of ``math/debate-v0`` (`envs.debate`, whose docstring tells each).

    Args:
        num_agents (`int`, 3): the debaters N.
        rounds (`int`, 2): the rounds; every debater answers in each.
        influence_discount (`float`, 0.0): g in [0, 1], the weight of the teammates' later
            correctness an agent is credited with.
        instructions (`Sequence[str] | None`): instruction templates, cycled over the agents
            (stored as a tuple); ``{answer_format}`` is filled.
        revision_reward (`str`, "score"), improvement_bonus (`float`, 1.0): the revising
            rounds' pay: the score, or "improvement" (plus the bonus times the change).
    """

    AGENT_PREFIX: ClassVar[str] = "debater"
    ANSWER_ROLES: ClassVar[tuple[str, ...]] = ("debater",)

    num_agents: int = _option(3, "the debaters N")
    rounds: int = _option(2, "the rounds; every debater answers in each")
    influence_discount: float = _option(
        0.0, "g in [0, 1]: the weight of the teammates' later correctness an agent is credited"
    )
    instructions: Sequence[str] | None = _option(
        None, "instruction templates, cycled over the agents; {answer_format} is filled"
    )
    revision_reward: str = _option(
        "score", "a revising round's pay: score, or improvement (plus the bonus times the change)"
    )
    improvement_bonus: float = _option(
        1.0, "weight of the change in an 'improvement' revision's pay"
    )

    def __post_init__(self) -> None:
        check_count("num_agents", self.num_agents, 1)
        check_count("rounds", self.rounds, 1)
        discount = self.influence_discount
        if not (isinstance(discount, (int, float)) and 0.0 <= discount <= 1.0):
            raise ValueError(f"influence_discount must be in [0, 1], got {discount!r}")
        _normalise(self, "influence_discount", float(discount))
        super().__post_init__()
        bonus = check_revision_reward(self.revision_reward, self.improvement_bonus)
        _normalise(self, "improvement_bonus", bonus)
        _normalise(self, "instructions", _check_instructions(self.instructions))

    def agents(self) -> tuple[str, ...]:
        """``<prefix>_0`` ... ``<prefix>_{N-1}``: the env's ``possible_agents``."""
        return tuple(f"{self.AGENT_PREFIX}_{i}" for i in range(self.num_agents))

    def facts(self) -> EnvFacts:
        agents = self.agents()
        roles = (self.AGENT_PREFIX,)
        slots = (agents,) * self.rounds
        # each round pays its own answers (the influence bonus included)
        return EnvFacts(agents, roles, self.ANSWER_ROLES, (), slots, immediate_rewards=True)


@dataclass(frozen=True)
class EnsembleOptions(TaskOptions):
    """The options of ``math/ensemble-v0`` (`envs.ensemble`): a one-round debate whose agents
    differ by instruction, so its debate settings are fixed (class attributes, not arguments).

    Args:
        num_agents (`int`, 3): the agents K.
        instructions (`Sequence[str] | None`): instruction templates (stored as a tuple);
            ``{answer_format}`` is filled; None: `envs.tasks.prompts.VARIANTS`.
    """

    AGENT_PREFIX: ClassVar[str] = "variant"
    ANSWER_ROLES: ClassVar[tuple[str, ...]] = ("variant",)
    # The debate an ensemble is: one round, paid each answer's score.
    rounds: ClassVar[int] = 1
    influence_discount: ClassVar[float] = 0.0
    revision_reward: ClassVar[str] = "score"
    improvement_bonus: ClassVar[float] = 1.0

    num_agents: int = _option(3, "the agents K, one instruction variant each")
    instructions: Sequence[str] | None = _option(
        None, "instruction templates, cycled over the agents; None: the built-in variants"
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_count("num_agents", self.num_agents, 1)
        _normalise(self, "instructions", _check_instructions(self.instructions))

    def agents(self) -> tuple[str, ...]:
        """``variant_0`` ... ``variant_{K-1}``: the env's ``possible_agents``."""
        return tuple(f"{self.AGENT_PREFIX}_{i}" for i in range(self.num_agents))

    def facts(self) -> EnvFacts:
        agents = self.agents()
        roles = (self.AGENT_PREFIX,)
        return EnvFacts(agents, roles, self.ANSWER_ROLES, (), (agents,), immediate_rewards=True)


def sandbox_config(sandbox: SandboxConfig | Mapping[str, Any] | None) -> SandboxConfig | None:
    """`sandbox` as a `SandboxConfig` (a mapping gives its fields); None stays None."""
    if sandbox is None or isinstance(sandbox, SandboxConfig):
        return sandbox
    if isinstance(sandbox, Mapping):
        return SandboxConfig(**dict(sandbox))
    raise TypeError(
        f"sandbox must be a SandboxConfig, a mapping of its fields or None, "
        f"got {type(sandbox).__name__}"
    )


@dataclass(frozen=True)
class ToolOptions(ScheduledOptions):
    """The options of ``math/tool-v0`` (`envs.tool`, whose docstring tells each).

    Args:
        rounds (`int`, 2): executor/verifier rounds K; at most 1 + 2K agent turns.
        stop_on_accept (`bool`, False): end the episode when the verifier says correct.
        team_reward (`bool`, False): one shared reward for the final answer instead of per role.
        revision_reward (`str`, "score"), improvement_bonus (`float`, 1.0): the executor's pay
            after round 0: its score, or "improvement".
        verifier_reward (`str`, "verdict"): "verdict" or "counterfactual".
        counterfactual_weight (`float`, 1.0): weight of the change in a counterfactual
            verifier's pay.
        sandbox (`SandboxConfig | Mapping | None`): limits of each run (a mapping of its fields
            is stored as a `SandboxConfig`); None: the env's default (`envs.tool`).
        cache_size (`int`, 128): identical programs reuse their result; 0 runs every program.
        max_output_chars (`int`, 2000): program output shown to the agents, >= 64.
    """

    ROLES: ClassVar[tuple[str, ...]] = ("analyzer", "executor", "verifier")
    FIRST: ClassVar[str] = "analyzer"
    CYCLE: ClassVar[tuple[str, str]] = ("executor", "verifier")
    ANSWER_ROLES: ClassVar[tuple[str, ...]] = ("executor",)
    REVIEW_ROLES: ClassVar[tuple[str, ...]] = ("verifier",)

    rounds: int = _option(2, "executor/verifier rounds K; at most 1 + 2K agent turns")
    stop_on_accept: bool = _option(False, "end the episode when the verifier says correct")
    revision_reward: str = _option(
        "score", "the executor's pay after round 0: score, or improvement (plus bonus x change)"
    )
    improvement_bonus: float = _option(
        1.0, "weight of the change in an 'improvement' executor's pay"
    )
    verifier_reward: str = _option(
        "verdict",
        "the verifier's pay: verdict, or counterfactual (plus what the next program changed)",
    )
    counterfactual_weight: float = _option(
        1.0, "weight of the change in a counterfactual verifier's pay"
    )
    sandbox: SandboxConfig | Mapping[str, Any] | None = _option(  # noqa: RUF009 - a field()
        None, "limits of each run; default: 5 s wall, 5 s CPU, 512 MiB, 16 KiB of output"
    )
    cache_size: int = _option(128, "identical programs reuse their result; 0 runs every program")
    max_output_chars: int = _option(2000, "program output shown to the agents")

    def __post_init__(self) -> None:
        check_count("rounds", self.rounds, 1)
        check_count("cache_size", self.cache_size, 0)
        check_count("max_output_chars", self.max_output_chars, 64)
        super().__post_init__()
        _normalise(self, "sandbox", sandbox_config(self.sandbox))
        bonus = check_revision_reward(self.revision_reward, self.improvement_bonus)
        _normalise(self, "improvement_bonus", bonus)
        check_choice("verifier_reward", self.verifier_reward, VERIFIER_REWARDS)
        weight = check_weight("counterfactual_weight", self.counterfactual_weight)
        _normalise(self, "counterfactual_weight", weight)

    def facts(self) -> EnvFacts:
        """The team's answers are also played alone with the same tool: math/code-v0."""
        return dataclasses.replace(super().facts(), alone_with_tool="math/code-v0")


@dataclass(frozen=True)
class CodeOptions(TaskOptions):
    """The options of ``math/code-v0`` (`envs.code`): one executor alone, its program run in
    the sandbox of ``math/tool-v0`` with the same limits.

    Args:
        sandbox (`SandboxConfig | Mapping | None`): limits of the run (a mapping of its fields
            is stored as a `SandboxConfig`); None: the tool env's default (`envs.tool`).
        cache_size (`int`, 128): identical programs reuse their result; 0 runs every program.
        max_output_chars (`int`, 2000): program output kept in the transcript, >= 64.
    """

    ANSWER_ROLES: ClassVar[tuple[str, ...]] = ("executor",)

    sandbox: SandboxConfig | Mapping[str, Any] | None = _option(  # noqa: RUF009 - a field()
        None, "limits of each run; default: 5 s wall, 5 s CPU, 512 MiB, 16 KiB of output"
    )
    cache_size: int = _option(128, "identical programs reuse their result; 0 runs every program")
    max_output_chars: int = _option(2000, "program output kept in the transcript")

    def __post_init__(self) -> None:
        check_count("cache_size", self.cache_size, 0)
        check_count("max_output_chars", self.max_output_chars, 64)
        super().__post_init__()
        _normalise(self, "sandbox", sandbox_config(self.sandbox))

    def facts(self) -> EnvFacts:
        return EnvFacts(("executor_0",), ("executor",), self.ANSWER_ROLES, (), (("executor_0",),))
