"""Procedural graph 3-colouring problems: a search to solve, an edge-by-edge look-up to check.

Colour the vertices of a graph with ``A``, ``B`` and ``C`` so that every edge joins two
different colours; two vertices' colours are given::

    Colour vertices 0-6 with A B C so that every edge joins two different colours. 0 is A and
    1 is B. Edges: 0 1, 0 2, 0 4, 0 6, 1 2, 1 4, 1 5, 2 3, 2 5, 3 4, 3 5, 3 6, 4 5, 5 6.
    -> \\boxed{0 A 1 B 2 C 3 B 4 C 5 A 6 C}

Solving is a search: every graph kept here defeats the index-order greedy colouring (vertex
0, 1, ... each taking the first colour no coloured neighbour has gets stuck), so a colouring
written down vertex by vertex without backtracking fails. Checking a proposed colouring is a
look-up per edge: both ends' colours, compared. Like ``reach`` (`envs.tasks.reach`), this is a
family where checking is much cheaper than producing an answer.

Level ``d`` has `VERTICES` ``[d]`` vertices (7, 8, 10, 12) and `EDGES` ``[d]`` edges (14, 18,
22, 27: a mean degree of about 4.5, ``round(n * 4.5 / 2)``; level 1 takes 14, not 16, since
its balanced classes 3, 2, 2 hold only 16 edges between classes, which would leave one graph
per partition). A candidate plants a balanced 3-colouring (class sizes differ by at most
one, vertices assigned at random) and draws distinct edges between classes; it is kept only
when vertex 0 has a neighbour, the graph has exactly one proper 3-colouring up to renaming
the colours (`count_colorings`) and the greedy colouring fails (`greedy_fails`). The
solution is then named so that vertex 0 is ``A`` and its smallest neighbour ``B`` (the third
class is ``C``); those two are the fixed colours the question states, so a problem has one
right answer and every right answer votes together (`envs.tasks.coloring.verifier`).

Measured over the first 2,000 indices of seed 0 at each level (pure Python, one core): 3.3,
2.9, 2.6 and 3.6 candidates per kept problem (acceptance 31%, 35%, 38%, 28%: the greedy test
rejects most candidates at levels 1..3, uniqueness most at level 4) and 0.13, 0.12, 0.20 and
0.40 ms per problem at levels 1..4. Level 1 is small: it holds 3,840 distinct texts in all
(3,061 train, 389 validation, 390 test; 13 edges would give about 18,600); levels 2..4 each
gave over 18,000 distinct texts in their first 20,000 candidates.

Candidate ``index`` of a (difficulty, seed) pair comes from its own seeded ``random.Random``, so
any problem can be rebuilt alone; its split is a hash of its text (`envs.tasks.splits`). The
metadata holds the graph, the palette, the fixed colours and the solution; the answer (the
reference) is ``solution | edges | fixed colours`` (`envs.tasks.coloring.verifier.reference_text`), from
which the verifier reads the graph.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Mapping, Sequence

from envs.tasks.coloring.verifier import Instance, reference_text
from envs.tasks.sources import Problem

MAX_DIFFICULTY = 4
PALETTE = ("A", "B", "C")
VERTICES = {1: 7, 2: 8, 3: 10, 4: 12}
EDGES = {1: 14, 2: 18, 3: 22, 4: 27}  # mean degree ~4.5; level 1 below the 16 it could hold
MAX_TRIES = 500  # candidate draws per index before giving up (never reached: about 5 suffice)


def adjacency(n: int, edges: list[tuple[int, int]]) -> list[list[int]]:
    """Each vertex's neighbours."""
    neighbours: list[list[int]] = [[] for _ in range(n)]
    for u, v in edges:
        neighbours[u].append(v)
        neighbours[v].append(u)
    return neighbours


def min_conflicts(
    edges: Sequence[Sequence[int]],
    given: Collection[int],
    colours: Mapping[int, str],
    clash: tuple[int, int],
    palette: Sequence[str] = PALETTE,
) -> tuple[int, str] | None:
    """The scripted patch of a named clash: of its two ends (never a `given` vertex) and the
    other colours each could take, the vertex and colour that the fewest of that vertex's
    neighbours hold (ties: the end named first, then palette order); None when both ends are
    given. It reads only the graph, the colouring and the named edge, never the solution: a
    local repair (min-conflicts). Either end recoloured removes the named clash; others may
    remain, or arise, for a later round."""
    best: tuple[int, int, str] | None = None
    for vertex in clash:
        if vertex in given or vertex not in colours:
            continue
        near = [b if a == vertex else a for a, b in edges if vertex in (a, b)]
        for colour in palette:
            if colour == colours[vertex]:
                continue
            cost = sum(colours.get(u) == colour for u in near)
            if best is None or cost < best[0]:
                best = (cost, vertex, colour)
    return None if best is None else (best[1], best[2])


