"""Machinery shared by the environments: text spaces, task setup, problem choice, scoring, and
what the agents are shown of the grades (nothing, until they act no more) versus what the trainer
reads (`TaskEnvMixin.turn_results`, every turn's reward and full info)."""

from __future__ import annotations

import dataclasses
import inspect
import random
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

from gymnasium import spaces
from typing_extensions import get_protocol_members, is_protocol

from envs.options import (  # noqa: F401 - re-exported: envs.core was their home
    REVISION_REWARDS,
    TaskOptions,
    check_choice,
    check_count,
    check_revision_reward,
    check_weight,
)
from envs.tasks import MixedTask, Task, make_task
from envs.tasks.sources import Problem, make_problem
from rewards import Verdict, Verifier

# Characters the text spaces sample from: ASCII plus odd unicode (accents, CJK, emoji, zero-width
# joiner, right-to-left mark, combining accent), so random actions exercise unicode handling.
SAMPLE_CHARSET = "".join(chr(c) for c in range(32, 127)) + "\n\téüß中文🙂\u200d\u200f\u0301∑√π≤≥−×÷"
OBS_FIELDS = ("role", "instruction", "question", "transcript", "prompt")
CLIP_MARK = "\n...[clipped]...\n"
# Info keys that tell, or depend on, whether an answer is right: an agent's public info leaves
# them out while the agent has a turn to come (`TaskEnvMixin._show`).
GRADED_INFO_KEYS = frozenset(
    {
        "correct",
        "score",
        "reviewed_correct",
        "final_correct",
        "team_correct",
        "influence_bonus",
        "improvement",
        "fault_real",
    }
)
# Info keys never in a public info: a verifier's reason may name the reference ("wrong answer:
# 20 != 17"). The trainer's record (`turn_results`) keeps them.
PRIVATE_INFO_KEYS = frozenset({"reason"})


def revision_reward(score: float, before: float | None, mode: str, bonus: float) -> float:
    """A revising turn's reward: its `score`, plus ``bonus * (score - before)`` with mode
    "improvement" (`before` is the score of the answer it revised; None: nothing was revised)."""
    if mode == "score" or before is None:
        return score
    return score + bonus * (score - before)


def render_transcript(turns: list[tuple[str, str]]) -> str:
    """The turns as ``[agent]`` headed blocks."""
    return "\n\n".join(f"[{agent}]\n{text}" for agent, text in turns)


def options_signature(
    init: Callable[..., None], options_class: type[TaskOptions]
) -> inspect.Signature:
    """`init`'s signature with the fields of `options_class` in place of its ``**kwargs``: its
    positional parameters, the env's own options, its other keywords (``options``,
    ``task_options``), then the task's (`TaskOptions`), so `inspect.signature` and `help()` show
    every keyword an env takes."""
    kinds = inspect.Parameter
    names = options_class.names()
    params = [
        p
        for p in inspect.signature(init).parameters.values()
        if p.kind is not kinds.VAR_KEYWORD and p.name not in names
    ]
    fields = {f.name: f for f in dataclasses.fields(options_class)}

    def keyword(name: str) -> inspect.Parameter:
        f = fields[name]
        default = f.default
        if default is dataclasses.MISSING and f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        default = kinds.empty if default is dataclasses.MISSING else default
        return kinds(name, kinds.KEYWORD_ONLY, default=default, annotation=f.type)

    positional = [p for p in params if p.kind is not kinds.KEYWORD_ONLY]
    keywords = [
        p.replace(annotation=f"{options_class.__name__} | None") if p.name == "options" else p
        for p in params
        if p.kind is kinds.KEYWORD_ONLY
    ]
    own = [keyword(n) for n in options_class.own_names()]
    task = [keyword(n) for n in TaskOptions.names()]
    return inspect.Signature(positional + own + keywords + task)


def _takes_option_keywords(init: Callable[..., None]) -> bool:
    params = inspect.signature(init).parameters.values()
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


_EnvClass = TypeVar("_EnvClass", bound=type)


def task_signature(cls: _EnvClass) -> _EnvClass:
    """Class decorator: `cls.__init__`'s signature lists its options class's fields in place of
    its ``**kwargs`` (`options_signature`). Every `TaskEnvMixin` subclass whose ``__init__``
    takes ``**kwargs`` gets it without the decorator; kept for envs written before."""
    init: Callable[..., None] = cls.__init__  # type: ignore[misc]
    options_class = getattr(cls, "options_class", TaskOptions)
    init.__signature__ = options_signature(init, options_class)  # type: ignore[attr-defined]
    return cls


