"""Multi-agent debate, a Parallel environment.

| Id          | ``math/debate-v0``                                                    |
|-------------|-----------------------------------------------------------------------|
| Agents      | ``debater_0`` ... ``debater_{N-1}``                                   |
| Turn order  | simultaneous; ``rounds`` rounds                                       |
| Observation | Dict of text: role, instruction, question, transcript, prompt         |
| Action      | any string (clipped to ``max_action_chars``)                          |
| Reward      | each round's score of the agent's own answer, all paid at the end     |

Round 0: every agent answers the problem. Round t > 0: every agent sees its own previous answer
and the others' previous answers, and revises. The episode terminates after ``rounds`` rounds.

Influence-aware reward (``influence_discount`` = g > 0): an agent is also credited, discounted,
with its teammates' later correctness. At round t >= 1 agent i receives
``g * mean_{j != i} score_j(t)``, the teammates' correctness after they read i's round t-1
answer; it arrives one round late because only then is it known (``infos[i]["influence_bonus"]``).

Improvement-shaped revisions (``revision_reward="improvement"``): from round 1 on, an agent's
round reward is its answer's score plus ``improvement_bonus`` times the change against its own
previous answer (`envs.core.revision_reward`): with the bonus at 1 a fix earns 2, a kept right
answer 1 and a right answer given up after reading the others -1, so a revision round is paid
for what it changes, not only for being right (default "score": the score alone).

Infos each round: ``problem_id``, ``turn`` (the round), ``round``, ``role``, ``extracted``,
``correct``, ``score``, ``reason``, ``parse_error``, ``action_clipped``, ``influence_bonus``,
``improvement`` (from round 1: the score minus the agent's previous one), and the
team's majority answer ``team_answer`` / ``team_correct`` (ties go to the lowest agent index).

No peeking (`envs.core.TaskEnvMixin`): every agent acts every round, so each round is graded
when it is played but shown only with the last: earlier rounds return rewards of 0 and infos
without ``correct``, ``score``, ``influence_bonus`` and ``team_correct``; the last round returns
each agent's rewards of all rounds, summed, and those fields. The verifier's ``reason`` (it may
name the reference) is in no returned info. The trainer reads each round's rewards and full
infos from ``env.turn_results``, or makes the env with ``per_step_rewards=True``.

Arguments:
    task, data_path, split, verifier, task_kwargs: the task (see `envs.tasks`).
    num_agents (`int`, 3), rounds (`int`, 2), influence_discount (`float`, 0.0).
    revision_reward (`str`, "score"), improvement_bonus (`float`, 1.0): the revising rounds' pay
        (above).
    max_action_chars (`int`, 8192), max_obs_chars (`int`, 32768), render_mode (None | "ansi").
    per_step_rewards (`bool`, False): return each round's rewards and full infos as it is played
        (the trainer's view; never a policy's input).
    options (`DebateOptions | None`): all of the above as one object (`envs.options`);
        task_options (`TaskOptions | None`): the task arguments and text bounds as one object;
        keyword arguments override either's fields.

Version history:
    v0: initial release.
    v0 (no peeking): rewards and grades returned with the last round only, ``reason``
        only in ``turn_results``; ``per_step_rewards=True`` restores the per-round returns.
    v0 (held-out splits): the ``arithmetic`` and ``unknown`` tasks keep their problem format
        and levels; a problem's split is now a hash of its text (no text in two splits) and
        its id reads ``<task>/<split>/d<level>/s<seed>/<k>``, problem k of its level and split.
    v0 (credit options): ``revision_reward`` and ``improvement_bonus``; the default pays as
        before.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pettingzoo import ParallelEnv

from envs.core import (
    TaskEnvMixin,
    TaskOptions,
    from_options,
    render_transcript,
    revision_reward,
)
from envs.options import DebateOptions
from envs.tasks import prompts
from rewards import Verdict, canonical_answer, majority_vote


class DebateEnv(TaskEnvMixin, ParallelEnv):
    """See the module docstring."""

    metadata = {"name": "math/debate-v0", "render_modes": ["ansi"], "is_parallelizable": True}
    options_class: type[DebateOptions] = DebateOptions
    agent_prefix = DebateOptions.AGENT_PREFIX
    answer_roles: tuple[str, ...] = DebateOptions.ANSWER_ROLES  # envs.roles
    immediate_rewards = True  # each round pays its own answers (the influence bonus included)
    # The instruction templates when the options give none (None: the task's own instruction).
    default_instructions: Sequence[str] | None = None
    rounds = from_options("rounds")
    influence_discount = from_options("influence_discount")
    revision_reward = from_options("revision_reward")
    improvement_bonus = from_options("improvement_bonus")

    def __init__(
        self,
        *,
        options: DebateOptions | None = None,
        task_options: TaskOptions | None = None,
        **kwargs: Any,
    ) -> None:
        self._setup_options(options, task_options, kwargs)
        self.possible_agents = list(self.options.facts().agents)
        self.max_turns = self.rounds
        self._set_instructions(self.task)
        self.agents: list[str] = []

    def _set_instructions(self, task: Any) -> None:
        templates = list(self.options.instructions or self.default_instructions or [None])
        self._instructions = {
            a: task.instruction(self._role, templates[i % len(templates)])
            for i, a in enumerate(self.possible_agents)
        }

    _role = "debater"

    def reset(
        self, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, dict[str, str]], dict[str, dict[str, Any]]]:
        self._start_episode(seed, options)
        self.agents = list(self.possible_agents)
        self.round = 0
        self.turns = []
        self.answers: dict[str, str] = {}
        self.scores: dict[str, float] = {}  # each agent's latest score
        infos = {a: {**self._base_info(0), "round": 0, "role": self._role} for a in self.agents}
        return {a: self._observe(a) for a in self.agents}, infos

    def _observe(self, agent: str) -> dict[str, str]:
        question = self.problem["question"]
        others = {a: t for a, t in self.answers.items() if a != agent}
        prompt = prompts.debate_prompt(question, self.answers.get(agent), others)
        return self._obs(
            self._role, self._instructions[agent], prompt, render_transcript(self.turns)
        )

    def step(self, actions: Mapping[str, str]) -> tuple[dict, dict, dict, dict, dict]:
        texts, clipped = self._begin_parallel_step(actions)  # every action checked first
        verdicts = {agent: self._score(texts[agent]) for agent in self.agents}
        rewards, infos = self._rewards_and_infos(verdicts, clipped)
        self.answers = texts
        self.turns.extend((a, texts[a]) for a in self.agents)
        self.round += 1
        done = self.round >= self.rounds
        terminations = dict.fromkeys(self.agents, done)
        truncations = dict.fromkeys(self.agents, False)
        observations = {a: self._observe(a) for a in self.agents}
        # every agent acts each round: the grades are shown after the last one (`_show`)
        rewards, infos = self._show(list(self.agents), rewards, infos, () if done else self.agents)
        if done:
            self.agents = []
        return observations, rewards, terminations, truncations, infos

    def _rewards_and_infos(
        self, verdicts: Mapping[str, Verdict], clipped: Mapping[str, bool]
    ) -> tuple[dict[str, float], dict[str, dict[str, Any]]]:
        team_answer, team_votes, team_correct = self._team_answer(verdicts)
        rewards, infos = {}, {}
        for agent, verdict in verdicts.items():
            others = [v.score for a, v in verdicts.items() if a != agent]
            bonus = 0.0
            if self.round > 0 and others and self.influence_discount > 0:
                bonus = self.influence_discount * math.fsum(others) / len(others)
            before = self.scores.get(agent)
            rewards[agent] = (
                revision_reward(verdict.score, before, self.revision_reward, self.improvement_bonus)
                + bonus
            )
            extra = {} if before is None else {"improvement": verdict.score - before}
            infos[agent] = self._answer_info(
                self.round,
                verdict,
                clipped[agent],
                round=self.round,
                role=self._role,
                influence_bonus=bonus,
                team_answer=team_answer,
                team_votes=team_votes,
                team_correct=team_correct,
                **extra,
            )
        self.scores = {agent: verdict.score for agent, verdict in verdicts.items()}
        return rewards, infos

    @staticmethod
    def _team_answer(verdicts: Mapping[str, Verdict]) -> tuple[str | None, int, bool]:
        """Majority answer (ties: lowest agent index), its vote count, and whether it is right."""
        answer, votes = majority_vote([v.extracted for v in verdicts.values()])
        if answer is None:
            return None, 0, False
        key = canonical_answer(answer)
        holder = next(
            v
            for v in verdicts.values()
            if v.extracted is not None and canonical_answer(v.extracted) == key
        )
        return answer, votes, holder.correct

    def observation_space(self, agent: str):
        return self._obs_space

    def action_space(self, agent: str):
        return self._act_space

    def state(self) -> str:
        return render_transcript(self.turns)


def env(**kwargs: Any) -> DebateEnv:
    """Make a `DebateEnv` (Parallel envs have no order-enforcing wrapper; `wrapped` is ignored)."""
    kwargs.pop("wrapped", None)
    return DebateEnv(**kwargs)
