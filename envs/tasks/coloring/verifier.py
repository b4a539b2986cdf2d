"""The ``coloring`` verifier: a proper colouring of a graph, given colours respected.

A ``coloring`` problem (`envs.tasks.coloring`) gives a graph on vertices ``0..n-1``, a palette and
two fixed colours; the answer names every vertex with its colour, in any order::

    \\boxed{0 A 1 B 2 A 3 C}

The reference carries what the check needs, in three parts separated by ``|``: the problem's
own solution (every vertex in order with its colour), the edges (``u v``, ``u < v``, sorted) and
the fixed colours::

    0 A 1 B 2 A 3 C | 0 3, 0 5, 1 2, 2 3 | 0 A, 3 B

The palette is the set of colours the solution uses. A response scores 1 only when its last
``\\boxed{}`` holds a complete proper colouring:

- ``vertex colour`` pairs and nothing else (separators: whitespace and commas), every vertex
  ``0..n-1`` exactly once;
- every colour from the palette, every fixed colour as given;
- every edge joining two different colours;

and 0 otherwise, with the first thing that failed as the reason (a clash names the first
clashing edge in listed order: ``clash on edge 1 2 (both B)``). No partial credit. The givens
copied back (the fixed colours ``0 A 3 B`` alone, or the edge list), a colouring with a fourth
colour, a partial colouring and a second different box (a hedge) all score 0. The box is
refused past `MAX_COLORING_CHARS` characters before any parsing, and parsing is one linear
scan; nothing of the response is evaluated.

Votes: `Verdict.extracted` is the parsed colouring in one spelling, vertices sorted
(``0 A 1 B 2 C``), so two answers vote together exactly when they state the same colouring.
The fixed colours make a generated problem's proper colouring unique (`envs.tasks.coloring` keeps
only graphs with one colouring up to renaming), so every right answer votes together.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from rewards.base import Verdict
from rewards.extract import find_boxed, sanitize
from rewards.verifiers import check_reference, not_a_string

__all__ = [
    "MAX_COLORING_CHARS",
    "MAX_VERTICES",
    "ColoringVerifier",
    "Instance",
    "clashes",
    "coloring_text",
    "parse_coloring",
    "read_boxes",
    "read_reference",
    "reference_text",
]

MAX_COLORING_CHARS = 600  # a boxed colouring longer than this is refused before any parsing
MAX_VERTICES = 64  # a reference graph larger than this is refused
MAX_REFERENCE_CHARS = 20_000  # bounds the reference's parse (references are data, not model text)
_VERTEX_DIGITS = 3  # a vertex number longer than this is not read
# One linear scan: a digit run, a letter run, a separator run, or any other character.
_TOKEN = re.compile(r"([0-9]+)|([A-Za-z]+)|([\s,]+)|(.)", re.DOTALL)


@dataclass(frozen=True)
class Instance:
    """A colouring problem as the reference states it.

    Args:
        n: the vertices are ``0..n-1``.
        edges: ``(u, v)`` with ``u < v``, in listed (sorted) order.
        palette: the colours the solution uses, sorted.
        fixed: ``(vertex, colour)`` pairs the answer must respect.
        solution: ``solution[v]`` is vertex v's colour.
    """

    n: int
    edges: tuple[tuple[int, int], ...]
    palette: tuple[str, ...]
    fixed: tuple[tuple[int, str], ...]
    solution: tuple[str, ...]

    def text(self) -> str:
        """The solution in the answer's spelling (``0 A 1 B 2 C``)."""
        return coloring_text(dict(enumerate(self.solution)))


def coloring_text(colouring: Mapping[int, str]) -> str:
    """`colouring` in one spelling: ``vertex colour`` pairs, vertices sorted (``0 A 1 B 2 C``)."""
    return " ".join(f"{v} {colouring[v]}" for v in sorted(colouring))


def reference_text(instance: Instance) -> str:
    """The reference spelling of `instance`: ``solution | edges | fixed colours``
    (``0 A 1 B 2 A 3 C | 0 3, 0 5, 1 2, 2 3 | 0 A, 3 B``); `read_reference` reads it back."""
    edges = ", ".join(f"{u} {v}" for u, v in instance.edges)
    fixed = ", ".join(f"{v} {c}" for v, c in instance.fixed)
    return f"{instance.text()} | {edges} | {fixed}"


