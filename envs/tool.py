"""Analyzer -> executor -> verifier with Python execution, an AEC environment.

| Id                | ``math/tool-v0``                                              |
|-------------------|---------------------------------------------------------------|
| Agents            | ``analyzer_0``, ``executor_0``, ``verifier_0``                |
| Turn order        | analyzer, then (executor, verifier) for ``rounds`` rounds     |
| Observation       | Dict of text: role, instruction, question, transcript, prompt |
| Action            | any string (clipped to ``max_action_chars``)                  |
| Reward            | per role (below), or a shared team reward at the end          |

The analyzer writes a plan once. The executor writes a Python program: the ```python blocks
of its reply, joined (else any unlabelled ``` blocks, else the whole reply), run in the sandbox
of `envs.sandbox` (a fresh process with time, CPU, memory and output limits; no network, no
files outside its temp dir) by `envs.program.ProgramRunner`, which ``math/code-v0`` shares.
The verifier sees the plan, the program, its output and the answer taken from it (``Its
answer: \\boxed{19}``, or ``none``: what the task scores, below) and ends with ``Verdict:
correct`` or ``Verdict: incorrect``; a rejected program goes back to the executor with the
feedback. The episode terminates after the last verifier turn, or, with
``stop_on_accept``, as soon as the verifier accepts.

The executor's answer is the program's: the last ``\\boxed{}`` it prints, else its last
printed line, when it exits with status 0; otherwise the reply's text outside code blocks (so
an answer stated in prose still counts). The task's verifier scores that answer.

Rewards (``team_reward=False``): the executor gets the score of its answer; the verifier gets 1
when its verdict matches the truth of the answer it reviewed, else 0 (no verdict: 0); the
analyzer gets the score of the final answer when the episode ends. With ``team_reward=True``
every agent gets the score of the final answer when the episode ends and 0 before.

Credit options (as reflection's, `envs.reflection`): ``revision_reward="improvement"`` pays an
executor after round 0 its score plus ``improvement_bonus`` times the change against the answer
it revised (a fix 2, a kept right answer 1, a break -1 with the bonus at 1);
``verifier_reward="counterfactual"`` pays a review its verdict plus ``counterfactual_weight``
times the change the next program made against the reviewed answer, paid when that program runs
(a review the episode ends on has changed nothing).

Infos: ``problem_id``, ``turn``, ``round``, ``role``, ``extracted``, ``correct``, ``score``,
``reason``, ``parse_error``, ``action_clipped``; the executor's also ``improvement`` after
round 0 (its score minus the revised answer's), ``code_block`` (a fenced
block was found), ``answer_source`` ("output", "text" or None), ``exec_exit_code``,
``exec_timed_out``, ``exec_killed_reason``, ``exec_output_truncated``, ``exec_violation``; the
verifier's ``verdict`` and ``reviewed_correct``; at the end every agent's ``final_correct`` and
``final_answer``.

No peeking (`envs.core.TaskEnvMixin`): each turn is graded when it is taken (the rewards above),
but an agent is shown nothing of it while it has a turn to come. Its rewards are withheld and
paid, summed, on the step after which it acts no more (the analyzer's plan after its one turn,
the executor's after its last program, the rest at the end; each agent's final ``last()`` holds
its return), and its info gains
``correct``, ``score`` and the verifier's ``reviewed_correct`` only then; the task verifier's
``reason`` (it may name the reference) is in no public info. The trainer reads every step's
rewards and full infos from ``env.unwrapped.turn_results``, or makes the env with
``per_step_rewards=True``.

Arguments:
    task (`str | Task`, "arithmetic"), data_path, split, verifier, task_kwargs: the task.
    rounds (`int`, 2): executor/verifier rounds K; at most 1 + 2K agent turns.
    stop_on_accept (`bool`, False): end the episode when the verifier says correct.
    team_reward (`bool`, False): one shared reward for the final answer instead of per role.
    revision_reward (`str`, "score"), improvement_bonus (`float`, 1.0): the executor's pay after
        round 0: its score, or "improvement" (above).
    verifier_reward (`str`, "verdict"): "verdict" or "counterfactual" (above);
        counterfactual_weight (`float`, 1.0) weighs the change.
    sandbox (`SandboxConfig | Mapping | None`): limits of each run (a mapping of its fields is
        accepted); default: 5 s wall, 5 s CPU, 512 MiB, 16 KiB of output.
    cache_size (`int`, 128): identical programs within one env reuse their result (the child
        has a fixed hash seed, so programs are reproducible); 0 runs every program.
    max_output_chars (`int`, 2000): program output shown to the agents.
    max_action_chars (`int`, 8192), max_obs_chars (`int`, 32768): text bounds.
    render_mode (`str | None`): "ansi" makes `render()` return the transcript.
    per_step_rewards (`bool`, False): pay each reward on the step it is for and show full infos
        at once (the trainer's view; never a policy's input).
    options (`ToolOptions | None`): all of the above as one object (`envs.options`);
        task_options (`TaskOptions | None`): the task arguments and text bounds as one object;
        keyword arguments override either's fields.

Many copies in one loop: `envs.program.run_pending(steps)` runs the programs that the coming
steps of several copies will run, at once through `envs.sandbox.run_many`; each step then finds
its result ready.
``ToolEnv.prepare_steps`` is that call as the env's pre-step hook, which the rollout engine runs
every turn on the steps it is about to take (it knows no env by name).

Version history:
    v0: initial release.
    v0 (no peeking): grades withheld from an agent while it has a turn to come,
        rewards paid when it acts no more, ``reason`` only in ``turn_results``;
        ``per_step_rewards=True`` restores the old per-step rewards and infos.
    v0 (held-out splits): the ``arithmetic`` and ``unknown`` tasks keep their problem format
        and levels; a problem's split is now a hash of its text (no text in two splits) and
        its id reads ``<task>/<split>/d<level>/s<seed>/<k>``, problem k of its level and split.
"""

