"""Role instructions and user-message templates shared by the environments.

`{answer_format}` in an instruction is filled from the task (for example "give the final answer
as \\boxed{...}"). Tasks may override any role's instruction.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

SOLVER = "You are a careful problem solver. Reason step by step, then {answer_format}"
CRITIC = (
    "You are a strict reviewer. Check the proposed solution step by step. Point out the first "
    "error if there is one. End with exactly one line 'Verdict: correct' or 'Verdict: incorrect'."
)
REFINER = (
    "You revise solutions. Read the problem, the latest solution and the reviewer's feedback, "
    "fix any error, and write a complete corrected solution; {answer_format}"
)
DEBATER = (
    "You are one of several agents solving the same problem. Reason step by step; when other "
    "agents' answers are shown, weigh them critically and keep or change your answer. "
    "{answer_format}"
)
# Instruction variants of the ensemble env (one per agent, cycled when K exceeds the list).
VARIANTS = (
    "Solve the problem step by step. {answer_format}",
    (
        "Solve the problem by writing one equation per sentence, then check the result by "
        "working backwards. {answer_format}"
    ),
    (
        "Restate what is asked in one sentence, list the known quantities, then compute. "
        "{answer_format}"
    ),
    (
        "Solve the problem twice by two different methods and report the answer they agree "
        "on. {answer_format}"
    ),
)

# Roles of the tool env (math/tool-v0): plan, program, check.
ANALYZER = (
    "You plan the solution of a math problem for a programmer. List the known quantities, "
    "what is asked and the steps of the computation, in a few short lines. Do not write code."
)
EXECUTOR = (
    "You solve math problems by writing one Python program in a ```python code block. It is "
    "run (standard library only, a few seconds, no files or network) and the last line it "
    "prints is taken as the answer: end by printing only the final answer. Follow the plan; "
    "when a previous program, its output and feedback are shown, fix the program."
)
PROGRAM_VERIFIER = (
    "You check a Python program written to solve a math problem, using the plan, the program "
    "and its output. Point out the first error in the program or its output if there is one. "
    "End with exactly one line 'Verdict: correct' or 'Verdict: incorrect'."
)

DEFAULT_INSTRUCTIONS: Mapping[str, str] = {
    "solver": SOLVER,
    "critic": CRITIC,
    "refiner": REFINER,
    "debater": DEBATER,
    "analyzer": ANALYZER,
    "executor": EXECUTOR,
    "verifier": PROGRAM_VERIFIER,
}


@dataclass(frozen=True)
class Asks:
    """The line that ends each role's user message, in one prompt style (`ASKS`).
    ``{answer_format}`` is filled from the task."""

    solve: str
    review: str
    revise: str


ASKS: Mapping[str, Asks] = {
    # The texts the embedded model was trained on; the format is asked in the system message.
    "default": Asks("Solve the problem.", "Review the solution.", "Write the corrected solution."),
    # A small pretrained instruct model (SmolLM2-135M-Instruct) follows the user message's last
    # line, not the system message: asked there, its answers end in the format and its reviews
    # state a verdict (docs/real-model.md has the measurements that chose these).
    "instruct": Asks(
        "Solve the problem in a few short steps, then {answer_format}",
        "Is the proposed solution correct? Reply with one word: correct or incorrect.",
        "Write the corrected solution in a few short steps, then {answer_format}",
    ),
}


def problem_block(question: str) -> str:
    return f"Problem:\n{question}"


def solve_prompt(question: str, ask: str = ASKS["default"].solve) -> str:
    return f"{problem_block(question)}\n\n{ask}"


def critic_prompt(
    question: str, answer: str, answer_first: bool = False, ask: str = ASKS["default"].review
) -> str:
    """A reviewer's prompt: the problem, then the answer (`answer_first`: the answer first, so
    each piece of the problem is checked against it where it stands; `envs.tasks.Task`'s
    ``review_first``), then `ask`."""
    if answer_first:
        return f"Proposed solution:\n{answer}\n\n{problem_block(question)}\n\n{ask}"
    return f"{problem_block(question)}\n\nProposed solution:\n{answer}\n\n{ask}"


PATCH_ASK = "Write the patch: only what changes."


def refiner_prompt(
    question: str, answer: str, feedback: str, ask: str = ASKS["default"].revise
) -> str:
    """A refiner's prompt; `ask` ends it (`PATCH_ASK` for a refiner that patches)."""
    return (
        f"{problem_block(question)}\n\nLatest solution:\n{answer}\n\nReviewer feedback:\n"
        f"{feedback}\n\n{ask}"
    )


def debate_prompt(question: str, own: str | None, others: Mapping[str, str]) -> str:
    if own is None:
        return solve_prompt(question)
    shown = "\n\n".join(f"{agent}:\n{text}" for agent, text in others.items())
    return (
        f"{problem_block(question)}\n\nYour previous answer:\n{own}\n\nThe other agents "
        f"answered:\n{shown}\n\nGive your updated solution."
    )


def analyze_prompt(question: str) -> str:
    return f"{problem_block(question)}\n\nWrite the plan."


def executor_prompt(
    question: str,
    plan: str,
    code: str | None = None,
    output: str | None = None,
    feedback: str | None = None,
) -> str:
    parts = [problem_block(question), f"Plan:\n{plan}"]
    if code is None:
        parts.append("Write the Python program.")
    else:
        parts += [
            f"Previous program:\n```python\n{code}\n```",
            f"Its output:\n{output}",
            f"Reviewer feedback:\n{feedback}",
            "Write the corrected Python program.",
        ]
    return "\n\n".join(parts)


def program_review_prompt(
    question: str, plan: str, code: str, output: str, answer: str | None
) -> str:
    """The verifier's prompt: the program, its run and the answer the task scores (as
    ``\\boxed{}``, the form every other role reads answers in; ``none`` when it gave none)."""
    shown = "none" if answer is None else f"\\boxed{{{answer}}}"
    return (
        f"{problem_block(question)}\n\nPlan:\n{plan}\n\nProgram:\n```python\n{code}\n```"
        f"\n\nIts output:\n{output}\n\nIts answer: {shown}\n\nReview the program and its answer."
    )
