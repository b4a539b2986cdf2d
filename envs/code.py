"""One agent alone with the tool env's interpreter: the fair baseline of ``math/tool-v0``.

| Id          | ``math/code-v0``                                              |
|-------------|---------------------------------------------------------------|
| Agents      | ``executor_0``                                                |
| Turn order  | one turn                                                      |
| Observation | Dict of text: role, instruction, question, transcript, prompt |
| Action      | any string (clipped to ``max_action_chars``)                  |
| Reward      | the task verifier's score of the program's answer             |

The agent is ``math/tool-v0``'s executor without the analyzer's plan and without a verifier:
the executor's instruction, and its first prompt less the plan (`code_prompt`), so a model
trained in tool-v0 plays it as it played its first program. Its reply's program (the ```python
blocks, joined; `envs.program.extract_code`) runs once in the same sandbox with the same default
limits (`envs.program.DEFAULT_SANDBOX`: 5 s wall, 5 s CPU, 512 MiB, 16 KiB of output), and its
answer is taken exactly as the tool env's executor answer is (`ProgramRunner._run_reply`): the
program's last printed ``\\boxed{}``, else its last printed line, when it exits with status 0;
otherwise the reply's text outside code blocks.

It is the single-agent counterpart a tool-using team names (its facts' ``alone_with_tool``, `envs.options.EnvFacts`):
evaluating ``math/tool-v0`` plays it, sampled to the team's generations and tokens per
episode, beside the model alone without a tool (`trainers.evaluation.alone`).

Infos: ``problem_id``, ``turn``, ``round``, ``role``, ``extracted``, ``correct``, ``score``,
``parse_error``, ``action_clipped``, ``code_block``, ``answer_source`` ("output", "text" or
None), ``exec_exit_code``, ``exec_timed_out``, ``exec_killed_reason``,
``exec_output_truncated``, ``exec_violation``, ``final_correct`` and ``final_answer``. The one
turn ends the episode, so its grade is shown at once; the verifier's ``reason`` is kept for the
trainer in ``env.unwrapped.turn_results`` (or shown with ``per_step_rewards=True``).

Arguments:
    task, data_path, split, verifier, task_kwargs: the task (see `envs.tasks`).
    sandbox (`SandboxConfig | Mapping | None`): the run's limits; default the tool env's.
    cache_size (`int`, 128): identical programs within one env reuse their result.
    max_output_chars (`int`, 2000): program output kept in the transcript.
    max_action_chars (`int`, 8192), max_obs_chars (`int`, 32768), render_mode (None | "ansi").
    per_step_rewards (`bool`, False): show full infos (the verifier's ``reason`` too).
    options (`CodeOptions | None`), task_options (`TaskOptions | None`): the arguments above as
        one object (`envs.options`); keyword arguments override its fields.

Many copies in one loop run their programs at once: ``CodeEnv.prepare_steps`` is the tool
env's pre-step hook (`envs.program.run_pending`).

Version history:
    v0: initial release.
"""

from __future__ import annotations

from typing import Any

from pettingzoo import AECEnv
from pettingzoo.utils import wrappers

from envs.core import TaskEnvMixin, TaskOptions, render_transcript
from envs.options import CodeOptions
from envs.program import ProgramRunner, exec_info
from envs.tasks import prompts

AGENT = ProgramRunner.EXECUTOR


def code_prompt(question: str) -> str:
    """The executor's first prompt in ``math/tool-v0`` (`prompts.executor_prompt`) less the
    analyzer's plan."""
    return f"{prompts.problem_block(question)}\n\nWrite the Python program."


class CodeEnv(ProgramRunner, TaskEnvMixin, AECEnv):
    """See the module docstring."""

    metadata = {"name": "math/code-v0", "render_modes": ["ansi"], "is_parallelizable": True}
    options_class = CodeOptions
    options: CodeOptions
    answer_roles = CodeOptions.ANSWER_ROLES  # envs.roles: its program's output is the answer

    def __init__(
        self,
        *,
        options: CodeOptions | None = None,
        task_options: TaskOptions | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        self._setup_options(options, task_options, kwargs)
        self._init_runner()
        self.possible_agents = [AGENT]
        self.max_turns = 1
        self._set_instructions(self.task)
        self.agents = []

    def _set_instructions(self, task: Any) -> None:
        self._instruction = task.instruction("executor")

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        self._start_episode(seed, options)
        self._prepared = {}
        self.agents = [AGENT]
        self.rewards = {AGENT: 0.0}
        self._cumulative_rewards = {AGENT: 0.0}
        self.terminations = {AGENT: False}
        self.truncations = {AGENT: False}
        self.infos = {AGENT: {**self._base_info(0), "role": "executor"}}
        self.turns = []
        self.agent_selection = AGENT

    def observe(self, agent: str) -> dict[str, str]:
        prompt = code_prompt(self.problem["question"])
        return self._obs("executor", self._instruction, prompt, render_transcript(self.turns))

    def step(self, action: str | None) -> None:
        begun = self._begin_step(action)
        if begun is None:
            return
        agent, text, clipped = begun
        _, fenced, result, scored, source = self._run_reply(text)
        verdict = self._score(scored)
        output = result.observation(self.options.max_output_chars)
        self.turns.append((agent, f"{text}\n\n[execution]\n{output}"))
        graded = self._answer_info(
            0,
            verdict,
            clipped,
            round=0,
            role="executor",
            **exec_info(fenced, source, result),
            final_correct=verdict.correct,
            final_answer=verdict.extracted,
        )
        self.terminations[agent] = True
        # One turn, the last: the grade is shown at once (less the verifier's reason).
        self.rewards, self.infos = self._show(
            [agent], {agent: verdict.score}, {agent: graded}, to_come=()
        )
        self._accumulate_rewards()


def env(wrapped: bool = True, **kwargs: Any) -> AECEnv:
    """Make a `CodeEnv`, order-enforced unless `wrapped=False`."""
    raw = CodeEnv(**kwargs)
    return wrappers.OrderEnforcingWrapper(raw) if wrapped else raw
