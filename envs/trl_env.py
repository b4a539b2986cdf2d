r"""The single-agent envs as TRL environments: ``GRPOTrainer(environment_factory=...)``.

    from trl import GRPOConfig, GRPOTrainer
    from envs.trl_env import trl_environment

    dataset, factory = trl_environment("math/tool-v0", task="arithmetic")
    GRPOTrainer(model="Qwen/Qwen3-0.6B", args=GRPOConfig(output_dir="out"),
                train_dataset=dataset, environment_factory=factory).train()

| Id                | Class              | Tools                      | Reward (`get_reward`)       |
|-------------------|--------------------|----------------------------|-----------------------------|
| ``math/solve-v0`` | `SolveEnvironment` | ``submit_answer(answer)``  | solve-v0's, for the         |
|                   |                    |                            | submitted answer            |
| ``math/tool-v0``  | `ToolEnvironment`  | ``run_python(code)``,      | the task verifier's score   |
|                   |                    | ``submit_answer(answer)``  | of the submitted answer     |
| ``math/code-v0``  | `CodeEnvironment`  | ``run_program(code)``      | code-v0's, for the program  |

TRL's contract (``environment_factory`` of `trl.GRPOTrainer`, TRL >= 1.16 with transformers
>= 5.2 and a chat template that renders tool calls): the factory makes one instance per rollout
(pooled and reused); before each rollout TRL calls ``reset(**row)`` with the dataset row's
columns; every public method but ``reset`` and ``get_reward`` is a tool the model may call (its
type hints and Google-style docstring make the tool's schema, so these classes have no other
public methods); ``get_reward()`` scores the finished rollout, logged as
``rewards/<ClassName>/mean``, and ``reward_funcs`` may be left out.

How the answer arrives. ``get_reward`` takes no argument and TRL hands the completion only to
``reward_funcs``, so an answer written in the final message never reaches the env: the model
states its answer by calling a tool, ``submit_answer`` (or, in code-v0, ``run_program``, whose
program's output is the answer). The first call is final (each of these envs scores one answer)
and later ones are refused; ``submit_answer``'s reply says the answer was recorded and nothing of
whether it is right. No answer scores 0. A submitted answer is scored as the reply
``\boxed{<answer>}`` (as given when it holds a ``\boxed{`` already), the form every built-in
task's verifier reads first. `SolveEnvironment` and `CodeEnvironment` step a real
``math/solve-v0`` / ``math/code-v0`` env with the reply (a program is sent as a ```python
block), so the reward is that env's (its clipping, its answer rule, its verifier);
`ToolEnvironment` scores the answer with the task's verifier as ``math/tool-v0`` scores an
executor's answer.

``run_python`` and ``run_program`` run a program in `envs.sandbox` with ``math/tool-v0``'s
limits (the env's ``sandbox`` option; default `envs.program.DEFAULT_SANDBOX`: 5 s wall, 5 s CPU,
512 MiB, 16 KiB of output) and return the run's status and output, clipped to
``max_output_chars``; `ToolEnvironment` runs at most ``max_runs`` programs an episode. Model
output is untrusted: an argument of the wrong type or size gets a refusal or is read as text,
never an exception, and a program's failure is its output; TRL itself answers an unknown tool
name or a wrong argument name with an ``{"error": ...}`` tool message.

The dataset (`trl_environment`): a conversational ``prompt`` (the task's instruction for the
env's tools, then the problem) and ``problem_id``, one row per problem of the env's task, as
`trainers.load_environment` takes them (the task's ``split``, the train split of the
procedural tasks unless told otherwise; ``train_problems`` the first n, or given ids); TRL
shuffles it (``shuffle_dataset``). ``reset`` pins the row's problem by id, or takes a user's
own ``question`` and ``answer`` columns. The reference answer is in no prompt.

Not here: the multi-agent envs. ``environment_factory`` plays one conversation per rollout and
scores it once; ``math/reflection-v0``, ``math/debate-v0`` and ``math/ensemble-v0`` have
several roles played by one model, in a set turn order, each turn with its own prompt and
reward. `trainers.load_environment` (a ``rollout_func``) trains those on a stock
`GRPOTrainer`.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, NamedTuple

import envs
from envs.code import code_prompt
from envs.core import clip
from envs.program import extract_code
from envs.sandbox import run_code
from envs.tasks import prompts
from envs.tasks.sources import chosen_problems

SUBMIT_RULE = (
    "Submit your final answer with the submit_answer tool: only a submitted answer is scored, "
    "and only the first submission counts."
)
TOOL_INSTRUCTION = (
    "You solve math problems and may compute with Python: call the run_python tool with a "
    "program (standard library only, a few seconds, no files or network) and read what it "
    "prints. " + SUBMIT_RULE + " Answer format: {answer_format}"
)
CODE_INSTRUCTION = (
    "You solve math problems by writing one Python program and running it with the run_program "
    "tool (standard library only, a few seconds, no files or network). The last line it prints "
    "is your answer, so end by printing only the final answer; only the first program counts. "
    "Answer format: {answer_format}"
)
# The keyword arguments that build an env's task: instances made by one factory share the task
# built once (a procedural or hub task takes seconds to build, and TRL makes one env a rollout).
TASK_BUILD_KEYS = ("task", "data_path", "split", "verifier", "task_kwargs")


def as_response(answer: str) -> str:
    r"""The reply a submitted answer is scored as: ``\boxed{answer}``, or the answer as given
    when it holds a ``\boxed{`` already."""
    return answer if "\\boxed{" in answer else f"\\boxed{{{answer.strip()}}}"


def _as_text(value: Any) -> str:
    """A tool argument as text: model output may give a number, a list or null for a str."""
    return value if isinstance(value, str) else ("" if value is None else str(value))


class TaskEnvironment:
    """A single-agent env of this package in TRL's environment shape (the module docstring).

    Subclasses name their env (`env_id`) and system instruction (`instruction`, a template of
    ``{solver_instruction}`` and ``{answer_format}``), and add the tools. TRL makes every public
    function of the class a tool, so nothing else here is public but `reset` and `get_reward`.

    Args:
        **env_kwargs: the env's own arguments (``task``, ``split``, ``verifier``, ...), as
            `envs.make` takes them.

    Attributes:
        env: the raw PettingZoo env (`envs.make(env_id, wrapped=False)`).
        answer (`str | None`): the submitted answer (or program) of this episode, None before.
        reward (`float`): its score (0 with no answer).
        info (`dict`): the verdict of the answer (``extracted``, ``correct``, ``reason``...).
    """

    env_id: ClassVar[str]
    instruction: ClassVar[str]

    def __init__(self, **env_kwargs: Any) -> None:
        self.env: Any = envs.make(self.env_id, wrapped=False, **env_kwargs)
        self.answer: str | None = None
        self.reward = 0.0
        self.info: dict[str, Any] = {}
        self._live = False

    def reset(
        self,
        problem_id: str | None = None,
        question: str | None = None,
        answer: str | None = None,
        **row: Any,
    ) -> None:
        """Start an episode on the row's problem: its ``problem_id`` (a problem of the env's
        task), else its ``question`` and reference ``answer``. The row's ``prompt`` poses it;
        other columns are ignored.

        Raises:
            ValueError: the row has neither.
            KeyError: no problem of the task has this id.
        """
        if problem_id is not None:
            options: dict[str, Any] = {"problem_id": str(problem_id)}
        elif question is not None and answer is not None:
            pid = str(row.get("id", "row"))
            options = {"problem": {"id": pid, "question": str(question), "answer": str(answer)}}
        else:
            raise ValueError(
                f"{type(self).__name__}.reset needs a row with a 'problem_id' column (as "
                "trl_environment's dataset has) or 'question' and 'answer' columns; got "
                f"columns {sorted(row)}"
            )
        self.env.reset(options=options)
        self.answer, self.reward, self.info = None, 0.0, {}
        self._live = True
        self._start()

    def get_reward(self) -> float:
        """The score of the submitted answer; 0 when none was submitted."""
        return self.reward

    def _start(self) -> None:
        """Per-episode state of a subclass, after `reset`."""

    def _refuse_code(self, code: Any) -> str:
        """A code tool's answer before any run: an error when no problem is posed or `code` is
        not a str, else ""."""
        if not self._live:
            return "error: no problem is posed yet"
        if not isinstance(code, str):
            return f"error: code must be a string of Python source, got {type(code).__name__}"
        return ""

    def _play(self, reply: str) -> tuple[float, dict[str, Any]]:
        """Take the env's one turn with `reply`: its reward, and its full info (the trainer's
        record, `turn_results`)."""
        agent = self.env.agent_selection
        self.env.step(reply)  # the env's own turn: clipping, verifier, reward
        return float(self.env.rewards[agent]), dict(self.env.turn_results[-1]["infos"][agent])


class AnswerEnvironment(TaskEnvironment):
    """A `TaskEnvironment` whose model submits its answer with the `submit_answer` tool;
    subclasses score the reply it makes (`_score`)."""

    def submit_answer(self, answer: str) -> str:
        r"""Submit the final answer to the problem. Only the first submission counts.

        Args:
            answer: The final answer alone, for example 42 or \frac{1}{2}.

        Returns:
            Whether the answer was recorded.
        """
        if not self._live:
            return "error: no problem is posed yet"
        if self.answer is not None:
            return "error: an answer was already submitted; only the first submission counts"
        self.answer = _as_text(answer)
        self.reward, self.info = self._score(as_response(self.answer))
        return "Answer recorded."

    def _score(self, response: str) -> tuple[float, dict[str, Any]]:
        """The reward of a submitted reply and its verdict's info."""
        raise NotImplementedError