from __future__ import annotations

import re
from typing import Any

from pettingzoo import AECEnv
from pettingzoo.utils import wrappers

from envs.core import TaskOptions, clip, from_options, render_transcript, revision_reward
from envs.options import (  # noqa: F401 - the choices, re-exported where they were
    VERIFIER_REWARDS,
    ToolOptions,
)
from envs.program import DEFAULT_SANDBOX, ProgramRunner, exec_info, program_answer
from envs.roles import role_of
from envs.sandbox import ExecResult, SandboxConfig, run_code
from envs.scheduled import ScheduledTeamEnv
from envs.tasks import prompts
from rewards import Verdict, Verifier, get_verifier

CALCULATION = re.compile(r"<<([^=<>]+)=([^<>]*)>>")
ANSWER_CHARS = 200  # the answer shown to the verifier, clipped (its run is shown above it)
# The one agent of each role, named by the options (``analyzer_0``, ``executor_0``, ``verifier_0``).
ANALYZER, EXECUTOR, VERIFIER = (ToolOptions.agent(role) for role in ToolOptions.ROLES)


def validate_by_execution(
    code: str,
    reference: str,
    verifier: str | Verifier = "gsm8k",
    config: SandboxConfig | None = None,
) -> tuple[Verdict, ExecResult]:
    """Run `code` in the sandbox and score what it prints against `reference`.

    Use it to check a data set's answers by computation (e.g. GSM8K's calculator annotations,
    see `gsm8k_program`) or a solution program a model wrote.

    Args:
        code (`str`): the program; its last printed line (or ``\\boxed{}``) is the answer.
        reference (`str`): the expected answer.
        verifier (`str | Verifier`, "gsm8k"): a verifier or its registry name.
        config (`SandboxConfig | None`): sandbox limits (`DEFAULT_SANDBOX` if None).

    Returns:
        The verdict (score 0 with the run's status as the reason when the program failed) and
        the `ExecResult`.
    """
    checker = get_verifier(verifier) if isinstance(verifier, str) else verifier
    result = run_code(code, config or DEFAULT_SANDBOX)
    answer = program_answer(result)
    if answer is None:
        status = result.observation(300).splitlines()[0]
        return Verdict(0.0, None, f"the program gave no answer ({status})"), result
    return checker.verify(answer, reference), result


def gsm8k_program(solution: str) -> str:
    """A program that redoes a GSM8K solution's ``<<expression=result>>`` calculations.

    It prints each calculation's value and, last, the value of the last one (as an integer
    when whole), which `validate_by_execution` compares with the ``####`` answer.

    Raises:
        ValueError: if the solution has no calculator annotation.
    """
    calculations = CALCULATION.findall(solution)
    if not calculations:
        raise ValueError("the solution has no <<expression=result>> calculator annotation")
    lines = ["from fractions import Fraction", "value = None"]
    for expression, _ in calculations:
        cleaned = expression.replace(",", "").replace("x", "*").replace("^", "**")
        lines.append(f"value = {cleaned.strip()}")
        lines.append("print(value)")
    lines.append("print(int(value) if float(value).is_integer() else round(value, 6))")
    return "\n".join(lines)


