"""Named faults: a task whose answers can be checked piece by piece says which pieces are wrong.

A review that only says ``Verdict: incorrect`` tells the refiner that something is wrong, not
what. On a task with a sound local check (a task family's faults, `envs.tasks.family`: an
edge whose two ends share a colour, in graph colouring) a critic can also *name* a fault (``BAD 1 2``), a refiner can *patch* it (``\\boxed{2
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

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

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