class SolveEnvironment(AnswerEnvironment):
    """``math/solve-v0`` as a TRL environment: a submitted answer is the solver's one turn."""

    env_id = "math/solve-v0"
    instruction = "{solver_instruction} " + SUBMIT_RULE

    def _score(self, response: str) -> tuple[float, dict[str, Any]]:
        return self._play(response)


class ToolEnvironment(AnswerEnvironment):
    """``math/tool-v0``'s executor alone as a TRL environment: Python runs in its sandbox.

    Args:
        max_runs (`int`, 8): programs an episode may run; later calls are refused.
        **env_kwargs: ``math/tool-v0``'s arguments (``task``, ``sandbox``,
            ``max_output_chars``, ...); its team options (rounds, rewards) do not apply.
    """

    env_id = "math/tool-v0"
    instruction = TOOL_INSTRUCTION

    def __init__(self, *, max_runs: int = 8, **env_kwargs: Any) -> None:
        if not isinstance(max_runs, int) or isinstance(max_runs, bool) or max_runs < 1:
            raise ValueError(f"max_runs must be an int >= 1, got {max_runs!r}")
        super().__init__(**env_kwargs)
        self.max_runs = max_runs
        self.runs = 0

    def _start(self) -> None:
        self.runs = 0

    def run_python(self, code: str) -> str:
        """Run a Python program and return what it prints.

        The program runs in a sandbox: standard library only, no files or network, a few
        seconds and limited memory; long output is cut.

        Args:
            code: The Python program; it should print the values you want to see.

        Returns:
            The run's status line, then its standard output and standard error.
        """
        refused = self._refuse_code(code)
        if refused:
            return refused
        limit = self.env.max_action_chars
        if len(code) > limit:
            return f"error: the program is {len(code)} characters long; the limit is {limit}"
        if self.runs >= self.max_runs:
            return f"error: the limit of {self.max_runs} programs per problem is reached"
        self.runs += 1
        program = extract_code(code)[0]  # a program sent in ```python fences runs as well
        return run_code(program, self.env.sandbox).observation(self.env.max_output_chars)

    def _score(self, response: str) -> tuple[float, dict[str, Any]]:
        # tool-v0's executor answer: clipped to the action bound, scored by the task's verifier
        text = clip(response, self.env.max_action_chars)
        verdict = self.env.verifier.verify(text, self.env.problem["answer"])
        info = {
            "problem_id": self.env.problem["id"],
            "extracted": verdict.extracted,
            "correct": verdict.correct,
            "score": verdict.score,
            "reason": verdict.reason,
        }
        return float(verdict.score), info


