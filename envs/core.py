"""Machinery shared by the environments: text spaces, task setup, problem choice, scoring, and
what the agents are shown of the grades (nothing, until they act no more) versus what the trainer
reads (`TaskEnvMixin.turn_results`, every turn's reward and full info)."""

from __future__ import annotations

import dataclasses
import inspect
import random
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from gymnasium import spaces

from envs.sources import Problem, make_problem
from envs.tasks import Task, make_task
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
    }
)
# Info keys never in a public info: a verifier's reason may name the reference ("wrong answer:
# 20 != 17"). The trainer's record (`turn_results`) keeps them.
PRIVATE_INFO_KEYS = frozenset({"reason"})

# How a revising turn (reflection's refiner, a debater after round 0, the tool env's executor
# after round 0) is paid: "score", its answer's own score; "improvement", that score plus
# `improvement_bonus` times the change it made against the answer it revised (SCoRe's shaped
# second-attempt reward): with the bonus at 1, a fix earns 2, a kept right answer 1, a kept wrong
# one 0 and a break -1, so breaking a right answer costs more than failing to fix a wrong one.
REVISION_REWARDS = ("score", "improvement")


def check_revision_reward(revision_reward: str, improvement_bonus: float) -> float:
    """Validate a revising role's reward settings; returns the bonus as a float."""
    check_choice("revision_reward", revision_reward, REVISION_REWARDS)
    return check_weight("improvement_bonus", improvement_bonus)


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


def revision_reward(score: float, before: float | None, mode: str, bonus: float) -> float:
    """A revising turn's reward: its `score`, plus ``bonus * (score - before)`` with mode
    "improvement" (`before` is the score of the answer it revised; None: nothing was revised)."""
    if mode == "score" or before is None:
        return score
    return score + bonus * (score - before)


def render_transcript(turns: list[tuple[str, str]]) -> str:
    """The turns as ``[agent]`` headed blocks."""
    return "\n\n".join(f"[{agent}]\n{text}" for agent, text in turns)


@dataclass(frozen=True)
class TaskOptions:
    """The arguments every env takes for its task and its text bounds, checked once here.

    Every env accepts these as keyword arguments (``envs.make("math/reflection-v0",
    task="gsm8k", split="test")``) or as one ``task_options=TaskOptions(...)``; keyword arguments
    override the object's fields.

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

    task: str | Task = "arithmetic"
    data_path: str | None = None
    split: str | None = None
    verifier: str | Verifier | None = None
    task_kwargs: Mapping[str, Any] | None = None
    max_action_chars: int = 8192
    max_obs_chars: int = 32768
    render_mode: str | None = None
    per_step_rewards: bool = False

    def __post_init__(self) -> None:
        if self.render_mode not in (None, "ansi"):
            raise ValueError(f"render_mode must be None or 'ansi', got {self.render_mode!r}")
        if not isinstance(self.per_step_rewards, bool):
            raise TypeError(f"per_step_rewards must be a bool, got {self.per_step_rewards!r}")
        check_count("max_action_chars", self.max_action_chars, 64)
        check_count("max_obs_chars", self.max_obs_chars, 64)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The field names: the keyword arguments every env takes for its task."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def build(
        cls, owner: str, base: TaskOptions | None, overrides: Mapping[str, Any]
    ) -> TaskOptions:
        """`base` (or the defaults) with `overrides`; an unknown name raises as Python does for
        an unexpected keyword argument of `owner`."""
        if base is not None and not isinstance(base, TaskOptions):
            raise TypeError(f"task_options must be a TaskOptions or None, got {base!r}")
        for name in overrides:
            if name not in cls.names():
                raise TypeError(f"{owner}() got an unexpected keyword argument {name!r}")
        return dataclasses.replace(base or cls(), **overrides)


_EnvClass = TypeVar("_EnvClass", bound=type)


def task_signature(cls: _EnvClass) -> _EnvClass:
    """Class decorator: `cls.__init__`'s signature lists `TaskOptions`'s fields in place of its
    ``**task_args``, so `inspect.signature` and `help()` show every keyword an env takes."""
    init: Callable[..., None] = cls.__init__  # type: ignore[misc]
    own = [
        p
        for p in inspect.signature(init).parameters.values()
        if p.kind is not inspect.Parameter.VAR_KEYWORD and p.name not in TaskOptions.names()
    ]
    defaults = TaskOptions()
    fields = [
        inspect.Parameter(
            f.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=getattr(defaults, f.name),
            annotation=f.type,
        )
        for f in dataclasses.fields(TaskOptions)
    ]
    init.__signature__ = inspect.Signature(own + fields)  # type: ignore[attr-defined]
    return cls


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

    Subclasses call `_setup_task(TaskOptions.build(...))` in `__init__` (decorated with
    `task_signature`), `_start_episode(seed, options)` in `reset`, `_begin_step(action)` (AEC) or
    `_begin_parallel_step(actions)` (Parallel) first in `step` and `_score(text)` in it, and end
    each step with `_show(acting, rewards, graded, to_come)`.

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
