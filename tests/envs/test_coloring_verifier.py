"""The ``coloring`` verifier (`envs.tasks.coloring.verifier`, registered into `rewards` with the
family): sound, not gameable, bounded on hostile text."""

from __future__ import annotations

import doctest
import time

import pytest

import envs.tasks.coloring.verifier as verifier_module
from envs.tasks.coloring import ColoringVerifier
from envs.tasks.coloring.verifier import (
    MAX_COLORING_CHARS,
    Instance,
    clashes,
    coloring_text,
    parse_coloring,
    read_reference,
    reference_text,
)
from rewards import canonical_answer, get_verifier, majority_vote

# Vertices 0..4: a triangle 0 1 2 with 3 hung on 1 and 2, and 4 on 0 and 3.
SOLUTION = "0 A 1 B 2 C 3 A 4 B"
EDGES = "0 1, 0 2, 0 4, 1 2, 1 3, 2 3, 3 4"
REF = f"{SOLUTION} | {EDGES} | 0 A, 1 B"


@pytest.fixture
def verify():
    return get_verifier("coloring").verify


@pytest.mark.parametrize(
    "response",
    [
        "\\boxed{0 A 1 B 2 C 3 A 4 B}",
        "So the colouring is \\boxed{0 A, 1 B, 2 C, 3 A, 4 B}.",
        "\\boxed{4 B 3 A 2 C 1 B 0 A}",  # any vertex order
        "\\boxed{0A,1B,2C,3A,4B}",
        "\\boxed{ 0 A\n1 B\n2 C\n3 A\n4 B }",
        # the same colouring boxed twice is no hedge
        "\\boxed{0 A 1 B 2 C 3 A 4 B} so \\boxed{4 B 3 A 2 C 1 B 0 A}",
    ],
)
def test_the_colouring_in_any_order_or_spacing_scores_1_and_reads_canonically(verify, response):
    verdict = verify(response, REF)
    assert verdict.score == 1.0, verdict
    assert verdict.extracted == SOLUTION


@pytest.mark.parametrize(
    ("response", "reason"),
    [
        ("The answer is 0 A 1 B 2 C 3 A 4 B.", "no \\boxed{}"),
        ("\\boxed{0 A 1 B 2 C 3 A 4 A}", "clash on edge 0 4 (both A)"),  # 3 4 clashes too
        ("\\boxed{0 A 1 B 2 B 3 A 4 C}", "clash on edge 1 2 (both B)"),  # first of two, listed
        ("\\boxed{0 A 1 B 2 C 3 A}", "missing vertices 4"),  # a partial colouring
        ("\\boxed{0 A 1 B 2 C 3 A 4 B 4 B}", "vertex 4 appears twice"),
        ("\\boxed{0 A 1 B 2 C 3 A 4 B 5 C}", "vertex 5 is not one of 0..4"),
        ("\\boxed{0 A 1 B 2 C 3 D 4 B}", "unknown colour D at vertex 3 (palette A B C)"),
        ("\\boxed{0 A 1 B 2 C 3 a 4 B}", "unknown colour a"),
        ("\\boxed{0 B 1 A 2 C 3 B 4 A}", "vertex 0 must be A (given), not B"),  # renamed
        ("\\boxed{0 A 1 C 2 B 3 A 4 C}", "vertex 1 must be B (given), not C"),  # renamed
        ("\\boxed{0 A 1 B 2 C 3 A 4 B} or \\boxed{0 A 1 B 2 C 3 A 4 C}", "hedges between 2"),
        ("\\boxed{0 A 1 B 2 C 3 A 4 B} \\boxed{5}", "hedges between 2"),
        ("\\boxed{0 A 1 B 2 C 3 A 4 B because}", "not vertex-colour pairs: 'because'"),
        ("\\boxed{colouring: 0 A 1 B 2 C 3 A 4 B}", "not vertex-colour pairs"),
        ("\\boxed{0: A, 1: B, 2: C, 3: A, 4: B}", "not vertex-colour pairs: ':'"),
        ("\\boxed{0 A 1 B 2 C 3 A 4}", "vertex 4 has no colour"),
        ("\\boxed{0 AB 1 B 2 C 3 A 4 B}", "not vertex-colour pairs: 'AB'"),
        ("\\boxed{A 0 B 1}", "not vertex-colour pairs: 'A'"),
        ("\\boxed{0 A 1 B 2 C 3 A \u0664 B}", "not vertex-colour pairs: '\u0664'"),  # ASCII only
        ("\\boxed{}", "no vertex-colour pairs"),
        ("\\boxed{0 A 1 B 2 C 3 A 4 B" + ", " * MAX_COLORING_CHARS + "}", "characters (at most"),
        ("\\boxed{__import__('os').system('true')}", "not vertex-colour pairs"),
    ],
)
def test_wrong_or_malformed_colourings_score_0_with_the_reason(verify, response, reason):
    verdict = verify(response, REF)
    assert verdict.score == 0.0
    assert reason in verdict.reason, verdict


