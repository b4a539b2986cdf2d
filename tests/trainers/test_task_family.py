"""The embedded recipe and the probes read a task family's declaration (`envs.tasks.family`), so
the toy family (`tests/envs/toy_family/`, registered in one line) is seen by them: its scripted
turns become the recipe's chat rows, its own model, levels and recipe fields are looked up, and
its probe runs."""

from __future__ import annotations

import pytest

import envs
from tests.envs import toy_family
from trainers import embedded
from trainers.embedded import probe_family
from trainers.embedded.transcripts import family_protocol, sft_rows


@pytest.fixture
def toy():
    envs.register_family(toy_family.FAMILY)  # the one line that adds the family
    yield toy_family.FAMILY
    envs.deregister_task("toy")


def test_the_recipe_plays_the_familys_scripted_turns(toy) -> None:
    problems = list(envs.make_task("toy", split="train", size=3).source)
    rows = sft_rows(problems, 0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    assert [row["role"] for row in rows] == ["solver", "critic"] * 3
    first = rows[0]["messages"]
    assert first[-1] == {"role": "assistant", "content": f"\\boxed{{{problems[0]['answer']}}}"}
    assert problems[0]["question"] in first[-2]["content"]
    assert family_protocol("toy") == {}  # its reflection run keeps the env's refiner


def test_the_recipe_looks_the_family_up(toy) -> None:
    assert embedded.model_for("toy") == embedded.SHIPPED.parent / "model-toy"
    assert embedded.model_for("toy+unknown") == embedded.model_for("toy")
    assert embedded.embedded_levels("toy") == [1, 2]  # the family's default levels
    assert embedded.recipe_families(embedded.EmbeddedRecipe())["toy"] == 0
    names = [name for name, *_ in embedded.family_fields([toy])]
    assert names == ["toy_problems", "toy_difficulty", "toy_drill_rows"]
    fields = {"toy_problems": 0, "toy_difficulty": (1, 2), "toy_drill_rows": 0}
    embedded._family_key(toy, fields)  # without its problems: the key before the family
    assert fields == {}
    fields = {"toy_problems": 5, "toy_difficulty": (1, 2), "toy_drill_rows": 0}
    embedded._family_key(toy, fields)
    assert fields["toy_version"] == 1


def test_the_familys_probe_runs(toy) -> None:
    assert "toy" in probe_family.probe_families()
    args = probe_family.make_parser("toy").parse_args(["--problems", "3"])
    assert args.problems == 3 and args.max_new_tokens == 8  # the family's run's tokens a turn

    class Right:
        def act(self, observations):
            return [
                f"\\boxed{{{sum(map(int, _digits(o['question']))) % 10}}}" for o in observations
            ]

    lines = list(toy.probe.run(Right(), probe_family.probe_env("toy"), args))
    assert lines == ["toy solver right 1.00"]


def _digits(question: str) -> list[str]:
    return question.split("of ")[1].rstrip("?").split(" + ")


def test_the_built_in_family_is_the_recipes() -> None:
    assert [f.name for f in embedded.RECIPE_FAMILIES] == ["coloring"]
    assert {"coloring": embedded.SHIPPED.parent / "model-coloring"} == embedded.VARIANT_OUT
    assert set(embedded.VARIANTS) == {"reach", "coloring"}
    recipe = embedded.EmbeddedRecipe()
    assert (recipe.coloring_problems, recipe.coloring_scan_rows) == (0, 0)
