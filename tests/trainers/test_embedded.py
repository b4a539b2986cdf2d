"""The embedded default: its transcripts, its recipe, its build and the shipped files."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

import envs
from envs.reflection import parse_verdict
from rewards.extract import last_boxed
from tests.trainers.helpers import TINY, TINY_NUMBERS
from trainers.embedded import (
    MODEL_FILES,
    SHIPPED,
    EmbeddedModelError,
    EmbeddedRecipe,
    build_embedded,
    calibrate,
    check_model_dir,
    fit_logit_scale,
    resolve_model,
)
from trainers.embedded.transcripts import (
    check_reply,
    claimed_answer,
    plan_reply,
    program_reply,
    program_slip,
    reach_check_reply,
    reach_fact,
    reach_slip,
    repair_reply,
    sft_rows,
    slip,
    solve_reply,
    work_reply,
)


def answer_end(problem):
    return problem["metadata"]["end"]


@pytest.mark.parametrize("difficulty", [1, 2, 3, 4])
def test_transcripts_check_by_substitution_and_repair_by_the_miss(difficulty):
    import random

    rng = random.Random(difficulty)
    verifier = envs.make_task("unknown").verifier
    for problem in envs.make_task("unknown", difficulty=difficulty, size=60).source:
        start, answer = problem["metadata"]["start"], problem["answer"]
        assert verifier.verify(solve_reply(problem), answer).score == 1.0
        right = check_reply(problem, start)
        assert parse_verdict(right) is True and f"Check {start}:" in right
        end = answer_end(problem)
        assert right.count("=") == difficulty + 2 and f"= {end}? " in right
        assert f". {end} - {end} = 0: it checks." in right
        assert claimed_answer(repair_reply(problem, start)) == start
        assert repair_reply(problem, start).startswith("The check passed.")
        wrong = slip(problem, rng)
        assert wrong != start and wrong >= 0
        flagged = check_reply(problem, wrong)
        assert parse_verdict(flagged) is False
        miss = abs(wrong - start)
        assert f" - {end} = {wrong - start}: {miss} too {'few' if wrong < start else 'many'}." in (
            flagged
        )
        fixed = repair_reply(problem, wrong)
        assert verifier.verify(fixed, answer).score == 1.0
        assert f"{wrong} {'+' if wrong < start else '-'} {miss} = {start}." in fixed
    assert parse_verdict(check_reply(problem, None)) is False
    assert claimed_answer("no box") is None and claimed_answer("\\boxed{x}") is None


@pytest.mark.parametrize("difficulty", [1, 2, 3])
def test_worked_replies_undo_the_steps_backwards_one_equation_each(difficulty):
    import re

    from envs.tasks.arithmetic import APPLY

    verifier = envs.make_task("unknown").verifier
    for problem in envs.make_task("unknown", difficulty=difficulty, size=40).source:
        meta = problem["metadata"]
        reply = work_reply(problem)
        assert reply.startswith(f"Work back from {meta['end']}: ")
        assert verifier.verify(reply, problem["answer"]).score == 1.0
        steps = re.findall(r"(\d+) ([+-]) (\d+) = (-?\d+)\.", reply)
        assert len(steps) == difficulty
        value = meta["end"]
        for (a, op, k, b), (forward_op, forward_k) in zip(
            steps, reversed(meta["steps"]), strict=True
        ):  # each step undoes the problem's steps from the last, the value carried along
            assert int(a) == value and int(k) == forward_k and op != forward_op
            value = APPLY[op](value, int(k))
            assert int(b) == value
        wrong = work_reply(problem, meta["start"] + 3)
        assert claimed_answer(wrong) == meta["start"] + 3
        assert wrong.rsplit(" = ", 1)[0] == reply.rsplit(" = ", 1)[0]  # the slip is the last


def test_work_fraction_sets_the_share_of_worked_solver_replies():
    problems = list(envs.make_task("unknown", size=200, difficulty=[1, 2, 3]).source)

    def worked(fraction):
        rows = sft_rows(problems, 0, 0.0, 0.0, 0.0, work_fraction=fraction)
        solver = [r["messages"][-1]["content"] for r in rows if r["role"] == "solver"]
        return sum(reply.startswith("Work back") for reply in solver) / len(solver)

    assert worked(0.0) == 0.0 and worked(1.0) == 1.0
    assert 0.25 < worked(0.35) < 0.45


def test_rework_fraction_reworks_rejected_answers_and_changes_no_other_row():
    problems = list(envs.make_task("unknown", size=300, difficulty=[1, 2, 3]).source)
    plain = sft_rows(problems, 0, 1.0, 1.0, 0.2, work_fraction=0.35)
    reworked = sft_rows(problems, 0, 1.0, 1.0, 0.2, work_fraction=0.35, rework_fraction=0.5)
    assert len(plain) == len(reworked)
    changed = [(a, b) for a, b in zip(plain, reworked, strict=True) if a != b]
    assert changed and {a["role"] for a, _ in changed} == {"refiner"}
    for before, after in changed:  # a repair by the miss became a fresh worked answer
        assert before["messages"][:-1] == after["messages"][:-1]
        assert " so the start is " in before["messages"][-1]["content"]
        reply = after["messages"][-1]["content"]
        assert reply.startswith("Work back from ")
        assert claimed_answer(reply) == claimed_answer(before["messages"][-1]["content"])
    repairs = [
        r
        for r in plain
        if r["role"] == "refiner" and " so the start is " in r["messages"][-1]["content"]
    ]
    assert 0.4 < len(changed) / len(repairs) < 0.6
    kept = [
        r
        for r in reworked
        if r["role"] == "refiner" and "check passed" in r["messages"][-1]["content"]
    ]
    assert kept  # an accepted answer is still kept as it is


@pytest.mark.parametrize("difficulty", [1, 2, 3])
def test_plans_restate_the_problem_and_programs_search_for_the_start(difficulty):
    import random

    from envs.program import extract_code
    from envs.sandbox import SandboxConfig, run_code

    config = SandboxConfig(timeout_s=5.0)
    rng = random.Random(difficulty)
    for problem in envs.make_task("unknown", difficulty=difficulty, size=12).source:
        meta = problem["metadata"]
        equation = problem["question"].removeprefix("Find x: ").rstrip(".")
        assert plan_reply(problem) == f"Try each x from 0 to 99 until {equation}."
        program = program_reply(problem)
        assert program.startswith("```python\nprint(next(x for x in range(100) if ")
        assert equation.replace(" = ", " == ") in program  # a copy, nothing inverted
        assert run_code(extract_code(program)[0], config).answer() == str(meta["start"])
        for _ in range(4):  # a slipped copy never finds the start
            slipped = program_reply(problem, program_slip(problem, rng))
            assert slipped != program
            result = run_code(extract_code(slipped)[0], config)
            assert result.answer() != str(meta["start"])
    with pytest.raises(ValueError, match="slip kind"):
        program_reply(problem, ("typo", 0, 1))


def test_tool_rows_run_their_programs_and_check_the_output():
    problems = list(envs.make_task("unknown", size=24, difficulty=[1, 2, 3]).source)
    rows = sft_rows(problems, 0, 0.0, 0.0, 0.0, tool_fraction=1.0)
    by_role = {}
    for row in rows:
        by_role.setdefault(row["role"], []).append(row)
    assert len(by_role["analyzer"]) == len(by_role["verifier"]) == len(problems)
    assert len(by_role["executor"]) == 2 * len(problems)
    verdicts = []
    for problem, verifier in zip(problems, by_role["verifier"], strict=True):
        shown = verifier["messages"][1]["content"]
        reply = verifier["messages"][-1]["content"]
        verdict = parse_verdict(reply)
        if "exit status 0" in shown:  # the program really ran; the verifier checks its output
            output = int(shown.split("stdout:\n")[1].split()[0])
            assert verdict is (output == problem["metadata"]["start"])
            assert f"Check {output}:" in reply
        else:  # a slipped search that found no x fails, and there is nothing to check
            assert "StopIteration" in shown and verdict is False
            assert reply.startswith("There is no answer to check.")
        verdicts.append(verdict)
    assert 0 < sum(verdicts) < len(verdicts)  # right and slipped programs both reviewed
    for problem, first, second in zip(
        problems, by_role["executor"][::2], by_role["executor"][1::2], strict=True
    ):
        assert first["messages"][-1]["content"] == program_reply(problem)
        assert second["messages"][-1]["content"] == program_reply(problem)
        assert "Reviewer feedback:" in second["messages"][1]["content"]


def test_sft_rows_use_the_envs_own_prompts_and_are_seeded():
    problems = list(envs.make_task("unknown", size=40, difficulty=[1, 2, 3]).source)
    rows = sft_rows(problems, seed=0, review_fraction=1.0, second_round=1.0, team_fraction=1.0)
    assert {r["role"] for r in rows} == {"solver", "critic", "refiner", "variant", "debater"}
    env = envs.make("math/reflection-v0", task="unknown", rounds=2)
    env.reset(options={"problem": problems[0]})
    solver = next(r for r in rows if r["role"] == "solver")
    obs = env.observe("solver_0")
    assert solver["messages"][0] == {"role": "system", "content": obs["instruction"]}
    assert solver["messages"][1] == {"role": "user", "content": obs["prompt"]}
    for row in rows:  # every target reply is right for its problem
        problem = next(p for p in problems if p["question"] in row["messages"][1]["content"])
        reply = row["messages"][-1]["content"]
        if row["role"] == "critic":
            shown = row["messages"][1]["content"].split("Proposed solution:\n")[1]
            claimed = claimed_answer(shown.split("\n\nReview")[0])
            assert parse_verdict(reply) is (claimed == problem["metadata"]["start"])
        else:
            assert claimed_answer(reply) == problem["metadata"]["start"]
    critic_truths = [
        parse_verdict(r["messages"][-1]["content"]) for r in rows if r["role"] == "critic"
    ]
    assert 0.3 < sum(critic_truths) / len(critic_truths) < 0.7  # balanced verdicts
    assert sft_rows(problems, 0, 1.0, 1.0, 1.0) == rows
    assert sft_rows(problems, 1, 1.0, 1.0, 1.0) != rows


def test_reach_rows_are_right_and_their_checks_judge_by_the_replay():
    """Every target reply of a ``reach`` row is right: the solver's, variant's and debater's
    chains and the refiner's after a rejection score 1 with the verifier, a kept chain is the one
    under review, and each check's verdict is the truth of the chain it reviewed."""
    verifier = envs.make_task("reach").verifier
    problems = list(envs.make_task("reach", size=60, difficulty=[1, 2, 3, 4]).source)
    rows = sft_rows(problems, seed=0, review_fraction=1.0, second_round=1.0, team_fraction=1.0)
    assert {r["role"] for r in rows} == {"solver", "critic", "refiner", "variant", "debater"}
    env = envs.make("math/reflection-v0", task="reach", rounds=2)
    env.reset(options={"problem": problems[0]})
    assert rows[0]["messages"][0]["content"] == env.observe("solver_0")["instruction"]
    verdicts = []
    for row in rows:
        problem = next(p for p in problems if p["question"] in row["messages"][1]["content"])
        reply, prompt = row["messages"][-1]["content"], row["messages"][1]["content"]
        if row["role"] == "critic":
            shown = prompt.split("Proposed solution:\n")[1].split("\n\nReview")[0]
            truth = verifier.verify(shown, problem["answer"]).correct
            assert parse_verdict(reply) is truth, (shown, reply)
            assert reply.startswith("Check ")
            verdicts.append(truth)
        elif row["role"] == "refiner" and reply.startswith("The check passed"):
            shown = prompt.split("Latest solution:\n")[1].split("\n\nReviewer")[0]
            assert verifier.verify(shown, problem["answer"]).correct
            assert last_boxed(reply) == last_boxed(shown)
        else:
            assert verifier.verify(reply, problem["answer"]).correct, reply
    assert 0.3 < sum(verdicts) / len(verdicts) < 0.7  # balanced verdicts


