"""The ``coloring`` model's transcripts (`envs.tasks.coloring.rows`, read by `trainers.embedded`
through the family's declaration): played through the
real envs, every target reply right, the answers under review right or slipped as a guessing
solver's are, train problems only."""

from __future__ import annotations

import dataclasses
import json
import random
import re

import pytest

import envs
from envs.tasks.coloring import ColoringFaults
from envs.tasks.coloring import probe as probe_coloring
from envs.tasks.coloring.rows import (
    check_reply,
    min_conflicts,
    repair_reply,
    scan_drill_rows,
    slip,
    solution,
    solve_reply,
)
from trainers.embedded import (
    SHIPPED,
    VARIANT_OUT,
    VARIANTS,
    EmbeddedRecipe,
    mixed_problems,
    model_for,
    recipe_transcripts,
)

VERIFIER = envs.make_task("coloring").verifier
COLORING_VARIANT = VARIANTS["coloring"]
SHIPPED_COLORING = VARIANT_OUT["coloring"]
FAULTS = ColoringFaults()


@pytest.fixture(scope="module")
def problems() -> list[dict]:
    recipe = dataclasses.replace(EmbeddedRecipe(), **{**COLORING_VARIANT, "coloring_problems": 60})
    return mixed_problems(recipe)


@pytest.fixture(scope="module")
def rows(problems) -> list[dict]:
    recipe = dataclasses.replace(
        EmbeddedRecipe(), **{**COLORING_VARIANT, "work_fraction": 0.5, "team_fraction": 0.5}
    )
    return recipe_transcripts(recipe, problems, 0, 1.0)


def test_the_build_reads_coloring_train_problems_only(problems) -> None:
    assert {p["metadata"]["source"] for p in problems} == {"coloring"}
    assert all(p["id"].startswith("coloring/train/") for p in problems)
    assert {p["metadata"]["difficulty"] for p in problems} == set(
        COLORING_VARIANT["coloring_difficulty"]
    )


def test_slips_are_wrong_and_keep_the_fixed_colours(problems) -> None:
    rng = random.Random(0)
    for problem in problems:
        for _ in range(5):
            wrong = slip(problem, rng)
            assert wrong != solution(problem)
            assert all(wrong[v] == c for v, c in problem["metadata"]["fixed"])
            # the colouring is unique, so every slip clashes somewhere: the critic can name it
            assert check_reply(problem, wrong).endswith(". Verdict: incorrect")
            assert VERIFIER.verify(solve_reply(problem, wrong), problem["answer"]).score == 0


def test_every_target_reply_is_right(problems, rows) -> None:
    by_question = {p["question"]: p for p in problems}
    roles = set()
    for row in rows:
        role, reply = row["role"], row["messages"][-1]["content"]
        prompt = row["messages"][-2]["content"]
        problem = next(p for q, p in by_question.items() if q in prompt)
        roles.add(role)
        if role in ("solver", "variant", "debater"):
            assert VERIFIER.verify(reply, problem["answer"]).score == 1.0
            for vertex, colour, a, b in re.findall(r"(\d+) ([ABC]) by (\d+) (\d+)", reply):
                # a worked step: the two neighbours named hold the other two colours
                right = solution(problem)
                assert {right[int(a)], right[int(b)], colour} == {"A", "B", "C"}
                assert right[int(vertex)] == colour
                assert sorted([int(vertex), int(a)]) in problem["metadata"]["edges"]
                assert sorted([int(vertex), int(b)]) in problem["metadata"]["edges"]
        elif role == "critic":
            shown = re.search(r"\\boxed\{[^}]*\}", prompt).group()
            right = VERIFIER.verify(shown, problem["answer"]).correct
            colours = re.findall(r"\d+ ([ABC])", shown)
            edges = problem["metadata"]["edges"]
            scanned = re.findall(r"(\d+) (\d+) ([ABC]) ([ABC])", reply)
            # one mark per edge in listed order, each end's colour looked up, to the first clash
            assert [(int(u), int(v)) for u, v, _, _ in scanned] == [
                tuple(e) for e in edges[: len(scanned)]
            ]
            assert all(colours[int(u)] == a and colours[int(v)] == b for u, v, a, b in scanned)
            if right:
                assert reply.endswith(" OK. Verdict: correct") and len(scanned) == len(edges)
            else:
                first = FAULTS.faults(shown, problem["answer"])[0]
                assert reply.endswith(f" BAD {first}. Verdict: incorrect")
                assert FAULTS.named(reply) == [first]
            assert prompt.index("\\boxed") < prompt.index("Edges:")  # colouring first
        elif role == "refiner":
            latest = re.search(r"Latest solution:\n(\\boxed\{[^}]*\})", prompt).group(1)
            assert prompt.endswith("Write the patch: only what changes.")  # the run's protocol
            after = FAULTS.patch(latest, reply, problem["answer"]) or latest
            faults = FAULTS.faults(latest, problem["answer"])
            colours = re.findall(r"\d+ ([ABC])", latest)
            if faults:  # shown the first clash alone; one end moves by the min-conflicts rule
                assert f"Reviewer feedback:\nBAD {faults[0]}. Verdict: incorrect" in prompt
                vertex, colour = min_conflicts(problem, colours)
                assert reply == f"\\boxed{{{vertex} {colour}}}"
                assert vertex not in {v for v, _ in problem["metadata"]["fixed"]}
                assert faults[0] not in FAULTS.faults(after, problem["answer"])
            else:  # an accepted colouring is kept
                assert reply == "Keep." and after == latest
    assert roles == {"solver", "critic", "refiner", "variant", "debater"}
    solver = [r["messages"][-1]["content"] for r in rows if r["role"] == "solver"]
    assert 0 < sum(" by " in reply for reply in solver) < len(solver)  # worked and at a glance


