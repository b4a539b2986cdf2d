from __future__ import annotations

import json

import pytest

import envs
from envs.reflection import parse_verdict
from trainers.embedded import (
    EmbeddedRecipe,
    build_embedded,
    critique,
    embedded_path,
    resolve_model,
    sft_rows,
    worked_solution,
)

TINY = EmbeddedRecipe(
    num_problems=12,
    max_steps=2,
    batch_size=4,
    hidden_size=32,
    num_layers=1,
    num_heads=2,
    vocab_size=300,
)


@pytest.mark.parametrize("difficulty", [1, 2, 3, 4, 5])
def test_worked_solutions_reach_the_reference(difficulty):
    verifier = envs.make_task("arithmetic").verifier
    for problem in envs.make_task("arithmetic", difficulty=difficulty, size=50).source:
        text, value = worked_solution(problem)
        assert str(value) == problem["answer"]
        assert verifier.verify(text, problem["answer"]).score == 1.0
        last = len(problem["metadata"]["steps"]) - 1
        slipped, wrong = worked_solution(problem, slip_at=last, slip=1)
        assert wrong != value and verifier.verify(slipped, problem["answer"]).score == 0.0
        assert parse_verdict(critique(problem, value)) is True
        assert parse_verdict(critique(problem, wrong)) is False


def test_sft_rows_use_the_envs_own_prompts():
    rows = sft_rows(TINY)
    roles = {r["role"] for r in rows}
    assert {"solver", "critic", "refiner"} <= roles
    first = envs.make_task("arithmetic", size=12, difficulty=[1, 2]).source[0]
    env = envs.make("math/reflection-v0", rounds=1)
    env.reset(options={"problem": first})
    solver = next(r for r in rows if r["role"] == "solver")
    obs = env.observe("solver_0")
    assert solver["messages"][0] == {"role": "system", "content": obs["instruction"]}
    assert solver["messages"][1] == {"role": "user", "content": obs["prompt"]}
    assert sft_rows(TINY) == rows  # seeded


def test_recipe_key_changes_with_the_recipe(tmp_path):
    assert TINY.key() == EmbeddedRecipe(**vars(TINY)).key()
    assert TINY.key() != EmbeddedRecipe(**{**vars(TINY), "seed": 1}).key()
    assert embedded_path(TINY, tmp_path).name == f"embedded-{TINY.key()}"
    assert resolve_model("some/hub-id") == "some/hub-id"


def test_build_is_cached_and_loadable(tmp_path):
    from agents import GenerationArguments, HFPolicy

    path = build_embedded(TINY, cache_dir=tmp_path)
    info = json.loads((path / "recipe.json").read_text())
    assert info["key"] == TINY.key() and info["sft"]["rows"] > 12
    stamp = (path / "recipe.json").stat().st_mtime_ns
    assert build_embedded(TINY, cache_dir=tmp_path) == path
    assert (path / "recipe.json").stat().st_mtime_ns == stamp  # not rebuilt
    policy = HFPolicy.from_pretrained(str(path), GenerationArguments(max_new_tokens=4, seed=0))
    (gen,) = policy.generate([{"instruction": "Solve.", "prompt": "1 + 1?"}])
    assert 1 <= gen.num_tokens <= 4


def test_same_recipe_gives_the_same_model(tmp_path):
    import torch
    from transformers import AutoModelForCausalLM

    first = build_embedded(TINY, cache_dir=tmp_path / "a")
    second = build_embedded(TINY, cache_dir=tmp_path / "b")
    a = AutoModelForCausalLM.from_pretrained(first).state_dict()
    b = AutoModelForCausalLM.from_pretrained(second).state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert (first / "tokenizer.json").read_text() == (second / "tokenizer.json").read_text()