def test_reach_checks_replay_with_their_own_results_and_slips_are_wrong():
    import random

    verifier = envs.make_task("reach").verifier
    problem = envs.make_task("reach", difficulty=2).source[0]
    meta = problem["metadata"]
    # A chain that "lands" on the target by a false last step is replayed, not copied.
    rng = random.Random(0)
    slips = [reach_slip(problem, rng) for _ in range(200)]
    assert not any(verifier.verify(f"\\boxed{{{c}}}", problem["answer"]).correct for c in slips)
    landed = [c for c in slips if c.endswith(f"= {meta['target']}")]
    assert landed  # half the slips end on the target by false arithmetic
    check = reach_check_reply(problem, f"\\boxed{{{landed[0]}}}")
    assert check.endswith("Verdict: incorrect") and "too" in check
    right = reach_check_reply(problem, f"\\boxed{{{problem['answer']}}}")
    assert right.endswith(f"{meta['target']} - {meta['target']} = 0: it checks.\nVerdict: correct")
    assert (
        reach_check_reply(problem, "no chain") == "There is no answer to check.\nVerdict: incorrect"
    )


def test_reach_facts_hold():
    import random

    from rewards.arithmetic import false_equations

    rng = random.Random(0)
    facts = " ".join(reach_fact(rng) for _ in range(2000))
    assert false_equations(facts) == []
    assert "*" in facts


