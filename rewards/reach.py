"""The ``reach`` verifier: a chain of steps that reaches a target from given numbers, in order.

A ``reach`` problem (`envs.tasks.reach`) gives numbers and a target; the answer is a chain of steps,
each the running value, an operator (``+``, ``-`` or ``*``) and the next given number, with its
result, the last result being the target::

    \\boxed{3 * 4 = 12, 12 + 8 = 20}

The reference is the problem's own right chain, from which the verifier reads the numbers (the
first step's left operand and every step's right operand) and the target (the last result). A
response scores 1 only when its last ``\\boxed{}`` holds a chain that

- uses exactly the given numbers, each once, in the given order (the multiset and more: the
  order is part of the puzzle), every step starting from the previous step's result;
- states every result exactly (integers, no partial credit, no rounding);
- ends at the target;

and 0 otherwise, with the first thing that failed as the reason. Nothing of the response is
evaluated as code: each step is matched by one anchored regular expression of bounded size and
computed with Python integers, whose sizes are bounded by `MAX_DIGITS` (so a 10,000-digit
product cannot stall a step). The target itself (``\\boxed{20}``), a chain over other numbers
(reasoning-gym's 24-game accepts ``4*6*1*1`` for any puzzle) or a chain that skips or repeats a
number scores 0.

Votes: `Verdict.extracted` is the chain re-written in one spelling (``3 * 4 = 12, 12 + 8 = 20``,
``×``, ``\\times`` and ``\\cdot`` read as ``*``), so two answers vote together exactly when they
state the same steps. A generated problem has one right chain (`envs.tasks.reach` keeps only
those), so every right answer votes together.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rewards.base import Verdict
from rewards.extract import find_boxed, sanitize
from rewards.screen import check_reference, not_a_string

__all__ = ["MAX_CHAIN_CHARS", "MAX_DIGITS", "Chain", "ReachVerifier", "apply", "parse_chain"]

MAX_DIGITS = 9  # operands and results: longer numbers are not read (bounds the arithmetic)
MAX_CHAIN_CHARS = 600  # a boxed chain longer than this is refused before any parsing
MAX_STEPS = 12
OPERATORS = {"+", "-", "*"}
_SPELLINGS = (("\\times", "*"), ("\\cdot", "*"), ("×", "*"), ("·", "*"), ("−", "-"), ("–", "-"))
_NUMBER = rf"-?\d{{1,{MAX_DIGITS}}}"
_STEP = re.compile(rf"\s*({_NUMBER})\s*([-+*])\s*({_NUMBER})\s*=\s*({_NUMBER})\s*")
_SEPARATOR = re.compile(r"[,;\n]|\\\\")


def apply(left: int, op: str, right: int) -> int:
    """``left op right`` for op in ``+ - *``."""
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    if op == "*":
        return left * right
    raise ValueError(f"operator {op!r}; expected one of + - *")


@dataclass(frozen=True)
class Chain:
    """A parsed chain: ``steps`` as (left, op, right, stated result)."""

    steps: tuple[tuple[int, str, int, int], ...]

    @property
    def numbers(self) -> list[int]:
        """The given numbers the chain uses, in order: the first left operand, then each right."""
        return [self.steps[0][0], *(right for _, _, right, _ in self.steps)]

    @property
    def end(self) -> int:
        return self.steps[-1][3]

    def text(self) -> str:
        """The chain in its one spelling (``3 * 4 = 12, 12 + 8 = 20``)."""
        return ", ".join(f"{a} {op} {b} = {r}" for a, op, b, r in self.steps)

    def fault(self, numbers: list[int] | None = None, target: int | None = None) -> str | None:
        """What makes the chain wrong against `numbers` and `target` (each checked when given),
        or None when it is right."""
        if numbers is not None and len(self.steps) != len(numbers) - 1:
            return f"{len(self.steps)} steps; {len(numbers)} numbers need {len(numbers) - 1}"
        for i, (left, op, right, result) in enumerate(self.steps):
            if i == 0:
                if numbers is not None and left != numbers[0]:
                    return f"step 1 starts from {left}, not the first number {numbers[0]}"
            elif left != self.steps[i - 1][3]:
                prev = self.steps[i - 1][3]
                return f"step {i + 1} starts from {left}, not the previous result {prev}"
            if numbers is not None and right != numbers[i + 1]:
                return f"step {i + 1} uses {right}, not the next number {numbers[i + 1]}"
            if apply(left, op, right) != result:
                return (
                    f"step {i + 1}: {left} {op} {right} is {apply(left, op, right)}, not {result}"
                )
        if target is not None and self.end != target:
            return f"the chain ends at {self.end}, not the target {target}"
        return None


def parse_chain(text: str) -> Chain | None:
    """The chain stated in `text` (the content of a ``\\boxed{}``), or None when it is not one:
    every part between separators (``,``, ``;``, a newline or ``\\\\``) must be one step
    ``a op b = r`` of integers of at most `MAX_DIGITS` digits."""
    if not isinstance(text, str) or len(text) > MAX_CHAIN_CHARS:
        return None
    for spelling, op in _SPELLINGS:
        text = text.replace(spelling, op)
    text = text.replace("$", "").replace("\\,", " ").replace("\\ ", " ")
    parts = [part for part in _SEPARATOR.split(text) if part.strip()]
    if not parts or len(parts) > MAX_STEPS:
        return None
    steps = []
    for part in parts:
        match = _STEP.fullmatch(part.strip().rstrip("."))
        if match is None:
            return None
        left, op, right, result = match.groups()
        steps.append((int(left), op, int(right), int(result)))
    return Chain(tuple(steps))


def read_reference(reference: object) -> tuple[Chain, list[int], int]:
    """The reference's chain, its numbers and its target; raises `ValueError` when the reference
    is not a right chain (a bad reference is the caller's error, not the model's)."""
    bare = check_reference(reference, ReachVerifier.name, prepare=False)
    chain = parse_chain(bare)
    if chain is None:
        raise ValueError(
            f"reach verifier: reference {bare!r:.80} is not a chain of steps such as "
            "'3 * 4 = 12, 12 + 8 = 20'"
        )
    fault = chain.fault()
    if fault is not None:
        raise ValueError(f"reach verifier: reference {bare!r:.80} is not a right chain: {fault}")
    return chain, chain.numbers, chain.end


class ReachVerifier:
    """Scores a chain of steps against a ``reach`` reference chain (the module docstring).

    Examples:
        >>> ReachVerifier().verify("\\\\boxed{3 * 4 = 12, 12 + 8 = 20}", "3 * 4 = 12, 12 + 8 = 20").score
        1.0
        >>> ReachVerifier().verify("\\\\boxed{20}", "3 * 4 = 12, 12 + 8 = 20").reason
        'not a chain of steps: 20'
    """

    name = "reach"

    def verify(self, response: str, reference: str) -> Verdict:
        """Score one response against one reference chain."""
        _, numbers, target = read_reference(reference)
        rejected = not_a_string(response)
        if rejected is not None:
            return rejected
        boxes = find_boxed(sanitize(response, 20 * MAX_CHAIN_CHARS))  # printable, bounded
        if not boxes:
            return Verdict(0.0, None, "no \\boxed{} chain of steps")
        chains = [parse_chain(box) for box in boxes]
        last, chain = boxes[-1].strip(), chains[-1]
        stated = {
            c.text() if c is not None else " ".join(b.split())
            for c, b in zip(chains, boxes, strict=True)
        }
        if len(stated) > 1:
            extracted = chain.text() if chain is not None else " ".join(last.split())[:200]
            return Verdict(0.0, extracted, f"hedges between {len(stated)} boxed answers")
        if chain is None:
            return Verdict(
                0.0, " ".join(last.split())[:200] or None, f"not a chain of steps: {last:.60}"
            )
        fault = chain.fault(numbers, target)
        if fault is not None:
            return Verdict(0.0, chain.text(), fault)
        return Verdict(1.0, chain.text(), "correct: the chain reaches the target")
