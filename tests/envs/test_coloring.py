"""The ``coloring`` family: 3-colour a graph with two vertices' colours given."""

from __future__ import annotations

import itertools
import re
from collections import Counter

import pytest

import envs
from envs.tasks.coloring import (
    EDGES,
    MAX_DIFFICULTY,
    PALETTE,
    VERTICES,
    count_colorings,
    generate_problem,
    greedy_fails,
)
from envs.tasks.coloring.verifier import read_reference
from envs.tasks.splits import split_of
from rewards import get_verifier


def _edges(problem) -> list[tuple[int, int]]:
    return [tuple(edge) for edge in problem["metadata"]["edges"]]


def _proper_colourings(n: int, edges: list[tuple[int, int]]) -> list[tuple[str, ...]]:
    """Every proper colouring with the palette, by brute force over all 3^n of them."""
    return [
        colours
        for colours in itertools.product(PALETTE, repeat=n)
        if all(colours[u] != colours[v] for u, v in edges)
    ]


def _greedy_gets_stuck(n: int, edges: list[tuple[int, int]]) -> bool:
    """Index-order greedy, written apart from `greedy_fails`."""
    colour: dict[int, str] = {}
    for v in range(n):
        taken = {colour[u] for a, b in edges for u in (a, b) if v in (a, b) and u != v and u < v}
        free = [c for c in PALETTE if c not in taken]
        if not free:
            return True
        colour[v] = free[0]
    return False


@pytest.mark.parametrize("difficulty", [1, 2])
def test_small_levels_have_one_colouring_up_to_renaming_by_brute_force(difficulty):
    for problem in envs.make_task("coloring", size=6, difficulty=difficulty).source:
        meta = problem["metadata"]
        n, edges = meta["n"], _edges(problem)
        proper = _proper_colourings(n, edges)
        assert len(proper) == 6  # one colouring, under the 3! renamings of its three colours
        given = [c for c in proper if all(c[v] == colour for v, colour in meta["fixed"])]
        assert len(given) == 1  # the fixed colours pick out one of them
        assert " ".join(f"{v} {c}" for v, c in enumerate(given[0])) == meta["solution"]
        assert _greedy_gets_stuck(n, edges)


@pytest.mark.parametrize("difficulty", range(1, MAX_DIFFICULTY + 1))
def test_every_problem_is_unique_greedy_failing_balanced_and_its_answer_scores_1(difficulty):
    verifier = get_verifier("coloring")
    for problem in envs.make_task("coloring", size=100, difficulty=difficulty).source:
        meta = problem["metadata"]
        n, edges = meta["n"], _edges(problem)
        assert n == VERTICES[difficulty] and len(edges) == EDGES[difficulty]
        assert edges == sorted(set(edges)) and all(u < v < n for u, v in edges)
        assert count_colorings(n, edges, stop=7) == 1
        assert greedy_fails(n, edges) and _greedy_gets_stuck(n, edges)
        colours = meta["solution"].split()[1::2]
        assert all(colours[u] != colours[v] for u, v in edges)
        sizes = Counter(colours)
        assert set(sizes) == set(PALETTE) and max(sizes.values()) - min(sizes.values()) <= 1
        w = min(v for u, v in edges if u == 0)  # 0's smallest neighbour (u < v, so 0 is u)
        assert meta["fixed"] == [[0, "A"], [w, "B"]]
        assert meta["palette"] == list(PALETTE)
        instance = read_reference(problem["answer"])
        assert instance.text() == meta["solution"] and list(instance.edges) == edges
        assert verifier.verify(f"So \\boxed{{{meta['solution']}}}.", problem["answer"]).correct


def test_count_colorings_counts_up_to_renaming_and_up_to_its_stop():
    triangle = [(0, 1), (0, 2), (1, 2)]
    assert count_colorings(3, triangle) == 1
    assert count_colorings(3, [(0, 1), (1, 2)], stop=9) == 2  # 2 like 0, or a third colour
    assert count_colorings(4, [(0, 1), (1, 2), (2, 3), (0, 3)], stop=9) == 3
    assert count_colorings(3, [], stop=9) == 5  # partitions of 3 vertices
    assert count_colorings(3, [], stop=3) == 3
    assert count_colorings(4, [*triangle, (0, 3), (1, 3), (2, 3)]) == 0  # K4


def test_greedy_fails_only_when_it_gets_stuck():
    assert not greedy_fails(3, [(0, 1), (0, 2), (1, 2)])
    # 0 A, 1 A, 2 B, 3 C, then 4 sees A B C; yet 2 A, 3 B, 4 C, 0 B, 1 A (or C) colours it
    stuck = [(0, 2), (1, 3), (2, 3), (0, 4), (2, 4), (3, 4)]
    assert greedy_fails(5, stuck) and _greedy_gets_stuck(5, stuck)
    assert count_colorings(5, stuck, stop=9) == 2
    assert len(_proper_colourings(5, stuck)) == 6 * 2