class CodeEnvironment(TaskEnvironment):
    """``math/code-v0`` as a TRL environment: the model's one program, sent to `run_program`,
    is its answer, run and scored as code-v0 runs and scores its executor's reply."""

    env_id = "math/code-v0"
    instruction = CODE_INSTRUCTION

    def run_program(self, code: str) -> str:
        """Run the Python program that answers the problem. Only the first program counts.

        The program runs in a sandbox: standard library only, no files or network, a few
        seconds and limited memory. The last line it prints is the answer.

        Args:
            code: The Python program; it must end by printing only the final answer.

        Returns:
            The run's status line, then its standard output and standard error.
        """
        refused = self._refuse_code(code)
        if refused:
            return refused
        reply = code if "```" in code else f"```python\n{code}\n```"  # no prose to score
        limit = self.env.max_action_chars
        if len(reply) > limit:
            return f"error: the program is {len(code)} characters long; the limit is {limit}"
        if self.answer is not None:
            return "error: a program was already run; only the first program counts"
        self.answer = code
        self.reward, self.info = self._play(reply)
        # code-v0's transcript holds the reply, then "[execution]" and the run as it shows it
        return self.env.turns[-1][1].rpartition("\n\n[execution]\n")[2]


TRL_ENVIRONMENTS: dict[str, type[TaskEnvironment]] = {
    SolveEnvironment.env_id: SolveEnvironment,
    ToolEnvironment.env_id: ToolEnvironment,
    CodeEnvironment.env_id: CodeEnvironment,
}
# The user message of each env's prompt: the env's own (a system message states the tools).
USER_PROMPTS: dict[str, Callable[[str], str]] = {
    "math/solve-v0": prompts.solve_prompt,
    "math/tool-v0": prompts.solve_prompt,
    "math/code-v0": code_prompt,
}


