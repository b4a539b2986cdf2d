"""The embedded model's warm-start transcripts on ``coloring`` (graph 3-colouring,
`envs.tasks.coloring.generate`): the family's `EmbeddedPart` (`envs.tasks.family`), whose
``(observation, reply, role)`` turns the recipe (`trainers.embedded`) makes chat rows of.

Each role does what its check costs it, and no more:

- the solver answers in one shot with a colouring (``\\boxed{0 A 1 B 2 A ...}``), or, in a share
  of its replies (``work_fraction``), works it out from the two given colours by propagation
  (``5 C by 0 2``: 5's neighbours 0 and 2 hold A and B), then boxes it (`work_reply`);
- the critic reads the colouring before the edge list (the task's ``review_first``) and scans
  the edges in order, one mark per edge: its ends and their colours (two lookups), to the first
  clash, which it names: ``0 2 A B 1 2 B B BAD 1 2. Verdict: incorrect``, or ``... OK. Verdict:
  correct`` (`check_reply`). Nothing in a
  colouring states a result the critic could copy instead of checking (a ``reach`` chain states
  ``135 - 4 = 76``; a colouring states colours);
- the refiner keeps an accepted colouring and, after a rejection that names an edge, recolours
  one end of it (`repair_reply`): as a patch (``\\boxed{2 C}``, laid over the latest colouring
  by the env, ``refiner_mode="patch"``) or, in the rewrite form, as the whole colouring with
  that vertex changed. The two forms are told apart by the refiner's prompt (the patch form's
  asks for a patch), so one model plays both. The end it recolours is the one whose colour is
  wrong, to its right colour: every target reply is right.

The answers under review are right (half) or the slips a guessing solver makes: a near miss
(one or two vertices, never a fixed one, recoloured: each such miss has a clash, since the
instance has one colouring that keeps the fixed colours) or a random colouring of the free
vertices (`slip`).
"""

from __future__ import annotations

import random
from typing import Any

from envs.tasks.coloring.generate import min_conflicts as patch_rule

PALETTE = ("A", "B", "C")


def solution(problem: dict[str, Any]) -> list[str]:
    """The problem's colouring, vertex by vertex."""
    return problem["metadata"]["solution"].split()[1::2]


def spelled(colours: list[str]) -> str:
    """``0 A 1 B 2 A``."""
    return " ".join(f"{v} {c}" for v, c in enumerate(colours))


def solve_reply(problem: dict[str, Any], colours: list[str] | None = None) -> str:
    """A solver's colouring in one shot (`colours`, default the right one)."""
    return f"\\boxed{{{spelled(solution(problem) if colours is None else colours)}}}"


def slip(problem: dict[str, Any], rng: random.Random) -> list[str]:
    """A wrong colouring a guessing solver gives: one (56%) or two (24%) free vertices
    recoloured, or every free vertex coloured at random (20%); the fixed colours kept."""
    colours = solution(problem)
    fixed = {v for v, _ in problem["metadata"]["fixed"]}
    free = [v for v in range(len(colours)) if v not in fixed]
    wrong = list(colours)
    kind = rng.random()
    if kind < 0.8:
        for v in rng.sample(free, 1 if kind < 0.56 else 2):
            wrong[v] = rng.choice([c for c in PALETTE if c != colours[v]])
    else:
        while wrong == colours:
            for v in free:
                wrong[v] = rng.choice(PALETTE)
    return wrong


def clashes(problem: dict[str, Any], colours: list[str]) -> list[tuple[int, int]]:
    """The edges of `colours` whose ends share a colour, in listed order."""
    return [(u, v) for u, v in problem["metadata"]["edges"] if colours[u] == colours[v]]


def check_reply(problem: dict[str, Any], colours: list[str]) -> str:
    """The critic's reply on `colours`: a scan of the edge list in order, one mark per edge
    (its ends and their colours, looked up in the colouring above), to the first clash:

    ``0 2 A B 0 3 A C 1 2 B B BAD 1 2. Verdict: incorrect`` or ``... OK. Verdict: correct``
    (four tokens a mark: the tokenizer splits at spaces).

    Each mark is three copies (the next edge, then each end's colour) and the clash one
    comparison; a verdict alone, with no marks, left all of them to one token, and a build on
    it judged at chance (issue notes)."""
    marks = []
    for u, v in problem["metadata"]["edges"]:
        marks.append(f"{u} {v} {colours[u]} {colours[v]}")
        if colours[u] == colours[v]:
            return f"{' '.join(marks)} BAD {u} {v}. Verdict: incorrect"
    return f"{' '.join(marks)} OK. Verdict: correct"


