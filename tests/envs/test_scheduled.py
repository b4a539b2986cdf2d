"""`envs.scheduled.ScheduledTeamEnv` (the base of reflection and tool) and the env protocols of
`envs.core` (`TeamEnv`, `AECTeamEnv`, `TaskTeamEnv`, `PreparesSteps`) that `check_env` checks."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest

import envs
from envs.core import (
    AECTeamEnv,
    PreparesSteps,
    TaskTeamEnv,
    TeamEnv,
    missing_members,
    protocol_members,
    render_transcript,
)
from envs.options import ScheduledOptions
from envs.reflection import ReflectionEnv
from envs.roles import role_of
from envs.scheduled import ScheduledTeamEnv
from envs.solve import SolveEnv
from envs.tasks import prompts
from envs.tool import ToolEnv

PROBLEM = {"id": "p/1", "question": "Ann has 2 pens and buys 3 more. How many pens?", "answer": "5"}


@dataclass(frozen=True)
class PlanSolveCheckOptions(ScheduledOptions):
    """An analyzer plans once; then a solver answers (revising after the first round) and a
    critic reviews, ``rounds`` times."""

    ROLES: ClassVar[tuple[str, ...]] = ("analyzer", "solver", "critic")
    FIRST: ClassVar[str] = "analyzer"
    CYCLE: ClassVar[tuple[str, str]] = ("solver", "critic")
    ANSWER_ROLES: ClassVar[tuple[str, ...]] = ("solver",)
    REVIEW_ROLES: ClassVar[tuple[str, ...]] = ("critic",)


class PlanSolveCheckEnv(ScheduledTeamEnv):
    """A scheduled team env in a few lines: the base does the schedule, reset, rewards' end."""

    metadata = {"name": "test/plan-solve-check-v0", "render_modes": ["ansi"]}
    options_class = PlanSolveCheckOptions
    answer_roles = PlanSolveCheckOptions.ANSWER_ROLES
    paid_at_end = ("analyzer_0",)

    def _reset_state(self) -> None:
        self.plan, self.answer = "", None

    def observe(self, agent: str) -> dict[str, str]:
        question = self.problem["question"]
        if agent == "analyzer_0":
            prompt = prompts.analyze_prompt(question)
        elif agent == "critic_0" and self.answer is not None:
            prompt = prompts.critic_prompt(question, self.answer)
        elif self.answer is None:
            prompt = prompts.solve_prompt(question)
        else:
            prompt = prompts.refiner_prompt(question, self.answer, self.feedback or "(none)")
        instruction = self._instructions[agent]
        return self._obs(role_of(agent), instruction, prompt, render_transcript(self.turns))

    def _take_turn(
        self, agent: str, text: str, clipped: bool, extra: dict[str, Any], done: bool
    ) -> tuple[str, bool]:
        if agent == "analyzer_0":
            self.plan = text
            self._graded[agent] = {**self._base_info(self.turn), **extra, "correct": False}
            return text, done
        if agent == "solver_0":
            self.answer, self.answer_verdict = text, self._score(text)
            self._graded[agent] = self._answer_info(
                self.turn, self.answer_verdict, clipped, **extra
            )
            self.rewards[agent] = self.answer_verdict.score
            return text, done
        verdict, hit = self._grade_review(agent, text, clipped, extra)
        self.rewards[agent] = float(hit)
        return text, done or self._accepts(verdict)


def play(env, replies):
    env.reset(seed=0, options={"problem": PROBLEM})
    order = []
    for agent in env.agent_iter():
        _, _, terminated, truncated, _ = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        order.append(agent)
        env.step(replies[agent])
    return order


def test_a_new_scheduled_env_is_its_roles_and_turns_only():
    env = PlanSolveCheckEnv(rounds=2, per_step_rewards=True)
    assert env.possible_agents == ["analyzer_0", "solver_0", "critic_0"]
    assert env.schedule == ["analyzer_0", "solver_0", "critic_0", "solver_0", "critic_0"]
    assert "rounds" in inspect.signature(PlanSolveCheckEnv).parameters
    replies = {
        "analyzer_0": "Add them.",
        "solver_0": "\\boxed{5}",
        "critic_0": "Verdict: incorrect",
    }
    order = play(env, replies)
    assert tuple((a,) for a in order) == env.options.facts().slots
    last = env.turn_results[-1]  # the trainer's record of the last step
    assert last["rewards"]["analyzer_0"] == 1.0  # the final answer's score, paid at the end
    assert last["infos"]["critic_0"]["round"] == 1
    assert last["infos"]["critic_0"]["verdict"] is False
    assert last["infos"]["critic_0"]["final_correct"] is True
    stopping = PlanSolveCheckEnv(rounds=3, stop_on_accept=True)
    assert play(stopping, {**replies, "critic_0": "Verdict: correct"}) == [
        "analyzer_0",
        "solver_0",
        "critic_0",
    ]


def test_a_new_scheduled_env_passes_check_env():
    envs.check_env(lambda: PlanSolveCheckEnv(rounds=1), num_cycles=3)


def test_the_team_reward_is_the_final_answers_for_every_agent():
    env = PlanSolveCheckEnv(rounds=1, team_reward=True, per_step_rewards=True)
    play(env, {"analyzer_0": "plan", "solver_0": "\\boxed{5}", "critic_0": "Verdict: correct"})
    assert env.turn_results[-1]["rewards"] == dict.fromkeys(env.possible_agents, 1.0)


@pytest.mark.parametrize("cls", [ReflectionEnv, ToolEnv])
def test_reflection_and_tool_are_scheduled_team_envs(cls):
    assert issubclass(cls, ScheduledTeamEnv)
    env = cls(rounds=3)
    env.reset(seed=0)
    rounds = []
    while env.agents and not any(env.terminations.values()):
        rounds.append(env.round)
        env.step("\\boxed{1} Verdict: incorrect")
    assert rounds == [0, 0, 0, 1, 1, 2, 2]


@pytest.mark.parametrize("env_id", envs.list_envs())
def test_every_env_meets_the_protocols(env_id):
    env = envs.make(env_id)
    env.reset(seed=0)
    raw = env.unwrapped
    assert isinstance(raw, TeamEnv) and isinstance(raw, TaskTeamEnv)
    assert missing_members(raw, TaskTeamEnv) == []
    if not raw.metadata["name"].startswith(("math/debate", "math/ensemble")):
        assert isinstance(raw, AECTeamEnv) and missing_members(raw, AECTeamEnv) == []
    assert isinstance(raw, PreparesSteps) is (env_id in ("math/tool-v0", "math/code-v0"))


def test_protocol_members_are_stated_once_bases_included():
    assert protocol_members(TeamEnv) == ("agents", "possible_agents", "reset", "step")
    assert set(protocol_members(TeamEnv)) < set(protocol_members(AECTeamEnv))
    assert "observe" in protocol_members(AECTeamEnv)
    with pytest.raises(TypeError, match=r"not a typing\.Protocol"):
        protocol_members(dict)
    assert set(protocol_members(TaskTeamEnv)) - set(protocol_members(TeamEnv)) == {
        "task",
        "turn_results",
        "immediate_rewards",
        "answer_roles",
    }


class NoRecordEnv(SolveEnv):
    """Keeps no trainer's record."""

    def reset(self, seed=None, options=None):
        super().reset(seed, options)
        del self.turn_results


def test_check_env_names_a_missing_member():
    with pytest.raises(AssertionError, match=r"TaskTeamEnv \(NoRecordEnv lacks turn_results\)"):
        envs.check_env(NoRecordEnv, num_cycles=1)