def test_the_question_states_the_graph_and_the_fixed_colours():
    pattern = re.compile(
        r"Colour vertices 0-(\d+) with A B C so that every edge joins two different colours\. "
        r"0 is A and (\d+) is B\. Edges: (\d+ \d+(?:, \d+ \d+)*)\."
    )
    for problem in envs.make_task("coloring", size=40, difficulty=[1, 2, 3, 4]).source:
        meta = problem["metadata"]
        match = pattern.fullmatch(problem["question"])
        assert match is not None, problem["question"]
        assert int(match[1]) == meta["n"] - 1 and int(match[2]) == meta["fixed"][1][0]
        listed = [tuple(map(int, pair.split())) for pair in match[3].split(", ")]
        assert listed == _edges(problem)
        assert meta["solution"] not in problem["question"]


def test_generation_is_a_pure_function_of_its_arguments():
    problem = generate_problem(5, difficulty=3, seed=2)
    assert problem == generate_problem(5, difficulty=3, seed=2)
    assert problem["question"] != generate_problem(5, difficulty=3, seed=3)["question"]
    assert problem["question"] != generate_problem(6, difficulty=3, seed=2)["question"]
    assert problem["metadata"] | {"edges": None} == {
        "source": "coloring",
        "index": 5,
        "difficulty": 3,
        "seed": 2,
        "n": 10,
        "edges": None,
        "palette": ["A", "B", "C"],
        "fixed": problem["metadata"]["fixed"],
        "solution": problem["metadata"]["solution"],
    }


def test_coloring_is_seeded_ids_round_trip_and_splits_are_disjoint():
    train = envs.make_task("coloring", size=60, difficulty=[1, 2, 3]).source
    again = envs.make_task("coloring", size=60, difficulty=[1, 2, 3]).source
    assert list(train) == list(again)
    for problem in train:
        assert train.get(problem["id"]) == problem
        assert problem == generate_problem(
            problem["metadata"]["candidate"], difficulty=problem["metadata"]["difficulty"]
        ) | {"id": problem["id"], "metadata": problem["metadata"]}
        assert split_of(problem["question"]) == "train"
    test = envs.make_task("coloring", split="test", size=60, difficulty=[1, 2, 3]).source
    assert not envs.overlap(test, train)
    assert all(split_of(p["question"]) == "test" for p in test)
    with pytest.raises(KeyError, match="not a problem id of this coloring source"):
        train.get("reach/train/d1/s0/3")


def test_a_level_that_does_not_exist_raises_naming_the_range():
    with pytest.raises(ValueError, match=r"coloring difficulty must be in 1\.\.4, got 5"):
        generate_problem(0, difficulty=5)
    with pytest.raises(ValueError, match=r"coloring difficulty must be an int in 1\.\.4"):
        envs.make_task("coloring", difficulty=0)


def test_the_task_serves_validation_problems_of_its_levels():
    task = envs.make_task("coloring", split="validation", size=30, difficulty=[1, 2])
    assert task.name == "coloring" and task.verifier.name == "coloring"
    assert "coloring" in envs.procedural_tasks() and envs.tasks.is_procedural("coloring")
    problems = list(task.source)
    assert len(problems) == 30 and len({p["question"] for p in problems}) == 30
    assert Counter(p["metadata"]["difficulty"] for p in problems) == {1: 15, 2: 15}
    assert all(split_of(p["question"]) == "validation" for p in problems)
    assert "\\boxed{0 A 1 B 2 C}" in task.instruction("solver")


def test_coloring_plays_a_scripted_reflection_episode():
    problem = envs.make_task("coloring", difficulty=2).source[0]
    answer = f"The answer is \\boxed{{{problem['metadata']['solution']}}}."
    env = envs.make("math/reflection-v0", task="coloring", task_kwargs={"difficulty": 2}, rounds=1)
    env.reset(options={"problem_id": problem["id"]})
    assert problem["question"] in env.observe("solver_0")["prompt"]
    for action in (answer, "OK. Verdict: correct", answer):
        env.step(action)
    assert env.infos["solver_0"]["final_correct"]
    assert problem["answer"] not in repr(env.infos)


@pytest.mark.parametrize("env_id", ["math/reflection-v0", "math/debate-v0", "math/solve-v0"])
def test_coloring_passes_check_env(env_id):
    envs.check_env(envs.make(env_id, task="coloring"))