def test_the_refiner_forms_patch_and_rewrite(problems) -> None:
    problem = problems[0]
    wrong = slip(problem, random.Random(1))
    patch, fixed = repair_reply(problem, wrong, patch=True)
    rewrite, same = repair_reply(problem, wrong, patch=False)
    assert re.fullmatch(r"\\boxed\{\d+ [ABC]\}", patch)
    assert rewrite == solve_reply(problem, fixed) and fixed == same
    assert repair_reply(problem, solution(problem), patch=True) == ("Keep.", solution(problem))


def test_each_task_has_its_shipped_model() -> None:
    assert model_for("coloring") == SHIPPED_COLORING
    assert model_for("coloring+unknown") == SHIPPED_COLORING
    assert model_for("unknown") == model_for(None) == model_for("reach") == SHIPPED


def test_the_coloring_recipe_key_leaves_the_shipped_key_alone() -> None:
    shipped = EmbeddedRecipe()
    assert json.loads((SHIPPED / "recipe.json").read_text())["key"] == shipped.key()
    variant = dataclasses.replace(shipped, **COLORING_VARIANT)
    assert variant.key() != shipped.key()


def test_a_missing_family_model_names_its_build(tmp_path, monkeypatch) -> None:
    from trainers import embedded

    monkeypatch.setattr(embedded, "VARIANT_OUT", {"coloring": tmp_path})
    with pytest.raises(embedded.EmbeddedModelError, match=r"build_embedded\.py --variant coloring"):
        embedded.check_model_dir(tmp_path)
    with pytest.raises(embedded.EmbeddedModelError, match=r"build_embedded\.py`"):
        embedded.check_model_dir(tmp_path / "other")


def test_scan_drills_hold_the_critics_lookups() -> None:
    rows = scan_drill_rows(200, 0)
    clashes = 0
    for row in rows:
        prompt, reply = row["messages"][1]["content"], row["messages"][2]["content"]
        colours = re.findall(r"\d+ ([ABC])", prompt.split("\n")[0])
        edges = [tuple(map(int, e)) for e in re.findall(r"(\d+) (\d+)", prompt.split("\n")[1])]
        problem = {"metadata": {"edges": [list(e) for e in edges]}}
        assert reply == check_reply(problem, colours)
        clashes += "BAD" in reply
    assert 60 < clashes < 140  # about half hold a clash


def test_real_length_scan_drills_scan_train_graphs_right_or_slipped() -> None:
    problems = list(envs.make_task("coloring", split="train", size=6, difficulty=[4]).source)
    rows = scan_drill_rows(60, 0, problems)
    wrong = 0
    for i, row in enumerate(rows):
        problem = problems[i % len(problems)]
        prompt, reply = row["messages"][1]["content"], row["messages"][2]["content"]
        colours = re.findall(r"\d+ ([ABC])", prompt.split("\n")[0])
        listed = ", ".join(f"{u} {v}" for u, v in problem["metadata"]["edges"])
        assert prompt.split("\n")[1] == f"Edges: {listed}."  # the graph itself, all 27 edges
        assert reply == check_reply(problem, colours)
        wrong += colours != solution(problem)
        assert ("BAD" in reply) == (colours != solution(problem))  # a slip always clashes
    assert 15 < wrong < 45