def test_number_embeddings_are_cos_sin_features_of_the_number():
    import math

    import torch

    from agents.tiny import build_tiny_model, build_tokenizer, number_embeddings

    tokenizer = build_tokenizer(vocab_size=512, whole_numbers=True)
    model = build_tiny_model(tokenizer, arch="mistral", hidden_size=32, initializer_range=0.02)
    weight = model.get_input_embeddings().weight
    before = weight.detach().clone()
    number_embeddings(model, tokenizer, 4)
    (seven,) = tokenizer.encode("7", add_special_tokens=False)
    (word,) = tokenizer.encode("x", add_special_tokens=False)
    first_period = 2.0  # periods run from 2 to 400: at period 2, 7 is half a turn
    scale = weight[seven, 0].item() / math.cos(2 * math.pi * 7 / first_period)
    assert scale > 0
    assert torch.allclose(weight[seven, 8:], before[seven, 8:])  # only 2 x 4 dims set
    assert torch.equal(weight[word], before[word])  # words keep their random rows
    (seventeen,) = tokenizer.encode("17", add_special_tokens=False)
    assert not torch.allclose(weight[seven, :8], weight[seventeen, :8])
    with pytest.raises(ValueError, match="needs 64 of the 32"):
        number_embeddings(model, tokenizer, 32)


