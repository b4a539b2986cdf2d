"""The executor's programs, from a reply to a sandboxed run and its answer: `ProgramRunner`, the
part of ``math/tool-v0`` (`envs.tool`) and ``math/code-v0`` (`envs.code`) whose ``executor_0``
writes Python.

A reply's program is its ```python blocks, joined (else any unlabelled ``` blocks, else a last
block left open, else the whole reply: `extract_code`); it runs in `envs.sandbox` under the
env's ``sandbox`` limits (`DEFAULT_SANDBOX` unless told otherwise). The answer is the program's
(`program_answer`: its last ``\\boxed{}``, else its last printed line, when it exits with status
0), else the reply's text outside code blocks. `exec_info` is the run's part of the turn's info.

Many copies in one loop: `run_pending(steps)` runs the programs that the coming steps of several
copies will run, at once through `envs.sandbox.run_many`; each step then finds its result ready.
``ProgramRunner.prepare_steps`` is that call as the env's pre-step hook, which the rollout engine
runs every turn on the steps it is about to take (it knows no env by name).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from envs.options import ToolOptions
from envs.sandbox import ExecResult, SandboxConfig, run_code, run_many

FENCE = re.compile(r"```[ \t]*([\w+-]*)[^\n]*\n(.*?)```", re.DOTALL)
OPEN_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*)\Z", re.DOTALL | re.IGNORECASE)
PYTHON_TAGS = ("python", "python3", "py")
DEFAULT_SANDBOX = SandboxConfig(timeout_s=5.0, cpu_s=5, memory_mb=512, max_output_bytes=16384)


def extract_code(text: str) -> tuple[str, bool, str]:
    """The program in a reply, whether it came from a fenced block, and the text outside blocks.

    ```python blocks are joined in order; else unlabelled ``` blocks; else a last block left
    open (a reply cut at the length limit); else the whole reply is the program.
    """
    blocks = FENCE.findall(text)
    chosen = [body for tag, body in blocks if tag.lower() in PYTHON_TAGS]
    chosen = chosen or [body for tag, body in blocks if not tag]
    if chosen:
        return "\n".join(chosen), True, FENCE.sub("", text)
    unclosed = OPEN_FENCE.search(text)
    if unclosed is not None:
        return unclosed.group(1), True, text[: unclosed.start()]
    return text, False, text


def program_answer(result: ExecResult) -> str | None:
    """The text the task's verifier scores: ``\\boxed{...}`` or the program's last line."""
    answer = result.answer()
    if answer is None:
        return None
    return f"\\boxed{{{answer}}}" if "\\boxed{" in result.stdout else answer


def run_pending(steps: Iterable[tuple[Any, Any]], max_workers: int | None = None) -> int:
    """Run at once the programs that these steps of `ProgramRunner` envs (`math/tool-v0`,
    `math/code-v0`) are about to run.

    Each `(env, action)` is a step about to be taken; steps of other envs, steps that are not an
    executor's turn and programs already cached are passed over. The programs run in parallel
    (`run_many`, at most `max_workers` children at once, identical ones once) and each result
    waits in its env for the `step(action)` that needs it, which then runs nothing.

    Returns:
        The number of programs run.
    """
    jobs: dict[SandboxConfig, list[tuple[ProgramRunner, str]]] = {}
    for env, action in steps:
        raw = env.unwrapped
        if isinstance(raw, ProgramRunner):
            code = raw.pending_program(action)
            if code is not None:
                jobs.setdefault(raw.sandbox, []).append((raw, code))
    ran = 0
    for config, pairs in jobs.items():
        unique = list(dict.fromkeys(code for _, code in pairs))
        results = dict(zip(unique, run_many(unique, config, max_workers), strict=True))
        for raw, code in pairs:
            raw.provide_result(code, results[code])
        ran += len(unique)
    return ran


def exec_info(fenced: bool, source: str | None, result: ExecResult) -> dict[str, Any]:
    """The info fields of an executor's turn: ``code_block``, ``answer_source`` and the run's
    ``exec_*`` fields."""
    return {
        "code_block": fenced,
        "answer_source": source,
        "exec_exit_code": result.exit_code,
        "exec_timed_out": result.timed_out,
        "exec_killed_reason": result.killed_reason,
        "exec_output_truncated": result.output_truncated,
        "exec_violation": result.violation,
    }


class ProgramRunner:
    """Runs an executor's programs in the sandbox, for an env whose ``executor_0`` writes them
    (`envs.tool.ToolEnv`, `envs.code.CodeEnv`): the limits (`sandbox`), a small LRU cache of
    identical programs, the results run ahead by `run_pending`, and the answer of a reply
    (`_run_reply`). The env's options carry ``sandbox``, ``cache_size`` and
    ``max_output_chars``."""

    EXECUTOR: ClassVar[str] = ToolOptions.agent("executor")  # the agent whose replies are programs
    options: Any
    agents: list[str]
    agent_selection: str
    terminations: dict[str, bool]
    truncations: dict[str, bool]

    def _init_runner(self) -> None:
        self._cache: OrderedDict[str, ExecResult] = OrderedDict()
        self._prepared: dict[str, ExecResult] = {}  # run ahead by `run_pending`, used once

    @property
    def sandbox(self) -> SandboxConfig:
        """The limits of each run: the options', else `DEFAULT_SANDBOX`."""
        return DEFAULT_SANDBOX if self.options.sandbox is None else self.options.sandbox

    @classmethod
    def prepare_steps(cls, steps: Sequence[tuple[Any, Any]]) -> None:
        """The engine's pre-step hook (`trainers.rollout.engine`): run the programs of these
        coming `(env, action)` steps at once (`run_pending`)."""
        run_pending(steps)

    def pending_program(self, action: Any) -> str | None:
        """The program `step(action)` will run, or None: not the executor's turn, not a str,
        or a program already cached or run ahead (see `run_pending`)."""
        if not self.agents or not isinstance(action, str):
            return None  # not reset, or over
        agent = self.agent_selection
        if agent != self.EXECUTOR:
            return None
        if self.terminations.get(agent) or self.truncations.get(agent):
            return None
        code = extract_code(self._check_action(agent, action)[0])[0]  # type: ignore[attr-defined]
        return None if code in self._cache or code in self._prepared else code

    def provide_result(self, code: str, result: ExecResult) -> None:
        """Hand over the result of `code`, run ahead of the step that runs it."""
        self._prepared[code] = result

    def _run_reply(self, text: str) -> tuple[str, bool, ExecResult, str, str | None]:
        """Run the program of an executor's reply: ``(code, fenced, result, scored, source)``.
        `scored` is the text the task scores: the program's answer (`program_answer`) when it
        gave one, else the reply's text outside code blocks; `source` says which ("output",
        "text", or None when both are empty)."""
        code, fenced, prose = extract_code(text)
        result = self._run(code)
        answer = program_answer(result)
        source = "output" if answer is not None else ("text" if prose.strip() else None)
        return code, fenced, result, (answer if answer is not None else prose), source

    def _run(self, code: str) -> ExecResult:
        """Run a program in the sandbox, through a small LRU cache of identical programs."""
        if code in self._cache:
            self._cache.move_to_end(code)
            return self._cache[code]
        result = self._prepared.pop(code, None)
        if result is None:
            result = run_code(code, self.sandbox)
        if self.options.cache_size:
            self._cache[code] = result
            while len(self._cache) > self.options.cache_size:
                self._cache.popitem(last=False)
        return result