def test_the_coloring_probe_scores_marks_and_verdicts() -> None:
    targets = {
        r["messages"][1]["content"]: r["messages"][2]["content"] for r in scan_drill_rows(20, 12345)
    }

    class Echo:  # replies the drill's own target: every mark and verdict right
        def act(self, observations):
            return [targets[o["prompt"]] for o in observations]

    class Blank:
        def act(self, observations):
            return ["OK. Verdict: correct"] * len(observations)

    assert "marks right 1.000, verdicts right 1.000" in probe_coloring.probe_drills(Echo(), 20)
    assert "marks right 0.000" in probe_coloring.probe_drills(Blank(), 20)
    rates = probe_coloring._rates([(True, True, None), (False, False, True), (False, True, None)])
    assert rates == "TPR 1.00 TNR 0.50 balanced 0.75 named real 1.00"


def test_the_probe_counts_near_misses_and_sets_the_refiner_against_the_scripted_patch(problems):
    sample = [p for p in problems if p["metadata"]["difficulty"] == 3][:6]
    rng = random.Random(2)
    wrong = [slip(p, rng) for p in sample[:4]]
    answers = [solve_reply(p, w) for p, w in zip(sample, wrong, strict=False)]
    answers += [solve_reply(sample[4]), "no colouring"]
    line = probe_coloring.solver_line(sample, answers)
    near = sum(
        0 < sum(a != b for a, b in zip(w, solution(p), strict=True)) <= 2
        for p, w in zip(sample, wrong, strict=False)
    )
    assert line.startswith(f"solver right {1 / 6:.3f}, misses within 2 vertices {near} of 5")
    assert "(unread 1)" in line

    env = envs.make("math/reflection-v0", task="coloring", refiner_mode="patch", feedback="fault")

    class Scripted:  # the scripted patch itself: agrees with it every time
        def act(self, observations):
            replies = []
            for obs in observations:
                i = next(i for i, p in enumerate(sample) if p["question"] == obs["question"])
                vertex, colour = min_conflicts(sample[i], wrong[i])
                replies.append(f"\\boxed{{{vertex} {colour}}}")
            return replies

    class Idle:
        def act(self, observations):
            return ["Keep."] * len(observations)

    same = probe_coloring.refiner_line(env.unwrapped, Scripted(), sample, answers)
    assert same.startswith("refiner on 4 named clashes: the scripted patch 1.00")
    idle = probe_coloring.refiner_line(env.unwrapped, Idle(), sample, answers)
    assert "the scripted patch 0.00, fewer clashes 0.00" in idle


def test_the_transcripts_play_the_protocol_a_coloring_run_plays(problems):
    from trainers.embedded.transcripts import _family_envs, family_protocol

    run = envs.spec("math/reflection-v0").run_defaults("coloring")
    protocol = family_protocol("coloring")
    assert (
        {k: run[k] for k in protocol} == protocol == {"refiner_mode": "patch", "feedback": "fault"}
    )
    reflection = _family_envs(problems)["coloring"][0]  # the env the transcripts are played through
    assert {k: getattr(reflection.options, k) for k in protocol} == protocol


def test_length_batched_batches_hold_one_length_in_a_shuffled_order(problems):
    from trainers.embedded.sft import length_batched

    recipe = dataclasses.replace(EmbeddedRecipe(), **COLORING_VARIANT)
    rows = recipe_transcripts(recipe, problems, 0, 0.5)
    steps, size = 2 * len(rows) // 8 + 3, 8  # a little over two passes

    def length(row: dict) -> int:
        return sum(len(m["content"]) for m in row["messages"])

    ordered = length_batched(rows, size, steps, seed=0)
    assert len(ordered) == steps * size
    assert ordered == length_batched(rows, size, steps, seed=0)  # seeded
    whole = len(rows) // size * size
    assert len({id(r) for r in ordered[:whole]}) == whole  # a pass holds a row at most once
    batches = [ordered[i : i + size] for i in range(0, len(ordered), size)]
    spreads = [max(map(length, b)) - min(map(length, b)) for b in batches[:-1]]
    lengths = sorted(map(length, rows))
    assert max(spreads) < (lengths[-1] - lengths[0]) / 4  # each batch: about one length
    firsts = [length(b[0]) for b in batches]
    assert firsts != sorted(firsts) and firsts != sorted(firsts, reverse=True)  # no drift