def test_a_recipe_with_too_many_number_features_is_refused():
    with pytest.raises(ValueError, match="number_features=32 needs 64 of the 32"):
        EmbeddedRecipe(hidden_size=32, num_heads=2, number_features=32)


def test_recipe_key_changes_with_the_recipe():
    assert TINY.key() == EmbeddedRecipe(**vars(TINY)).key()
    assert TINY.key() != EmbeddedRecipe(**{**vars(TINY), "seed": 1}).key()
    assert resolve_model("some/hub-id") == "some/hub-id"


def test_the_shipped_model_is_complete_and_built_from_the_current_recipe():
    assert check_model_dir(SHIPPED, EmbeddedRecipe()) == SHIPPED
    assert resolve_model(None) == str(SHIPPED)
    size = sum(p.stat().st_size for p in SHIPPED.iterdir())
    assert size <= 10 * 2**20


def test_a_missing_or_damaged_file_names_itself_and_the_rebuild(tmp_path):
    copy = tmp_path / "model"
    shutil.copytree(SHIPPED, copy)
    assert check_model_dir(copy) == copy
    weights = copy / "model.safetensors"
    good = weights.read_bytes()
    data = bytearray(good)
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    with pytest.raises(EmbeddedModelError, match=r"model\.safetensors is damaged.*build_embedded"):
        check_model_dir(copy)
    weights.write_bytes(good)
    (copy / "tokenizer.json").unlink()
    with pytest.raises(EmbeddedModelError, match=r"tokenizer\.json is missing.*build_embedded"):
        check_model_dir(copy)
    (copy / "recipe.json").write_text("{")
    with pytest.raises(EmbeddedModelError, match=r"recipe\.json is unreadable"):
        check_model_dir(copy)
    with pytest.raises(EmbeddedModelError, match="not the current"):
        check_model_dir(SHIPPED, TINY)