def count_colorings(n: int, edges: list[tuple[int, int]], stop: int = 2) -> int:
    """How many proper 3-colourings the graph has up to renaming the colours, counting up to
    `stop` (a backtracking search that ends as soon as `stop` are found: the uniqueness test of
    every candidate).

    Vertices are coloured in index order and each colouring is counted in its canonical form
    (colours named in order of first use), so the renamings of one colouring count once.
    """
    neighbours = adjacency(n, edges)
    earlier = [[u for u in neighbours[v] if u < v] for v in range(n)]
    colour = [-1] * n
    found = 0

    def walk(v: int, used: int) -> None:
        nonlocal found
        if v == n:
            found += 1
            return
        taken = {colour[u] for u in earlier[v]}
        for c in range(min(used + 1, len(PALETTE))):
            if found >= stop:
                return
            if c not in taken:
                colour[v] = c
                walk(v + 1, max(used, c + 1))
        colour[v] = -1

    walk(0, 0)
    return found


def greedy_fails(n: int, edges: list[tuple[int, int]]) -> bool:
    """Whether the index-order greedy colouring gets stuck: vertex 0, 1, ... each takes the
    first palette colour that no already coloured neighbour has; it fails when none is free."""
    neighbours = adjacency(n, edges)
    colour: list[int] = []
    for v in range(n):
        taken = {colour[u] for u in neighbours[v] if u < v}
        free = [c for c in range(len(PALETTE)) if c not in taken]
        if not free:
            return True
        colour.append(free[0])
    return False


def question(n: int, edges: list[tuple[int, int]], fixed: list[tuple[int, str]]) -> str:
    givens = " and ".join(f"{v} is {c}" for v, c in fixed)
    listed = ", ".join(f"{u} {v}" for u, v in edges)
    return (
        f"Colour vertices 0-{n - 1} with {' '.join(PALETTE)} so that every edge joins two "
        f"different colours. {givens}. Edges: {listed}."
    )


def _candidate(rng: random.Random, n: int, m: int) -> tuple[list[int], list[tuple[int, int]]]:
    """A planted balanced colouring (vertex -> class 0..2) and `m` distinct edges between
    classes, sorted."""
    order = list(range(n))
    rng.shuffle(order)
    planted = [0] * n
    for position, v in enumerate(order):
        planted[v] = position % len(PALETTE)
    pairs = [(u, v) for u in range(n) for v in range(u + 1, n) if planted[u] != planted[v]]
    return planted, sorted(rng.sample(pairs, m))


def generate_problem(index: int, *, difficulty: int = 1, seed: int = 0) -> Problem:
    """Candidate `index` of the family's stream at this difficulty and seed (a pure function of
    them); `envs.tasks.arithmetic.GeneratedSource` assigns its split by its text."""
    if not 1 <= difficulty <= MAX_DIFFICULTY:
        raise ValueError(f"coloring difficulty must be in 1..{MAX_DIFFICULTY}, got {difficulty!r}")
    rng = random.Random(f"coloring|{seed}|{difficulty}|{index}")
    n, m = VERTICES[difficulty], EDGES[difficulty]
    for _ in range(MAX_TRIES):
        planted, edges = _candidate(rng, n, m)
        if (
            any(0 in edge for edge in edges)
            and greedy_fails(n, edges)
            and count_colorings(n, edges) == 1
        ):
            break
    else:  # pragma: no cover - every level finds a problem within a few draws
        raise RuntimeError(f"coloring: no problem in {MAX_TRIES} draws (index {index})")
    w = min(v for edge in edges if 0 in edge for v in edge if v != 0)
    third = 3 - planted[0] - planted[w]  # the class neither 0 nor w is in
    names = {planted[0]: PALETTE[0], planted[w]: PALETTE[1], third: PALETTE[2]}
    solution = tuple(names[planted[v]] for v in range(n))
    fixed = ((0, PALETTE[0]), (w, PALETTE[1]))
    instance = Instance(n, tuple(edges), tuple(sorted(set(solution))), fixed, solution)
    return Problem(
        id=f"coloring/d{difficulty}/s{seed}/{index}",
        question=question(n, edges, list(fixed)),
        answer=reference_text(instance),
        metadata={
            "source": "coloring",
            "index": index,
            "difficulty": difficulty,
            "seed": seed,
            "n": n,
            "edges": [list(edge) for edge in edges],
            "palette": list(instance.palette),
            "fixed": [list(pair) for pair in fixed],
            "solution": instance.text(),
        },
    )
