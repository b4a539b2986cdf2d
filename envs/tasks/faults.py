"""Named faults: a task whose answers can be checked piece by piece says which pieces are wrong.

A review that only says ``Verdict: incorrect`` tells the refiner that something is wrong, not
what. On a task with a sound local check (graph colouring: an edge whose two ends share a
colour) a critic can also *name* a fault (``BAD 1 2``), a refiner can *patch* it (``\\boxed{2
C}``: recolour one vertex) instead of rewriting the whole answer, and the verifier can play the
critic (the oracle critic: the ceiling of what any critic could add). A task declares this with
a `FaultModel` (`envs.tasks.Task.faults`); the reflection env reads it for

- the critic's fault bonus (``fault_bonus``: a rejection of a wrong answer that names a real
  fault earns the bonus on top of its verdict's pay; ``fault_rule`` "any" or "first"),
- the feedback forms the refiner is shown (``feedback``: the critic's text, its verdict alone,
  the verdict and its first named fault, or the verdict and every fault it named),
- the patching refiner (``refiner_mode="patch"``) and the oracle critic (``oracle_critic``).

Everything here reads model text as untrusted input: bounded, matched with anchored regular
expressions, never evaluated.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from envs.tasks.coloring import min_conflicts
from rewards.coloring import (
    MAX_COLORING_CHARS,
    clashes,
    coloring_text,
    parse_coloring,
    read_boxes,
    read_reference,
)

MAX_REVIEW_CHARS = 4000  # a review's tail read for named faults (as `parse_verdict` reads)
MAX_NAMED = 64  # named faults read from one review


@runtime_checkable
class FaultModel(Protocol):
    """What a task with named faults provides (every method total on untrusted text).

    - ``faults(answer, reference)``: the faults of an answer text, in the canonical spelling a
      critic names them in and in listed order (empty when the answer is right, or when it
      has no parseable body: then only the verdict can say so);
    - ``named(review)``: the faults a review names, canonical, in the order named;
    - ``patch(answer, reply, reference)``: the answer a refiner's reply makes of `answer`, or
      None when the reply is no patch (it then keeps `answer`);
    - ``spell(faults)``: the feedback text naming `faults` (``BAD 1 2``).
    """

    def faults(self, answer: str, reference: str) -> list[str]: ...

    def named(self, review: str) -> list[str]: ...

    def patch(self, answer: str, reply: str, reference: str) -> str | None: ...

    def spell(self, faults: Sequence[str]) -> str: ...


_BAD = re.compile(r"\bBAD\s+(\d{1,4})\s+(\d{1,4})\b")


def _edge(u: int, v: int) -> str:
    return f"{min(u, v)} {max(u, v)}"


def _boxed_coloring(text: str, n: int) -> dict[int, str] | None:
    """The colouring in the last ``\\boxed{}`` of `text`, partial or whole, or None."""
    boxes = read_boxes(text)
    if not boxes or len(boxes[-1]) > MAX_COLORING_CHARS:
        return None
    coloring, _ = parse_coloring(boxes[-1], n)
    return coloring


class ColoringFaults:
    """Named faults of graph colouring (`envs.tasks.coloring`): a fault is a clashing edge ``u v``
    (both ends one colour), named ``BAD u v``; a patch is a partial colouring (``\\boxed{2
    C}``) laid over the latest answer's colouring."""

    def faults(self, answer: str, reference: str) -> list[str]:
        instance = read_reference(reference)
        coloring = _boxed_coloring(answer, instance.n)
        if coloring is None:
            return []
        return [_edge(u, v) for u, v in clashes(instance, coloring)]

    def named(self, review: str) -> list[str]:
        if not isinstance(review, str):
            return []
        found = _BAD.findall(review[-MAX_REVIEW_CHARS:])[:MAX_NAMED]
        return list(dict.fromkeys(_edge(int(u), int(v)) for u, v in found))

    def patch(self, answer: str, reply: str, reference: str) -> str | None:
        instance = read_reference(reference)
        changes = _boxed_coloring(reply, instance.n) if isinstance(reply, str) else None
        if not changes:
            return None
        coloring = _boxed_coloring(answer, instance.n) or {}
        return f"\\boxed{{{coloring_text({**coloring, **changes})}}}"

    def spell(self, faults: Sequence[str]) -> str:
        return ", ".join(f"BAD {fault}" for fault in faults)

    def repair(self, answer: str, fault: str, reference: str) -> str:
        """The scripted refiner's reply to `fault` (``u v``) named in `answer`: the min-conflicts
        patch (`envs.tasks.coloring.min_conflicts`, ``\\boxed{2 C}``), or ``Keep.`` when there
        is nothing to patch (no colouring, an edge that is no clash, both ends given)."""
        instance = read_reference(reference)
        coloring = _boxed_coloring(answer, instance.n) if isinstance(answer, str) else None
        words = fault.split() if isinstance(fault, str) else []
        if coloring is None or len(words) != 2 or not all(w.isdigit() for w in words):
            return "Keep."
        u, v = int(words[0]), int(words[1])
        if (min(u, v), max(u, v)) not in instance.edges or coloring.get(u) != coloring.get(v):
            return "Keep."
        given = {vertex for vertex, _ in instance.fixed}
        patch = min_conflicts(instance.edges, given, coloring, (u, v), instance.palette)
        return "Keep." if patch is None else f"\\boxed{{{patch[0]} {patch[1]}}}"


def feedback_text(
    form: str, verdict: bool | None, review: str, named: Sequence[str], model: FaultModel | None
) -> str:
    """What the refiner is shown of a review under feedback `form` ("full": the review as
    written; "verdict": its verdict line alone; "fault": the verdict and the first fault it
    named; "faults": the verdict and every fault it named). A task without named faults, or a
    review with no verdict, shows the review as written."""
    if form == "full" or verdict is None or model is None:
        return review
    line = f"Verdict: {'correct' if verdict else 'incorrect'}"
    shown = [] if form == "verdict" or verdict else list(named[: 1 if form == "fault" else None])
    return f"{model.spell(shown)}. {line}" if shown else line


def oracle_review(faults: Sequence[str], correct: bool, model: FaultModel | None) -> str:
    """The review the verifier writes as the oracle critic: its verdict and, on a rejection,
    every fault of the answer (the feedback form then shapes what the refiner sees)."""
    if correct:
        return "OK. Verdict: correct"
    if model is not None and faults:
        return f"{model.spell(faults)}. Verdict: incorrect"
    return "Verdict: incorrect"
