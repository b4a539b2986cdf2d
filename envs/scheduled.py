"""`ScheduledTeamEnv`: the AEC team env whose agents take turns on a fixed schedule.

One agent a role (``<role>_0``). The first role acts once, then the two roles of the options'
cycle take turns for ``rounds`` rounds (`envs.options.ScheduledOptions`): reflection's solver,
then (critic, refiner) K times; the tool env's analyzer, then (executor, verifier) K times. One
of the cycle's roles reviews the latest answer and ends with ``Verdict: correct`` or ``Verdict:
incorrect`` (`parse_verdict`); with ``stop_on_accept`` the episode ends when it accepts.

The base holds what such envs share: the schedule and the round of each turn (``round =
max(turn - 1, 0) // 2``), reset, the step's frame, the review's grading, and the end of each
step: termination, every agent's ``final_correct`` and ``final_answer`` (the latest answer's),
the shared reward with ``team_reward`` (0 for an agent in `failed_audit`), the agents of
`paid_at_end` paid the final answer's score otherwise, and what the agents are shown
(`TaskEnvMixin._show`). A subclass names its options' class (whose roles, first role and cycle
make the schedule), its instructions' prompts in `observe`, and its turns in `_take_turn`,
which grades the acting agent's turn (``self._graded[agent]``, ``self.rewards``), records the
latest answer's verdict in ``answer_verdict``, and says what goes in the transcript and whether
the episode ends.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from pettingzoo import AECEnv

from envs.core import TaskEnvMixin, TaskOptions, from_options
from envs.options import ScheduledOptions
from envs.roles import role_of
from rewards import Verdict

VERDICT_RE = re.compile(
    # One whitespace run per gap: "\s*[:=-]?\s*[*_]*\s*" backtracks cubically on long spaces.
    r"verdict\s*(?:[:=\-]\s*)?(?:[*_`\"']+\s*)?(correct|incorrect|right|wrong)\b"
    r"|\\boxed\{\s*(correct|incorrect)\s*\}",
    re.IGNORECASE,
)


# A verdict said in words, read only when no ``Verdict:`` line is given: a one-word reply
# ("Correct."), or "the (proposed) solution/answer is (not) correct" (how a small pretrained
# instruct model answers "Is the proposed solution correct?"; envs.tasks.prompts.ASKS).
WORD_VERDICT_RE = re.compile(
    r"\A[\s*_`\"']*(correct|incorrect|right|wrong)[*_`\"']*\s*(?:[.!,:;\n]|\Z)", re.IGNORECASE
)
STATED_VERDICT_RE = re.compile(
    r"\b(?:solution|answer)\s+is\s*:?\s*(not\s+)?(correct|incorrect|right|wrong)\b", re.IGNORECASE
)


def parse_verdict(text: str) -> bool | None:
    """A review's last stated verdict: True (correct), False (incorrect) or None (none given).
    A ``Verdict: ...`` line (or ``\\boxed{correct}``) decides; without one, a reply that is
    the word itself, else the first "the solution is (not) correct" sentence."""
    matches = VERDICT_RE.findall(text[-4000:])
    if matches:
        word = next(w for w in matches[-1] if w).lower()
        return word in ("correct", "right")
    head = text[:2000]
    first = WORD_VERDICT_RE.match(head)
    if first:
        return first.group(1).lower() in ("correct", "right")
    stated = STATED_VERDICT_RE.search(head)
    if stated:
        return (stated.group(2).lower() in ("correct", "right")) != bool(stated.group(1))
    return None


class ScheduledTeamEnv(TaskEnvMixin, AECEnv):
    """An AEC env on the schedule of its options (`ScheduledOptions`); see the module docstring.

    Attributes:
        schedule (`list[str]`): the agent of each turn; ``max_turns`` its length.
        turn (`int`): the turns taken this episode; `round` the round of the coming one.
        answer_verdict (`Verdict | None`): the latest answer's verdict.
        verdict (`bool | None`): the latest review's verdict; feedback (`str | None`) its text.
        failed_audit (`set[str]`): agents with a turn an audit zeroed, left out of a team reward.
    """

    options_class: ClassVar[type[ScheduledOptions]] = ScheduledOptions
    options: ScheduledOptions
    # The agents paid the final answer's score when the episode ends, without a team reward.
    paid_at_end: ClassVar[tuple[str, ...]] = ()
    rounds = from_options("rounds")
    stop_on_accept = from_options("stop_on_accept")
    team_reward = from_options("team_reward")

    def __init__(
        self,
        *,
        options: ScheduledOptions | None = None,
        task_options: TaskOptions | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        self._setup_options(options, task_options, kwargs)
        self.possible_agents = list(self.options.facts().agents)
        self.schedule = self.options.schedule()
        self.max_turns = len(self.schedule)
        self._set_instructions(self.task)
        self.agents = []

    def _set_instructions(self, task: Any) -> None:
        self._instructions = {a: task.instruction(role_of(a)) for a in self.possible_agents}

    @property
    def round(self) -> int:
        """The round of the coming turn: 0 for the first role's turn and the first cycle."""
        return max(self.turn - 1, 0) // 2

    # ------------------------------------------------------------------ PettingZoo API
    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self._start_episode(seed, options)
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        # The full infos, as graded; `self.infos` holds what the agents are shown (`_show`).
        self._graded = {a: {**self._base_info(0), "role": role_of(a)} for a in self.agents}
        self.infos = {a: dict(info) for a, info in self._graded.items()}
        self.turns = []
        self.turn = 0
        self.answer_verdict: Verdict | None = None
        self.verdict: bool | None = None
        self.feedback: str | None = None
        self.failed_audit: set[str] = set()
        self._reset_state()
        self.agent_selection = self.schedule[0]

    def step(self, action: str | None) -> None:
        begun = self._begin_step(action)
        if begun is None:
            return
        agent, text, clipped = begun
        extra = {"round": self.round, "role": role_of(agent)}
        done = self.turn + 1 >= self.max_turns
        shown, done = self._take_turn(agent, text, clipped, extra, done)
        self.turns.append((agent, shown))
        self.turn += 1
        self._finish_step(agent, done)

    # ------------------------------------------------------------------ a subclass's turns
    def _reset_state(self) -> None:
        """Reset the subclass's own episode state (called by `reset`)."""

    def _take_turn(
        self, agent: str, text: str, clipped: bool, extra: dict[str, Any], done: bool
    ) -> tuple[str, bool]:
        """Grade and pay `agent`'s turn `text` (`extra`: its info's round and role; `done`:
        whether the schedule ends with it). Returns the turn's transcript text and whether the
        episode ends with it."""
        raise NotImplementedError

    def _grade_review(
        self, agent: str, text: str, clipped: bool, extra: dict[str, Any]
    ) -> tuple[bool | None, bool]:
        """Grade a review of the latest answer: its verdict (also ``self.verdict``; the text is
        ``self.feedback``) against the answer's truth (no answer: wrong). Returns the verdict and
        whether it was right; the review's info is in ``self._graded[agent]``."""
        verdict = parse_verdict(text)
        self.verdict = verdict
        truth = self.answer_verdict.correct if self.answer_verdict is not None else False
        self.feedback = text
        self._graded[agent] = self._review_info(self.turn, verdict, truth, clipped, **extra)
        return verdict, self._graded[agent]["correct"]

    def _accepts(self, verdict: bool | None) -> bool:
        """Whether a review with `verdict` ends the episode (``stop_on_accept``)."""
        return bool(self.stop_on_accept) and verdict is True

    def _finish_step(self, agent: str, done: bool) -> None:
        """The final rewards, the end of the episode, and what the agents are shown."""
        final = self.answer_verdict
        final_score = final.score if (done and final is not None) else 0.0
        if self.team_reward:
            self.rewards = {a: 0.0 if a in self.failed_audit else final_score for a in self.agents}
        elif done:
            for payee in self.paid_at_end:
                self.rewards[payee] = final_score
        if done:
            for a in self.agents:
                self.terminations[a] = True
                self._graded[a]["final_correct"] = bool(final is not None and final.correct)
                self._graded[a]["final_answer"] = None if final is None else final.extracted
        to_come = () if done else set(self.schedule[self.turn :])
        self.rewards, self.infos = self._show([agent], self.rewards, self._graded, to_come)
        self._accumulate_rewards()
        if done:
            self._deads_step_first()
        else:
            self.agent_selection = self.schedule[self.turn]