def parse_coloring(text: str, n: int) -> tuple[dict[int, str] | None, str]:
    """The ``vertex colour`` pairs stated in `text` (the inside of a box, or a bare
    ``0 A 1 B`` string) as vertex -> colour, or None and the reason.

    Pairs are a vertex number in ``0..n-1`` followed by a one-letter colour; whitespace and
    commas separate them and nothing else may appear. A vertex may appear once. Completeness and
    the palette are the caller's to check.
    """
    if not isinstance(text, str):
        return None, f"not a colouring: a {type(text).__name__}, not text"
    if len(text) > MAX_COLORING_CHARS:
        return None, f"not a colouring: {len(text)} characters (at most {MAX_COLORING_CHARS})"
    colouring: dict[int, str] = {}
    vertex: int | None = None
    for match in _TOKEN.finditer(text):
        digits, letters, separator, other = match.groups()
        if separator is not None:
            continue
        if other is not None:
            return None, f"not vertex-colour pairs: {other!r} in {text.strip()!r:.60}"
        if digits is not None:
            if vertex is not None:
                return None, f"not vertex-colour pairs: vertex {vertex} has no colour"
            if len(digits) > _VERTEX_DIGITS or int(digits) >= n:
                return None, f"vertex {digits:.8} is not one of 0..{n - 1}"
            vertex = int(digits)
            if vertex in colouring:
                return None, f"vertex {vertex} appears twice"
            continue
        if vertex is None or len(letters) != 1:
            return None, f"not vertex-colour pairs: {letters!r:.20} in {text.strip()!r:.60}"
        colouring[vertex] = letters
        vertex = None
    if vertex is not None:
        return None, f"not vertex-colour pairs: vertex {vertex} has no colour"
    if not colouring:
        return None, "not a colouring: no vertex-colour pairs"
    return colouring, ""


def clashes(instance: Instance, colouring: Mapping[int, str]) -> list[tuple[int, int]]:
    """The edges of `instance` whose two ends share a colour in `colouring`, in listed (sorted)
    order; an edge with an uncoloured end is skipped."""
    found = []
    for u, v in instance.edges:
        cu, cv = colouring.get(u), colouring.get(v)
        if cu is not None and cu == cv:
            found.append((u, v))
    return found


def _bad_reference(bare: str, why: str) -> ValueError:
    return ValueError(
        f"coloring verifier: reference {bare!r:.80} is not 'solution | edges | fixed colours' "
        f"such as '0 A 1 B 2 A | 0 1, 1 2 | 0 A, 1 B': {why}"
    )


def _number(word: str) -> int | None:
    """`word` as a vertex number (ASCII digits, at most `_VERTEX_DIGITS`), else None."""
    if word.isascii() and word.isdigit() and len(word) <= _VERTEX_DIGITS:
        return int(word)
    return None


def _read_pairs(part: str, bare: str, what: str) -> list[tuple[str, str]]:
    """The comma-separated ``x y`` pairs of one reference part (empty part: no pairs)."""
    pairs = []
    for item in filter(None, (p.strip() for p in part.split(","))):
        words = item.split()
        if len(words) != 2:
            raise _bad_reference(bare, f"{what} {item!r:.30} is not two words")
        pairs.append((words[0], words[1]))
    return pairs