def test_reasoning_gym_style_games_are_refused(verify):
    # the givens copied back: the fixed colours alone, or the edge list
    assert verify("\\boxed{0 A 1 B}", REF).reason == "missing vertices 2 3 4"
    assert verify(f"\\boxed{{{EDGES}}}", REF).score == 0.0
    assert verify(f"\\boxed{{{REF}}}", REF).score == 0.0  # the reference itself, pasted
    # a proper colouring with a fourth colour (every vertex its own colour but one)
    assert verify("\\boxed{0 A 1 B 2 C 3 D 4 B}", REF).score == 0.0
    assert verify("\\boxed{0 A 1 B 2 C 3 D 4 E}", REF).score == 0.0
    # a hedge: every answer at once, or the right one among wrong ones
    hedge = "\\boxed{0 A 1 B 2 C 3 A 4 B} \\boxed{0 A 1 B 2 C 3 B 4 A}"
    assert verify(hedge, REF).score == 0.0
    # words in the box around a right colouring
    assert verify("\\boxed{\\text{0 A 1 B 2 C 3 A 4 B}}", REF).score == 0.0
    assert verify("\\boxed{0 A 1 B 2 C 3 A 4 B (proper)}", REF).score == 0.0


def test_votes_count_the_same_colouring_together(verify):
    spelled = [
        verify(r, REF).extracted
        for r in ("\\boxed{0 A 1 B 2 C 3 A 4 B}", "\\boxed{4 B, 3 A, 2 C, 1 B, 0 A}")
    ]
    wrong = verify("\\boxed{0 A 1 B 2 C 3 A 4 A}", REF).extracted
    assert wrong == "0 A 1 B 2 C 3 A 4 A"
    assert canonical_answer(spelled[0]) == canonical_answer(spelled[1]) != canonical_answer(wrong)
    assert majority_vote([wrong, *spelled]) == (spelled[0], 2)


def test_non_string_responses_score_0(verify):
    for response in (None, 5, b"\\boxed{0 A}", ["\\boxed{0 A}"]):
        verdict = verify(response, REF)  # type: ignore[arg-type]
        assert verdict.score == 0.0 and "str" in verdict.reason