@pytest.fixture(scope="module")
def tiny_numbers_model(tmp_path_factory) -> Path:
    """`TINY_NUMBERS` built once for this module's tests, which only read it."""
    return build_embedded(TINY_NUMBERS, tmp_path_factory.mktemp("numbers") / "model")


@pytest.mark.parametrize(
    ("built", "recipe"),
    [("tiny_model", TINY), ("tiny_numbers_model", TINY_NUMBERS)],
    ids=["digits", "numbers"],
)
def test_build_writes_a_checked_loadable_model(request, built, recipe):
    """The session's `tiny_model` and this module's `tiny_numbers_model` are the builds."""
    from agents import GenerationArguments, HFPolicy

    path = Path(request.getfixturevalue(built))
    info = json.loads((path / "recipe.json").read_text())
    assert info["key"] == recipe.key() and info["sft"]["rows"] > 12
    assert info["sft"]["rows_per_role"].get("drill", 0) == recipe.drill_rows
    assert check_model_dir(path, recipe) == path
    files = {p.name for p in path.iterdir()}
    assert set(MODEL_FILES) | {"recipe.json"} <= files
    assert set(info["files"]) == files - {"recipe.json"}
    assert ("calibration" in info["sft"]) == bool(recipe.calibration_problems)
    policy = HFPolicy.from_pretrained(str(path), GenerationArguments(max_new_tokens=4, seed=0))
    (gen,) = policy.generate([{"instruction": "Solve.", "prompt": "1 + 1?"}])
    assert 1 <= gen.num_tokens <= 4


def test_same_recipe_gives_the_same_bytes(tmp_path, tiny_numbers_model):
    first = tiny_numbers_model
    second = build_embedded(TINY_NUMBERS, tmp_path / "b")
    names = sorted(p.name for p in first.iterdir())
    assert names == sorted(p.name for p in second.iterdir())
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_fit_logit_scale_recovers_the_temperature_the_targets_were_drawn_at():
    import torch

    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(20000, 12, generator=generator) * 2
    targets = torch.multinomial((logits * 2.5).softmax(-1), 1, generator=generator)[:, 0]
    scale, before, after = fit_logit_scale(logits, targets)
    assert scale == pytest.approx(2.5, abs=0.15)
    assert after < before
    assert fit_logit_scale(logits, logits.argmax(-1))[0] == 6.0  # always right: the sharpest