def read_reference(reference: str) -> Instance:
    """The `Instance` a reference states; raises `ValueError` when the reference is malformed or
    its solution is not a proper colouring respecting its fixed colours (a bad reference is the
    caller's error, not the model's)."""
    bare = check_reference(reference, ColoringVerifier.name, prepare=False)
    if len(bare) > MAX_REFERENCE_CHARS:
        raise _bad_reference(bare, f"{len(bare)} characters (at most {MAX_REFERENCE_CHARS})")
    parts = bare.split("|")
    if len(parts) != 3:
        raise _bad_reference(bare, f"{len(parts)} parts separated by '|', not 3")
    words = parts[0].split()
    if not words or len(words) % 2 or len(words) > 2 * MAX_VERTICES:
        raise _bad_reference(bare, f"the solution has {len(words)} words")
    n = len(words) // 2
    if words[0::2] != [str(v) for v in range(n)]:
        raise _bad_reference(bare, f"the solution does not list vertices 0..{n - 1} in order")
    solution = tuple(words[1::2])
    if not all(len(c) == 1 and c.isascii() and c.isupper() for c in solution):
        raise _bad_reference(bare, "a colour is not one capital letter")
    edges = []
    for a, b in _read_pairs(parts[1], bare, "edge"):
        u, v = _number(a), _number(b)
        if u is None or v is None or not u < v < n:
            raise _bad_reference(bare, f"edge {a:.8} {b:.8} is not u < v < {n}")
        edges.append((u, v))
    if edges != sorted(set(edges)):
        raise _bad_reference(bare, "the edges are not distinct and sorted")
    fixed = []
    for word, c in _read_pairs(parts[2], bare, "fixed colour"):
        v = _number(word)
        if v is None or v >= n or solution[v] != c:
            raise _bad_reference(bare, f"fixed colour {word:.8} {c:.8} disagrees with the solution")
        fixed.append((v, c))
    instance = Instance(n, tuple(edges), tuple(sorted(set(solution))), tuple(fixed), solution)
    bad = clashes(instance, dict(enumerate(solution)))
    if bad:
        raise _bad_reference(bare, f"the solution clashes on edge {bad[0][0]} {bad[0][1]}")
    return instance


def _fault(instance: Instance, colouring: Mapping[int, str]) -> str | None:
    """What makes a parsed colouring wrong for `instance`, or None when it is right."""
    for v in sorted(colouring):
        if colouring[v] not in instance.palette:
            palette = " ".join(instance.palette)
            return f"unknown colour {colouring[v]} at vertex {v} (palette {palette})"
    missing = [v for v in range(instance.n) if v not in colouring]
    if missing:
        listed = " ".join(map(str, missing[:12])) + (" ..." if len(missing) > 12 else "")
        return f"missing vertices {listed}"
    for v, c in instance.fixed:
        if colouring[v] != c:
            return f"vertex {v} must be {c} (given), not {colouring[v]}"
    bad = clashes(instance, colouring)
    if bad:
        u, v = bad[0]
        return f"clash on edge {u} {v} (both {colouring[u]})"
    return None


def read_boxes(response: str) -> list[str]:
    """The ``\\boxed{}`` contents of a response, read from its printable, bounded text (the
    verifier's read; `envs.tasks.faults` reads answers, reviews and patches the same way)."""
    return find_boxed(sanitize(response, 20 * MAX_COLORING_CHARS))


class ColoringVerifier:
    """Scores a colouring against a ``coloring`` reference (the module docstring).

    Examples:
        >>> ref = "0 A 1 B 2 C 3 A | 0 1, 0 2, 1 2, 1 3, 2 3 | 0 A, 1 B"
        >>> ColoringVerifier().verify("\\\\boxed{3 A, 2 C, 1 B, 0 A}", ref).extracted
        '0 A 1 B 2 C 3 A'
        >>> ColoringVerifier().verify("\\\\boxed{0 A 1 B 2 C 3 B}", ref).reason
        'clash on edge 1 3 (both B)'
    """

    name = "coloring"

    def verify(self, response: str, reference: str) -> Verdict:
        """Score one response against one reference."""
        instance = read_reference(reference)
        rejected = not_a_string(response)
        if rejected is not None:
            return rejected
        boxes = read_boxes(response)
        if not boxes:
            return Verdict(0.0, None, "no \\boxed{} colouring")
        parsed = [parse_coloring(box, instance.n) for box in boxes]
        stated = [
            coloring_text(c) if c is not None else " ".join(b[: 2 * MAX_COLORING_CHARS].split())
            for (c, _), b in zip(parsed, boxes, strict=True)
        ]
        colouring, why = parsed[-1]
        extracted = stated[-1][:200] or None
        if len(set(stated)) > 1:
            return Verdict(0.0, extracted, f"hedges between {len(set(stated))} boxed answers")
        if colouring is None:
            return Verdict(0.0, extracted, why)
        fault = _fault(instance, colouring)
        if fault is not None:
            return Verdict(0.0, extracted, fault)
        return Verdict(1.0, extracted, "correct: a proper colouring with the given colours")