class TRLEnvironment(NamedTuple):
    """What `trl_environment` returns: ``dataset, factory = trl_environment(...)``."""

    dataset: Any  # a datasets.Dataset
    environment_factory: Callable[[], TaskEnvironment]


def prompt_messages(cls: type[TaskEnvironment], task: envs.Task, question: str) -> list[dict]:
    """The conversational prompt of a problem in env class `cls`: the system instruction (the
    task's solver instruction and answer format, and the env's tools), then the problem."""
    system = cls.instruction.format(
        solver_instruction=task.instruction("solver"), answer_format=task.answer_format
    )
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": USER_PROMPTS[cls.env_id](question)},
    ]


def trl_environment(
    env_id: str = "math/solve-v0",
    *,
    train_problems: int | Sequence[str] | None = None,
    **env_kwargs: Any,
) -> TRLEnvironment:
    """A single-agent env, ready for ``GRPOTrainer(train_dataset=..., environment_factory=...)``.

    ::

        dataset, factory = trl_environment("math/solve-v0", task="arithmetic")
        GRPOTrainer(model=model, args=args, train_dataset=dataset,
                    environment_factory=factory).train()

    Args:
        env_id (`str`, "math/solve-v0"): ``math/solve-v0``, ``math/tool-v0`` (its executor
            alone, with a Python tool) or ``math/code-v0`` (`TRL_ENVIRONMENTS`); the
            multi-agent envs train through `trainers.load_environment`.
        train_problems (`int | Sequence[str]`, None): the first n problems of the task, the
            given ids, or all.
        **env_kwargs: the env's arguments (``task``, ``split``, ``verifier``, ...; for
            ``math/tool-v0`` also ``sandbox``, ``max_output_chars`` and `ToolEnvironment`'s
            ``max_runs``).

    Returns:
        `TRLEnvironment`: a `datasets.Dataset` (``prompt``, ``problem_id``) and a factory of
        environments sharing one task.

    Raises:
        ValueError: an env id with no TRL environment, or no problems.
    """
    from datasets import Dataset  # envs imports datasets lazily

    cls = TRL_ENVIRONMENTS.get(env_id)
    if cls is None:
        envs.spec(env_id)  # an unknown id raises with its "did you mean"
        raise ValueError(
            f"{env_id} has several roles, so it does not fit environment_factory (one "
            f"conversation a rollout); train it with trainers.load_environment({env_id!r}). "
            f"TRL environments: {sorted(TRL_ENVIRONMENTS)}"
        )
    probe = cls(**env_kwargs)
    task = probe.env.task
    problems = chosen_problems(task.source, train_problems)
    if not problems:
        raise ValueError("no training problems: pass train_problems as a count >= 1 or ids")
    rows = [
        {"prompt": prompt_messages(cls, member_task(task, p), p["question"]), "problem_id": p["id"]}
        for p in problems
    ]
    shared = {k: v for k, v in env_kwargs.items() if k not in TASK_BUILD_KEYS}
    factory = functools.partial(cls, **shared, task=task)
    return TRLEnvironment(Dataset.from_list(rows), factory)