def from_options(name: str) -> property:
    """An env attribute read from its checked options (``rounds = from_options("rounds")``):
    the env keeps its settings in one place, `options`, and reads them where they were."""
    return property(lambda env: getattr(env.options, name), doc=f"``options.{name}`` (read-only).")


@runtime_checkable
class TeamEnv(Protocol):
    """What the rollout engine and the trainers use of every env, AEC or Parallel (the env
    protocol of `trainers.rollout.engine`'s docstring): its agents, ``reset(seed=, options=)``
    (a Parallel env's returns ``(observations, infos)``) and ``step`` (an AEC env's takes one
    reply; a Parallel env's a dict agent -> reply, and returns ``(observations, rewards,
    terminations, truncations, infos)``). `AECTeamEnv` adds what an AEC env has besides, and
    `TaskTeamEnv` the members of this package's envs that the engine reads when present. Check
    an env with `missing_members` (or `envs.check_env`, which names what is missing)."""

    possible_agents: list[str]
    agents: list[str]

    def reset(self, seed: int | None = None, options: Mapping[str, Any] | None = None) -> Any: ...

    def step(self, action: Any) -> Any: ...


@runtime_checkable
class AECTeamEnv(TeamEnv, Protocol):
    """A `TeamEnv` taking turns (`pettingzoo.AECEnv`): whose turn it is, what it observes, and,
    after each step, every agent's reward, info, termination and truncation (on the raw env)."""

    agent_selection: str
    rewards: dict[str, float]
    infos: dict[str, dict[str, Any]]
    terminations: dict[str, bool]
    truncations: dict[str, bool]

    def observe(self, agent: str) -> Any: ...


@runtime_checkable
class TaskTeamEnv(TeamEnv, Protocol):
    """A `TeamEnv` of this package (`TaskEnvMixin`): its task (whose ``source`` the engine picks
    problems from), the trainer's record of every step (`TaskEnvMixin.turn_results`), whether
    every reward is paid on its own step (branched rollouts need it), and the roles that state
    answers (`envs.roles`). The engine reads each when present; every env here has them all."""

    task: Task
    turn_results: list[dict[str, Any]]
    immediate_rewards: bool
    answer_roles: tuple[str, ...]


@runtime_checkable
class PreparesSteps(Protocol):
    """The optional pre-step hook on an env's class: ``prepare_steps(steps)``, called once per
    class each turn with the ``(env, action)`` pairs about to be stepped (math/tool-v0 runs their
    programs at once); it must not change what the steps do."""

    @classmethod
    def prepare_steps(cls, steps: Sequence[tuple[Any, Any]]) -> None: ...


def protocol_members(protocol: type) -> tuple[str, ...]:
    """The members a protocol class states, its bases' included: attributes and methods, in
    sorted order (`typing_extensions.get_protocol_members`, public from Python 3.13's typing)."""
    if not is_protocol(protocol):
        raise TypeError(f"{protocol!r} is not a typing.Protocol class")
    return tuple(sorted(get_protocol_members(protocol)))


def missing_members(env: Any, protocol: type) -> list[str]:
    """The members of `protocol` that `env` lacks (an AEC env's per-step dicts exist after
    `reset`); empty when it meets it."""
    return [name for name in protocol_members(protocol) if not hasattr(env, name)]


