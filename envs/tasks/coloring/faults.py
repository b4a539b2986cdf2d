"""Named faults of graph colouring (`envs.tasks.faults`): a fault is a clashing edge ``u v``,
named ``BAD u v``; a patch is a partial colouring laid over the latest answer's; the scripted
repair is the min-conflicts patch (`generate.min_conflicts`)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from envs.tasks.coloring.generate import min_conflicts
from envs.tasks.coloring.verifier import (
    MAX_COLORING_CHARS,
    clashes,
    coloring_text,
    parse_coloring,
    read_boxes,
    read_reference,
)
from envs.tasks.faults import MAX_NAMED, MAX_REVIEW_CHARS

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
    """Named faults of graph colouring (`envs.tasks.coloring.generate`): a fault is a clashing edge ``u v``
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
        patch (`generate.min_conflicts`, ``\\boxed{2 C}``), or ``Keep.`` when there
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