def work_reply(problem: dict[str, Any]) -> str:
    """A solver's worked colouring: from the two given colours, each next vertex whose
    coloured neighbours already hold two colours takes the third, written with those two
    neighbours (``5 C by 0 2``); where none is forced, the lowest uncoloured vertex is set
    (``7 A set``). Then the colouring, boxed. 94% of level 1-2 and 67% of level 4 instances are
    forced all the way from the givens."""
    meta = problem["metadata"]
    right = solution(problem)
    n, neighbours = meta["n"], [[] for _ in range(meta["n"])]
    for u, v in meta["edges"]:
        neighbours[u].append(v)
        neighbours[v].append(u)
    coloured = {v: c for v, c in meta["fixed"]}
    steps = [f"{v} {c}" for v, c in meta["fixed"]]
    while len(coloured) < n:
        for x in range(n):
            if x in coloured:
                continue
            seen: dict[str, int] = {}
            for y in sorted(neighbours[x]):
                if y in coloured:
                    seen.setdefault(coloured[y], y)
            if len(seen) == 2:
                a, b = sorted(seen.values())
                coloured[x] = right[x]
                steps.append(f"{x} {right[x]} by {a} {b}")
                break
        else:
            x = min(v for v in range(n) if v not in coloured)
            coloured[x] = right[x]
            steps.append(f"{x} {right[x]} set")
    return f"{'. '.join(steps)}. {solve_reply(problem)}"


def min_conflicts(problem: dict[str, Any], colours: list[str]) -> tuple[int, str] | None:
    """The scripted patch of a rejected colouring's first clash (`envs.tasks.coloring.
    min_conflicts`: an end, never a given vertex, to the colour fewest of its neighbours hold),
    or None when nothing clashes."""
    found = clashes(problem, colours)
    if not found:
        return None
    meta = problem["metadata"]
    given = {v for v, _ in meta["fixed"]}
    return patch_rule(meta["edges"], given, dict(enumerate(colours)), found[0])


def repair_reply(problem: dict[str, Any], colours: list[str], patch: bool) -> tuple[str, list[str]]:
    """The refiner's reply on a reviewed colouring and the colouring it leaves: keep an
    accepted one (``Keep.`` as a patch, the whole colouring as a rewrite), recolour one end of
    the named clash in a rejected one (`min_conflicts`)."""
    fix = min_conflicts(problem, colours)
    if fix is None:
        return ("Keep." if patch else solve_reply(problem, colours)), colours
    vertex, colour = fix
    fixed = list(colours)
    fixed[vertex] = colour
    return (f"\\boxed{{{vertex} {colour}}}" if patch else solve_reply(problem, fixed)), fixed


def turn(obs: dict[str, str], reply: str, role: str) -> tuple[dict[str, str], str, str]:
    """One scripted turn: the observation, the reply to it and the role (a chat row, once the
    recipe builds its messages: `trainers.embedded.chat.chat_row`)."""
    return obs, reply, role


def coloring_rows(
    problem: dict[str, Any],
    rng: random.Random,
    reflection: Any,
    ensemble: Any,
    debate: Any,
    review_fraction: float,
    second_round: float,
    team_fraction: float,
    work_fraction: float = 0.0,
) -> list[tuple[dict[str, str], str, str]]:
    """The scripted turns (`turn`) of one ``coloring`` problem: a solver row; with chance `review_fraction` a
    critic and refiner row on a colouring right or slipped, played through `reflection` (the
    run's protocol: the refiner patches and is shown the first named clash), and with
    `second_round` a second pair on what the first patch left; with `team_fraction` an
    ensemble variant's or debater's row. A share `work_fraction` of the solver rows work the
    colouring out (`work_reply`)."""
    rows: list[tuple[dict[str, str], str, str]] = []
    reflection.reset(options={"problem": problem})
    worked = rng.random() < work_fraction
    solved = work_reply(problem) if worked else solve_reply(problem)
    rows.append(turn(reflection.observe("solver_0"), solved, "solver"))
    if rng.random() < review_fraction:
        colours = solution(problem) if rng.random() < 0.5 else slip(problem, rng)
        reflection.step(solve_reply(problem, colours))
        for round_ in range(2):  # the second review sees what the first repair left
            check = check_reply(problem, colours)
            rows.append(turn(reflection.observe("critic_0"), check, "critic"))
            reflection.step(check)
            reply, colours = repair_reply(problem, colours, patch=True)
            rows.append(turn(reflection.observe("refiner_0"), reply, "refiner"))
            if round_ == 1 or rng.random() >= second_round:
                break
            reflection.step(reply)
    if rng.random() < team_fraction:
        if rng.random() < 0.5:
            obs, _ = ensemble.reset(options={"problem": problem})
            rows.append(turn(obs[rng.choice(ensemble.agents)], solve_reply(problem), "variant"))
        else:
            debate.reset(options={"problem": problem})
            shown = {a: solve_reply(problem, slip(problem, rng)) for a in debate.agents}
            obs, *_ = debate.step(shown)
            rows.append(turn(obs[debate.agents[0]], solve_reply(problem), "debater"))
    return rows