def member_task(task: envs.Task, problem: Any) -> envs.Task:
    """The task whose instruction poses `problem`: its member's, in a mixed task
    (`envs.tasks.mixed`)."""
    member_of = getattr(task, "member_of", None)
    return member_of(problem) if member_of is not None else task


def trl_environments(
    members: Mapping[str, tuple[str, Mapping[str, Any]]],
    *,
    train_problems: int | None = None,
) -> TRLEnvironment:
    """Several single-agent envs (or one env on several tasks) in one run, as TRL's dict
    ``environment_factory`` takes them: each row's ``environment`` names its member.

    ::

        dataset, factories = trl_environments({
            "unknown": ("math/solve-v0", {"task": "unknown"}),
            "arithmetic": ("math/code-v0", {"task": "arithmetic"}),
        }, train_problems=300)
        GRPOTrainer(model=model, args=args, train_dataset=dataset,
                    environment_factory=factories).train()

    Each member plays its own env class, a subclass named after the member
    (``SolveEnvironment_unknown``), so TRL logs each member's reward on its own
    (``rewards/SolveEnvironment_unknown/mean``). The rows are interleaved, one of each member in
    turn, so every batch holds all of them.

    Args:
        members: member name -> (env id, its `trl_environment` kwargs).
        train_problems (`int`, None): problems of each member (None: all of each).

    Raises:
        ValueError: no members, or a name that is not an identifier.
    """
    from datasets import Dataset

    if not members:
        raise ValueError("trl_environments needs at least one member: {name: (env_id, kwargs)}")
    rows: list[list[dict[str, Any]]] = []
    factories: dict[str, Callable[[], TaskEnvironment]] = {}
    for name, (env_id, kwargs) in members.items():
        if not str(name).isidentifier():
            raise ValueError(
                f"member name {name!r} must be an identifier (it names its env class in TRL's "
                "logs), e.g. 'unknown' or 'code_arithmetic'"
            )
        dataset, factory = trl_environment(env_id, train_problems=train_problems, **kwargs)
        cls = factory.func  # type: ignore[attr-defined]
        own = type(f"{cls.__name__}_{name}", (cls,), {"__doc__": f"{cls.__name__} of {name!r}."})
        factories[name] = functools.partial(own, *factory.args, **factory.keywords)  # type: ignore[attr-defined]
        rows.append([{**row, "environment": name} for row in dataset])
    mixed = [row for group in itertools.zip_longest(*rows) for row in group if row is not None]
    return TRLEnvironment(Dataset.from_list(mixed), factories)  # type: ignore[arg-type]
