"""Held out by construction: a generated problem's split is a function of its text
(`envs.tasks.splits`), a split serves distinct texts, and `envs.overlap` finds shared texts."""

from __future__ import annotations

import pytest

import envs
from envs.tasks.arithmetic import GeneratedSource, split_sizes
from envs.tasks.splits import SPLITS, canonical_text, split_of
from envs.tasks.unknown import generate_problem


def _questions(source):
    return [p["question"] for p in source]


@pytest.mark.parametrize("task", ["unknown", "arithmetic"])
def test_no_text_is_in_two_splits_whatever_the_seed(task):
    by_split = {}
    for split in SPLITS:
        texts = set()
        for seed in (0, 1, 2):
            source = envs.make_task(task, split=split, size=300, difficulty=[2, 3], seed=seed)
            texts |= {canonical_text(q) for q in _questions(source.source)}
        by_split[split] = texts
    assert not by_split["train"] & by_split["test"]
    assert not by_split["train"] & by_split["validation"]
    assert not by_split["validation"] & by_split["test"]
    for split, texts in by_split.items():
        assert all(split_of(t) == split for t in texts)


def test_the_split_is_a_function_of_the_canonical_text():
    text = "Find x: x + 7 - 4 = 21."
    assert split_of(text) == split_of("  find X:   x + 7 - 4 = 21. ")
    shares = {s: 0 for s in SPLITS}
    for i in range(4000):
        shares[split_of(f"problem text {i}")] += 1
    assert 0.77 < shares["train"] / 4000 < 0.83
    assert 0.08 < shares["test"] / 4000 < 0.12


def test_a_split_serves_distinct_texts():
    source = envs.make_task("unknown", split="test", size=600, difficulty=[2, 3]).source
    questions = [canonical_text(q) for q in _questions(source)]
    assert len(set(questions)) == 600
    other_seed = envs.make_task("unknown", split="test", size=600, difficulty=[2, 3], seed=5)
    assert _questions(other_seed.source) != _questions(source)


def test_a_small_level_raises_naming_the_level_its_size_and_the_way_out():
    sizes, exact = split_sizes(generate_problem, "unknown", 1)
    assert exact and sum(sizes.values()) > 400  # every text of level 1, each in one split
    held = sizes["test"]
    with pytest.raises(ValueError) as err:
        envs.make_task("unknown", split="test", size=3 * held + 3, difficulty=[1, 2, 3])
    message = str(err.value)
    assert f"level 1 holds {held} distinct test problems" in message
    assert f"a size of at most {3 * held}" in message and "repeat=True" in message
    assert len(envs.make_task("unknown", split="test", size=3 * held, difficulty=[1, 2, 3]).source)
    # the default size fits what a level holds; repeat cycles it (training epochs)
    assert len(envs.make_task("unknown", split="test", difficulty=1).source) == held
    cycled = envs.make_task("unknown", split="test", size=2 * held, difficulty=1, repeat=True)
    questions = _questions(cycled.source)
    assert questions[:held] == questions[held:]
    assert len({p["id"] for p in cycled.source}) == 2 * held


def test_split_sizes_of_a_big_level_are_lower_bounds():
    # a seed no other test draws: streams are shared by the process, and one another test drew
    # further already would count more than 5000 candidates (xdist puts tests anywhere)
    sizes, exact = split_sizes(generate_problem, "unknown", 3, seed=4099, draws=5000)
    assert not exact and 3000 < sum(sizes.values()) <= 5000
    assert sizes["train"] > 4 * sizes["test"] > 0


def test_split_and_size_are_checked():
    with pytest.raises(ValueError, match="split must be one of train, validation, test"):
        envs.make_task("unknown", split="dev")
    with pytest.raises(ValueError, match="size must be a positive int"):
        GeneratedSource(generate_problem, "unknown", size=0)


def test_ids_rebuild_the_problem_and_refuse_what_the_split_lacks():
    source = envs.make_task("unknown", split="validation", size=40, difficulty=[1, 3]).source
    for problem in source:
        assert source.get(problem["id"]) == problem
    held = split_sizes(generate_problem, "unknown", 1)[0]["validation"]
    with pytest.raises(KeyError, match=f"holds {held} validation problems"):
        source.get(f"unknown/validation/d1/s0/{held}")


def test_overlap_normalises_whitespace_and_case_and_keeps_the_first_wording():
    a = ["Find x: x + 2 = 5.", "Other", "find  X: x + 2 = 5."]
    b = [{"question": "FIND x:  x + 2 = 5.", "answer": "3"}]
    assert envs.overlap(a, b) == ["Find x: x + 2 = 5."]
    assert envs.overlap(b, ["nothing"]) == []
    with pytest.raises(TypeError, match="overlap"):
        envs.overlap([3], b)


def test_overlap_takes_tasks_and_sources():
    train = envs.make_task("unknown", size=200, difficulty=[2, 3])
    assert len(envs.overlap(train, train.source)) == 200
    test = envs.make_task("unknown", split="test", size=200, difficulty=[2, 3])
    assert envs.overlap(test, train) == []