def scan_drill_rows(
    count: int, seed: int, problems: list[Any] | None = None
) -> list[dict[str, Any]]:
    """Scan drills (``role`` "drill"): a colouring, then an edge list, behind a one-word system
    prompt; the reply is the critic's scan of those edges to the first clash (`check_reply`'s
    form). A critic row holds its scan behind a long prompt; a drill holds the same lookups in
    fewer tokens, so the small model meets more of them for the same compute.

    Without `problems`: short drills, a random colouring of 7..12 vertices and 3..8 edges
    joining two colours, one of them (in half the drills) replaced by a clash. With `problems`
    (train ``coloring`` problems, cycled): each drill is a problem's own graph, coloured right
    (half) or as a guessing solver slips (`slip`), so a drill's scan is as long as a critic's.
    A build on short drills alone learnt their lookup (98.5% of unseen drills' marks) but did
    not carry it to the 14-27 edges of a real check (issue notes)."""
    rng = random.Random(f"scan-drill-{seed}" if problems is None else f"scan-real-{seed}")
    rows = []
    for i in range(count):
        if problems is None:
            colours, pairs = _short_drill(rng)
        else:
            problem = problems[i % len(problems)]
            colours = solution(problem) if rng.random() < 0.5 else slip(problem, rng)
            pairs = [tuple(e) for e in problem["metadata"]["edges"]]
        listed = ", ".join(f"{u} {v}" for u, v in pairs)
        graph = {"metadata": {"edges": [list(p) for p in pairs]}}
        rows.append(
            {
                "messages": [
                    {"role": "system", "content": "Practice."},
                    {"role": "user", "content": f"{solve_reply({}, colours)}\nEdges: {listed}."},
                    {"role": "assistant", "content": check_reply(graph, colours)},
                ],
                "role": "drill",
            }
        )
    return rows


def _short_drill(rng: random.Random) -> tuple[list[str], list[tuple[int, int]]]:
    """A short drill's random colouring and its 3..8 sorted edges (half with one clash)."""
    n = rng.randint(7, 12)
    colours = [rng.choice(PALETTE) for _ in range(n)]
    every = [(u, v) for u in range(n) for v in range(u + 1, n)]
    apart = [p for p in every if colours[p[0]] != colours[p[1]]]
    pairs = rng.sample(apart, min(len(apart), rng.randint(3, 8)))
    same = [p for p in every if colours[p[0]] == colours[p[1]]]
    if same and pairs and rng.random() < 0.5:  # half the drills: one clash, anywhere
        pairs[rng.randrange(len(pairs))] = rng.choice(same)
    return colours, sorted(set(pairs))


VERSION = 4  # bump whenever the transcripts change; keyed only into recipes with coloring rows


def drills(recipe: Any, problems: Any) -> list[dict[str, Any]]:
    """The recipe's scan drills: `coloring_drill_rows` short ones, and `coloring_scan_rows` on
    its train graphs (``problems(size)``: the recipe's train problems of the family)."""
    rows = scan_drill_rows(recipe.coloring_drill_rows, recipe.seed)
    if recipe.coloring_scan_rows:
        pool = problems(max(recipe.coloring_problems, 1000))
        rows += scan_drill_rows(recipe.coloring_scan_rows, recipe.seed, pool)
    return rows


def key_fields(fields: dict[str, Any]) -> None:
    """The recipe's key fields of the family: none in a recipe without its rows or drills (the
    key before the family), `coloring_scan_rows` only when set (the key before real-length scan
    drills), and `VERSION` in a recipe with its transcripts or scan drills."""
    problems, scans = fields["coloring_problems"], fields["coloring_scan_rows"]
    if not (problems or fields["coloring_drill_rows"]):
        for name in ("coloring_problems", "coloring_difficulty", "coloring_drill_rows"):
            fields.pop(name)
    if not scans:
        fields.pop("coloring_scan_rows")
    if scans or problems:
        fields["coloring_version"] = VERSION