@pytest.mark.parametrize(
    "reference",
    [
        "",
        "   ",
        None,
        7,
        SOLUTION,  # no edges or fixed colours
        f"{SOLUTION} | {EDGES}",
        f"{SOLUTION} | {EDGES} | 0 A | 1 B",
        f"0 A 2 B 1 C 3 A 4 B | {EDGES} | 0 A",  # vertices out of order
        f"0 A 1 B 2 C 3 A | {EDGES} | 0 A",  # an edge past the last vertex
        f"0 A 1 B 2 C 3 A 4 A | {EDGES} | 0 A",  # the solution clashes on 3 4
        f"{SOLUTION} | {EDGES} | 0 B",  # a fixed colour the solution breaks
        f"{SOLUTION} | {EDGES} | 9 A",
        f"{SOLUTION} | 0 1, 0 1 | 0 A",  # an edge twice
        f"{SOLUTION} | 1 0 | 0 A",  # u > v
        f"{SOLUTION} | 0 2, 0 1 | 0 A",  # not sorted
        f"{SOLUTION} | 0 1 2 | 0 A",
        f"{SOLUTION} | 0 x | 0 A",
        f"0 a 1 B 2 C 3 A 4 B | {EDGES} | 1 B",  # not a capital letter
        f"0 AB 1 B 2 C 3 A 4 B | {EDGES} | 1 B",
        pytest.param(f"{SOLUTION} | 0 {'9' * 5000} | 0 A", id="a 5000-digit vertex"),
        pytest.param("0 A " * 20_000 + "| 0 1 | 0 A", id="20000 vertices"),
    ],
)
def test_a_bad_reference_raises_value_error_naming_it(verify, reference):
    with pytest.raises(ValueError, match="coloring verifier"):
        verify("\\boxed{0 A 1 B 2 C 3 A 4 B}", reference)


HOSTILE = {  # each a megabyte or more, built on use
    "one long box": lambda: "\\boxed{" + "0 A " * 250_000 + "}",
    "a million digits": lambda: "\\boxed{" + "1" * 1_000_000 + "}",
    "unclosed boxes": lambda: "\\boxed{" * 150_000,
    "braces then the answer": lambda: "{" * 1_000_000 + "\\boxed{0 A 1 B 2 C 3 A 4 B}",
    "the answer boxed 40k times": lambda: "\\boxed{0 A 1 B 2 C 3 A 4 B}" * 40_000,
    "100k small boxes": lambda: "\\boxed{0 A}" * 100_000,
    "separators": lambda: "\\boxed{0 A, " + ", " * 500_000 + "}",
    "pairs, no box": lambda: "0 A, " * 250_000,
}


@pytest.mark.parametrize("key", list(HOSTILE))
def test_a_megabyte_of_hostile_text_is_answered_fast(verify, key):
    response = HOSTILE[key]()
    assert len(response) >= 1_000_000
    start = time.perf_counter()
    verdict = verify(response, REF)
    elapsed = time.perf_counter() - start
    assert 0.0 <= verdict.score <= 1.0
    assert elapsed < 1.0, f"{elapsed:.2f} s"  # generous for a loaded host: each takes ms


def test_the_helpers_agree_with_the_verifier():
    instance = read_reference(REF)
    assert instance == Instance(
        n=5,
        edges=((0, 1), (0, 2), (0, 4), (1, 2), (1, 3), (2, 3), (3, 4)),
        palette=("A", "B", "C"),
        fixed=((0, "A"), (1, "B")),
        solution=("A", "B", "C", "A", "B"),
    )
    assert instance.text() == SOLUTION and reference_text(instance) == REF
    assert clashes(instance, {0: "A", 1: "A", 2: "A", 4: "B"}) == [(0, 1), (0, 2), (1, 2)]
    assert clashes(instance, {3: "A"}) == []  # uncoloured ends are skipped
    assert coloring_text({2: "C", 0: "A", 10: "B"}) == "0 A 2 C 10 B"
    assert parse_coloring("2 C, 0 A", 5) == ({2: "C", 0: "A"}, "")  # partial is fine here
    assert parse_coloring("0 A 0 B", 5)[0] is None
    assert parse_coloring("0 1", 5)[0] is None  # an edge, not a pair
    assert parse_coloring("0 A", 0)[0] is None  # no vertices at all
    assert parse_coloring("1000 A", 2000)[0] is None  # past the digits read
    assert ColoringVerifier.name == "coloring"


def test_its_docstring_examples_run() -> None:
    assert doctest.testmod(verifier_module, optionflags=doctest.ELLIPSIS).failed == 0