@pytest.mark.parametrize("sharpen", [1.0, 2.0])
def test_calibrate_scales_every_logit_by_the_fitted_scale_and_sharpen(tmp_path, sharpen):
    import torch
    from transformers import AutoModelForCausalLM

    recipe = dataclasses.replace(TINY_NUMBERS, calibration_problems=0)
    path = build_embedded(recipe, tmp_path / "model")
    ids = torch.tensor([[1, 5, 9, 14, 3]])
    before = AutoModelForCausalLM.from_pretrained(path)(input_ids=ids).logits
    fitted = calibrate(path, dataclasses.replace(recipe, calibration_problems=4, sharpen=sharpen))
    after = AutoModelForCausalLM.from_pretrained(path)(input_ids=ids).logits
    assert fitted["nll_after"] <= fitted["nll_before"] and fitted["sharpen"] == sharpen
    expected = before * fitted["logit_scale"] * sharpen
    assert torch.allclose(after, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("sharpen", [0.0, -1.0])
def test_a_sharpen_that_is_not_positive_is_refused(sharpen):
    with pytest.raises(ValueError, match="sharpen"):
        dataclasses.replace(TINY_NUMBERS, sharpen=sharpen)


@pytest.mark.slow
def test_rebuilding_the_shipped_model_gives_the_shipped_bytes():
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "scripts/build_embedded.py", "--check"],
        check=False,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "identical" in done.stdout


def _build_script():
    """``scripts/build_embedded.py``'s code (``mathteams build-embedded``)."""
    from trainers.embedded import cli

    return vars(cli)


def test_build_script_sets_recipe_fields_by_their_type():
    recipe_with = _build_script()["recipe_with"]
    assert recipe_with([]) == EmbeddedRecipe()
    recipe = recipe_with(
        ["tool_fraction=0.1", "max_steps=40", "whole_numbers=false", "difficulty=1,2"]
    )
    assert recipe == dataclasses.replace(
        EmbeddedRecipe(), tool_fraction=0.1, max_steps=40, whole_numbers=False, difficulty=(1, 2)
    )
    assert recipe.key() != EmbeddedRecipe().key()


def test_the_reach_variant_builds_on_both_families_and_keys_apart(monkeypatch):
    from trainers import embedded
    from trainers.embedded import REACH_VARIANT, mixed_problems

    recipe_with = _build_script()["recipe_with"]
    variant = recipe_with(["max_steps=3"], "reach")
    assert variant == dataclasses.replace(EmbeddedRecipe(), **{**REACH_VARIANT, "max_steps": 3})
    assert variant.key() != EmbeddedRecipe().key()
    # the shipped recipe, with no reach rows, keeps the key it had before reach's fields existed
    assert (
        EmbeddedRecipe().key() == dataclasses.replace(EmbeddedRecipe(), reach_difficulty=(2,)).key()
    )
    # new reach transcripts (REACH_VERSION) key the variant apart, and leave the shipped key
    shipped, before = EmbeddedRecipe().key(), variant.key()
    monkeypatch.setattr(embedded, "REACH_VERSION", embedded.REACH_VERSION + 1)
    assert variant.key() != before and EmbeddedRecipe().key() == shipped
    small = dataclasses.replace(variant, num_problems=6, reach_problems=6)
    sources = [p["metadata"]["source"] for p in mixed_problems(small)]
    assert sorted(sources) == ["reach"] * 6 + ["unknown"] * 6
    assert sources != sorted(sources)  # interleaved, so the SFT's batches mix the families


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("tool_share=0.1", "FIELD one of seed, num_problems"),
        ("tool_fraction", "expected FIELD=VALUE"),
        ("max_steps=many", "max_steps needs a value of type int"),
        ("whole_numbers=yes", "whole_numbers needs a value of type bool"),
        ("sharpen=0", "sharpen=0.0 must be > 0"),
    ],
)
def test_build_script_refuses_a_bad_setting_before_building(setting, message):
    recipe_with = _build_script()["recipe_with"]
    with pytest.raises(SystemExit, match=message):
        recipe_with([setting])


def test_build_script_will_not_overwrite_the_shipped_model_with_a_variant(capsys):
    main = _build_script()["main"]
    with pytest.raises(SystemExit):
        main(["--set", "tool_fraction=0.1"])
    assert "give it its own --out" in capsys.readouterr().err