class ToolEnv(ProgramRunner, ScheduledTeamEnv):
    """See the module docstring. The schedule, reset, the end of each step and the team reward
    are `ScheduledTeamEnv`'s; the options are `ToolOptions` (`envs.options`)."""

    metadata = {"name": "math/tool-v0", "render_modes": ["ansi"], "is_parallelizable": False}
    options_class = ToolOptions
    options: ToolOptions
    answer_roles = ToolOptions.ANSWER_ROLES  # envs.roles: its program's output is the answer
    paid_at_end = (ANALYZER,)  # a plan earns the final answer's score
    revision_reward = from_options("revision_reward")
    improvement_bonus = from_options("improvement_bonus")
    verifier_reward = from_options("verifier_reward")
    counterfactual_weight = from_options("counterfactual_weight")
    cache_size = from_options("cache_size")
    max_output_chars = from_options("max_output_chars")

    def __init__(
        self,
        *,
        options: ToolOptions | None = None,
        task_options: TaskOptions | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(options=options, task_options=task_options, **kwargs)
        self._init_runner()

    def _reset_state(self) -> None:
        self.plan = ""
        self.code: str | None = None  # the latest program
        self.output: str | None = None  # the latest run, as shown to the agents
        self._prepared = {}

    def observe(self, agent: str) -> dict[str, str]:
        question = self.problem["question"]
        if agent == ANALYZER:
            prompt = prompts.analyze_prompt(question)
        elif agent == EXECUTOR or self.code is None:
            prompt = prompts.executor_prompt(
                question, self.plan, self.code, self.output, self.feedback
            )
        else:
            answer = None if self.answer_verdict is None else self.answer_verdict.extracted
            answer = None if answer is None else clip(answer, ANSWER_CHARS)
            prompt = prompts.program_review_prompt(
                question, self.plan, self.code, self.output or "", answer
            )
        return self._obs(
            role_of(agent), self._instructions[agent], prompt, render_transcript(self.turns)
        )

    # ------------------------------------------------------------------ roles
    def _take_turn(
        self, agent: str, text: str, clipped: bool, extra: dict[str, Any], done: bool
    ) -> tuple[str, bool]:
        if agent == ANALYZER:
            self._plan(agent, text, clipped, extra)
            return text, done
        if agent == EXECUTOR:
            return self._execute(agent, text, clipped, extra), done
        verdict, hit = self._grade_review(agent, text, clipped, extra)
        self.rewards[agent] = float(hit)
        return text, done or self._accepts(verdict)

    def _plan(self, agent: str, text: str, clipped: bool, extra: dict[str, Any]) -> None:
        self.plan = text
        self._graded[agent] = {
            **self._base_info(self.turn),
            **extra,
            "extracted": None,
            "correct": False,
            "score": 0.0,
            "parse_error": False,
            "reason": "a plan is not scored; the analyzer earns the final answer's score",
            "action_clipped": clipped,
        }

    def _execute(self, agent: str, text: str, clipped: bool, extra: dict[str, Any]) -> str:
        code, fenced, result, scored, source = self._run_reply(text)
        verdict = self._score(scored)
        before = self.answer_verdict.score if self.answer_verdict is not None else None
        if before is not None:
            extra["improvement"] = verdict.score - before
            if self.verifier_reward == "counterfactual":
                self.rewards[VERIFIER] = self.counterfactual_weight * (verdict.score - before)
        self.code, self.output = code, result.observation(self.max_output_chars)
        self.answer_verdict = verdict
        self._graded[agent] = self._answer_info(
            self.turn,
            verdict,
            clipped,
            **extra,
            **exec_info(fenced, source, result),
        )
        self.rewards[agent] = revision_reward(
            verdict.score, before, self.revision_reward, self.improvement_bonus
        )
        return f"{text}\n\n[execution]\n{self.output}"


def env(wrapped: bool = True, **kwargs: Any) -> AECEnv:
    """Make a `ToolEnv`, order-enforced unless `wrapped=False`."""
    raw = ToolEnv(**kwargs)
    return wrappers.OrderEnforcingWrapper(raw) if wrapped else raw