class AnyText(spaces.Text):
    """A `gymnasium.spaces.Text` that contains every string of an allowed length.

    Gymnasium's `Text` only contains strings over its charset; model output can hold any
    character, so membership here checks type and length only. Sampling uses `SAMPLE_CHARSET`.
    """

    def __init__(self, max_length: int, seed: int | None = None) -> None:
        super().__init__(max_length=max_length, min_length=0, charset=SAMPLE_CHARSET, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and len(x) <= self.max_length

    def __repr__(self) -> str:
        return f"AnyText(max_length={self.max_length})"


def clip(text: str, limit: int) -> str:
    """Shorten `text` to at most `limit` characters, keeping its head and its tail."""
    if len(text) <= limit:
        return text
    keep = max(limit - len(CLIP_MARK), 0)
    head = keep // 4  # the answer sits at the end of a response: keep more of the tail
    return text[:head] + CLIP_MARK[: limit - keep] + text[len(text) - (keep - head) :]


class TaskEnvMixin:
    """Task loading, problem choice, action checking and scoring for the math environments.

    Subclasses name their options' class (`options_class`, a `TaskOptions` of `envs.options`)
    and call `_setup_options(options, task_options, kwargs)` in an ``__init__(self, *,
    options=None, task_options=None, **kwargs)`` (whose signature then lists the options'
    fields: `options_signature`), `_start_episode(seed, options)` in `reset`,
    `_begin_step(action)` (AEC) or `_begin_parallel_step(actions)` (Parallel) first in `step` and
    `_score(text)` in it, and end each step with `_show(acting, rewards, graded, to_come)`.

    No peeking: an env grades every turn when it is taken (the step's rewards, each acting
    agent's full info: ``correct``, ``score``, the verifier's ``reason``...), but by default an
    agent is shown nothing of those grades while it has a turn to come. Its rewards are withheld
    and paid, summed, on the step after which it acts no more (for most agents, the last one:
    PettingZoo's rewards at termination), and its public info lacks `GRADED_INFO_KEYS` until
    then and `PRIVATE_INFO_KEYS` always. So nothing `last()` (AEC) or a step's returns
    (Parallel) hand an agent that acts again depends on whether any answer is right, and no
    info carries the reference. Trainers read the grades through `turn_results` (one record per
    step, with every agent's reward for that step and each acting agent's full info), which no
    policy is handed; ``per_step_rewards=True`` instead shows them at once, as the envs did
    before (rewards on the step they are for, full infos): for a trainer's own loop, never for
    a policy's inputs.
    """

    metadata: dict[str, Any]
    # The class of the env's options: its keyword arguments, checked once (`envs.options`).
    options_class: ClassVar[type[TaskOptions]] = TaskOptions
    options: TaskOptions
    task: Task
    verifier: Verifier
    problem: Problem
    # True when every reward an agent earns is paid, in the trainer's record (`turn_results`,
    # or the rewards themselves with ``per_step_rewards``), on the step of the action it is for
    # (no team reward at the end, nothing paid for a later agent's turn), and a copy reset with
    # the same seed and stepped with the same actions replays the episode: the rollout engine
    # can then sample every turn several times from one history (`RolloutEngine.run(branch=True)`).
    immediate_rewards: bool = False
    per_step_rewards: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Give a subclass's ``__init__(..., **kwargs)`` the signature of its options
        (`options_signature`); a subclass that names another `options_class` and has no
        ``__init__`` gets one that hands its keywords on."""
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None:
            if "options_class" not in cls.__dict__:
                return  # its parent's __init__, options and signature

            def init(
                self: Any,
                *,
                options: TaskOptions | None = None,
                task_options: TaskOptions | None = None,
                **kwargs: Any,
            ) -> None:
                parent: Any = super(cls, self)
                parent.__init__(options=options, task_options=task_options, **kwargs)

            init.__qualname__ = f"{cls.__qualname__}.__init__"
            cls.__init__ = init  # type: ignore[misc]
        if _takes_option_keywords(init):
            init.__signature__ = options_signature(init, cls.options_class)

    def _setup_options(
        self,
        options: TaskOptions | None,
        task_options: TaskOptions | None,
        overrides: Mapping[str, Any],
    ) -> None:
        """Set `options` from an env's arguments and build its task from them.

        Args:
            options (`TaskOptions | None`): all the env's options, an `options_class`.
            task_options (`TaskOptions | None`): the task's options (a `TaskOptions`; an
                `options_class` gives all its fields).
            overrides (`Mapping`): keyword arguments, over the fields of either.

        Raises:
            TypeError: both objects given, one of the wrong class, or an unknown keyword.
            ValueError: an option out of range (the options class's checks).
        """
        cls = self.options_class
        if options is not None:
            if task_options is not None:
                raise TypeError("give options or task_options, not both")
            if not isinstance(options, cls):
                raise TypeError(f"options must be a {cls.__name__} or None, got {options!r}")
        base = options if options is not None else task_options
        self.options = cls.build(type(self).__name__, base, overrides)
        self._setup_task(self.options)

    def _setup_task(self, options: TaskOptions) -> None:
        """Build the task and the text spaces from checked `options`."""
        self.render_mode = options.render_mode
        self.per_step_rewards = options.per_step_rewards
        self.turns: list[tuple[str, str]] = []
        self.turn_results: list[dict[str, Any]] = []
        self._withheld: dict[str, float] = {}
        task_options = dict(options.task_kwargs or {})
        if not isinstance(options.task, Task):
            task_options.update(data_path=options.data_path, split=options.split)
        self.task = make_task(options.task, verifier=options.verifier, **task_options)
        self.verifier = self.task.verifier  # type: ignore[assignment]
        self.max_action_chars = options.max_action_chars
        self.max_obs_chars = options.max_obs_chars
        self._obs_space = spaces.Dict({k: AnyText(self.max_obs_chars) for k in OBS_FIELDS})
        self._act_space = AnyText(self.max_action_chars)
        self._rng = random.Random()
        self.problem = self.task.source[0]

    def observation_space(self, agent: str) -> spaces.Space:
        return self._obs_space

    def action_space(self, agent: str) -> spaces.Space:
        return self._act_space

    def _start_episode(self, seed: int | None, options: Mapping[str, Any] | None) -> None:
        """Pick the episode's problem: `options["problem"]`, `options["problem_id"]` or the seed."""
        if seed is not None:
            self._rng = random.Random(seed)
        self.turn_results = []
        self._withheld = {}
        # Other keys are ignored, as Gymnasium and PettingZoo envs do (PZ's api test passes some).
        options = dict(options or {})
        if "problem" in options:
            p = options["problem"]
            if not isinstance(p, Mapping):
                raise TypeError(f"options['problem'] must be a mapping, got {type(p).__name__}")
            self.problem = make_problem(
                p.get("id"), p.get("question"), p.get("answer"), p.get("metadata")
            )
        elif "problem_id" in options:
            self.problem = self.task.source.get(options["problem_id"])
        else:
            self.problem = self.task.source[self._rng.randrange(len(self.task.source))]
        if isinstance(self.task, MixedTask):
            try:
                member = self.task.member_of(self.problem)
            except KeyError:
                if "problem" not in options:
                    raise
                member = self.task.members[0]  # a caller's own problem: the first member's rules
            self._use_member(member)

    @property
    def played(self) -> Task:
        """The task this episode plays: a mixed task's member (`_use_member`), or the task."""
        return getattr(self, "_member", None) or self.task

    def _use_member(self, member: Task) -> None:
        """Play the episode as `member` of a mixed task: its verifier, its instructions."""
        if member is getattr(self, "_member", None):
            return
        self._member = member
        self.verifier = member.verifier  # type: ignore[assignment]
        self._set_instructions(member)

    def _set_instructions(self, task: Task) -> None:
        """Set the agents' instructions from `task` (each env: the roles it shows them to).
        An env that does not define it cannot play a mixed task."""
        raise TypeError(
            f"{type(self).__name__} cannot play a mixed task ({self.task.name}): it does not "
            "define _set_instructions(task)"
        )

    def _check_action(self, agent: str, action: Any) -> tuple[str, bool]:
        """Return the action clipped to the action space, and whether it was clipped."""
        if not isinstance(action, str):
            raise TypeError(
                f"action of {agent!r} must be a str (the agent's reply), got {type(action).__name__}"
            )
        clipped = clip(action, self.max_action_chars)
        return clipped, len(clipped) != len(action)

    def _begin_step(self, action: Any) -> tuple[str, str, bool] | None:
        """The checks every AEC `step` starts with. A step of an agent that is done is
        PettingZoo's dead step (None: nothing else to do); a step after the episode raises; else
        the acting agent, its action clipped (`_check_action`) and whether it was, with the
        step's rewards cleared (PettingZoo's `_clear_rewards`, the agent's return restarted).
        """
        agent = self.agent_selection  # type: ignore[attr-defined]
        if self.terminations.get(agent) or self.truncations.get(agent):  # type: ignore[attr-defined]
            self._was_dead_step(action)  # type: ignore[attr-defined]
            return None
        if not self.agents:  # type: ignore[attr-defined]
            raise RuntimeError("the episode is over: call reset() before step()")
        text, clipped = self._check_action(agent, action)
        self._cumulative_rewards[agent] = 0.0  # type: ignore[attr-defined]
        self._clear_rewards()  # type: ignore[attr-defined]
        return agent, text, clipped

    def _begin_parallel_step(self, actions: Any) -> tuple[dict[str, str], dict[str, bool]]:
        """The checks every Parallel `step` starts with: the episode is live, `actions` maps
        every live agent, and no other, to a str. Returns each agent's action clipped and whether
        it was; every action is checked before any state changes."""
        live = self.agents  # type: ignore[attr-defined]
        if not live:
            raise RuntimeError("the episode is over: call reset() before step()")
        if not isinstance(actions, Mapping):
            raise TypeError(f"actions must be a dict agent -> str, got {type(actions).__name__}")
        missing, extra = set(live) - set(actions), set(actions) - set(live)
        if missing or extra:
            raise ValueError(
                f"every live agent acts each round: missing actions for {sorted(missing)}, "
                f"actions for agents not in play {sorted(extra)}; live agents are {live}"
            )
        texts, clipped = {}, {}
        for agent in live:
            texts[agent], clipped[agent] = self._check_action(agent, actions[agent])
        return texts, clipped

    def _score(self, text: str) -> Verdict:
        """The verifier's verdict on `text` against the current problem's reference."""
        return self.verifier.verify(text, self.problem["answer"])

    def _base_info(self, turn: int) -> dict[str, Any]:
        return {"problem_id": self.problem["id"], "turn": turn}

    def _answer_info(
        self, turn: int, verdict: Verdict, clipped: bool, **extra: Any
    ) -> dict[str, Any]:
        return {
            **self._base_info(turn),
            "extracted": verdict.extracted,
            "correct": verdict.correct,
            "score": verdict.score,
            "reason": verdict.reason,
            "parse_error": verdict.extracted is None,
            "action_clipped": clipped,
            **extra,
        }

    def _review_info(
        self, turn: int, verdict: bool | None, truth: bool, clipped: bool, **extra: Any
    ) -> dict[str, Any]:
        """Info of a reviewing turn (critic, verifier): its verdict graded against `truth`."""
        hit = verdict is not None and verdict == truth
        if verdict is None:
            reason = "no 'Verdict: correct|incorrect' line"
        else:
            reason = f"verdict {'matches' if hit else 'contradicts'} the answer's truth"
        return {
            **self._base_info(turn),
            **extra,
            "extracted": None if verdict is None else ("correct" if verdict else "incorrect"),
            "verdict": verdict,
            "reviewed_correct": truth,
            "correct": hit,
            "score": float(hit),
            "parse_error": verdict is None,
            "reason": reason,
            "action_clipped": clipped,
        }

    def _show(
        self,
        acting: Sequence[str],
        rewards: Mapping[str, float],
        graded: Mapping[str, dict[str, Any]],
        to_come: Collection[str],
    ) -> tuple[dict[str, float], dict[str, dict[str, Any]]]:
        """Record a step's grades for the trainer; return the rewards and infos agents are shown.

        Args:
            acting: the agents that acted on this step.
            rewards: every agent's reward for this step, as graded (the trainer's reward).
            graded: each agent's full info, as graded (at least the acting agents').
            to_come: the agents that still have a turn to take in this episode.

        Returns:
            With ``per_step_rewards``, `rewards` and `graded` themselves. Otherwise each agent's
            reward is withheld while it has a turn to come and paid, summed with its earlier
            ones, on the step after which it has none; its info is `graded`'s without
            `PRIVATE_INFO_KEYS` and, while it has a turn to come, without `GRADED_INFO_KEYS`.
        """
        self.turn_results.append(
            {
                "turn": len(self.turn_results),
                "agents": list(acting),
                "rewards": dict(rewards),
                "infos": {a: dict(graded[a]) for a in acting},
            }
        )
        if self.per_step_rewards:
            return dict(rewards), dict(graded)  # type: ignore[arg-type]
        shown_rewards = {}
        for agent, reward in rewards.items():
            self._withheld[agent] = self._withheld.get(agent, 0.0) + float(reward)
            shown_rewards[agent] = 0.0 if agent in to_come else self._withheld.pop(agent)
        shown_infos = {}
        for agent, info in graded.items():
            hidden = PRIVATE_INFO_KEYS | (GRADED_INFO_KEYS if agent in to_come else frozenset())
            shown_infos[agent] = {k: v for k, v in info.items() if k not in hidden}
        return shown_rewards, shown_infos

    def render(self) -> str | None:
        """The transcript so far (render mode "ansi"), or None without a render mode."""
        return None if self.render_mode is None else render_transcript(self.turns)

    def close(self) -> None:
        """Nothing to release: the envs hold no files, processes or windows."""

    def _obs(self, role: str, instruction: str, prompt: str, transcript: str) -> dict[str, str]:
        limit = self.max_obs_chars
        return {
            "role": role,
            "instruction": clip(instruction, limit),
            "question": clip(self.problem["question"], limit),
            "transcript": clip(transcript, limit),
            "prompt": clip(prompt, limit),
        }
