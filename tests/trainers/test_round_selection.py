"""Choosing between SFT / DPO rounds on validation problems (`trainers.algorithms.round_selection`): the best
model is kept (the start model included), a stage stops after ``patience`` rounds without a
better score, a resumed run recovers the best, and the validation problems are held out."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from trainers.algorithms import rounds
from trainers.algorithms.dpo import CPUDPOConfig
from trainers.algorithms.sft import CPUSFTConfig
from trainers.run import train as run_train
from trainers.run import validation as val
from trainers.run.args import Job


def tag(model) -> str:
    return Path(model, "tag.txt").read_text()


@pytest.fixture
def scripted(tmp_path, monkeypatch):
    """Rounds whose models are folders tagged "start", "round-1", ...; each check scores a
    model by its tag from ``scores`` (the test fills it) and counts the checks. No rollout, no
    evaluation before or after."""
    start = tmp_path / "start"
    start.mkdir()
    (start / "config.json").write_text("{}")
    (start / "tag.txt").write_text("start")
    scores: dict[str, float] = {}
    checked: list[str] = []
    inputs: list[str] = []

    def score(self, model):
        checked.append(tag(model))
        return scores[tag(model)], 0.5

    def start_run(job, config, algo):
        out = Path(config.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        return out, {"algo": algo, "start_model": str(start)}

    monkeypatch.setattr(val.Validation, "score", score)
    monkeypatch.setattr(run_train, "start_run", start_run)
    monkeypatch.setattr(run_train, "finish_run", lambda env, config, results, *rest: results)
    monkeypatch.setattr(rounds, "rollout_episodes", lambda *args, **kwargs: [])

    def update(model, episodes, config, out):
        inputs.append(tag(model))
        shutil.copytree(model, out / "model")
        (out / "model" / "tag.txt").write_text(out.name)
        return out / "model", {"steps": 1, "log_history": []}

    env = Job.of(
        env_id="math/reflection-v0",
        model_name_or_path=str(start),
        eval_problems=20,
        max_train_minutes=None,
    )
    return {"scores": scores, "checked": checked, "inputs": inputs, "update": update, "env": env}


def run(scripted, tmp_path, iterations, stages=None, **config):
    config = CPUSFTConfig(output_dir=str(tmp_path / "run"), iterations=iterations, **config)
    stages = stages or [rounds.Stage("sft", scripted["update"], iterations)]
    return run_train.train_rounds(scripted["env"], config, "sft", stages)


def on_disk(tmp_path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "run" / "rounds").iterdir())


def final_tag(tmp_path) -> str:
    return tag(tmp_path / "run" / "final")


def test_the_best_round_is_kept_when_a_later_one_is_worse(scripted, tmp_path):
    scripted["scores"].update({"start": 0.3, "round-1": 0.4, "round-2": 0.5, "round-3": 0.45})
    results = run(scripted, tmp_path, 3)
    records = results["rounds"]
    assert [r["validation"] for r in records] == [0.4, 0.5, 0.45]
    assert [r["improved"] for r in records] == [True, True, False]
    assert [r["best_round"] for r in records] == [1, 2, 2]
    assert results["selected_round"] == 2 and final_tag(tmp_path) == "round-2"
    assert on_disk(tmp_path) == ["round-2", "round-3"]  # the best and the newest, no more
    assert scripted["inputs"] == ["start", "round-1", "round-2"]  # rounds go on from the latest
    selection = results["selection"]
    assert (selection["start"], selection["best"]["score"], selection["metric"]) == (
        0.3,
        0.5,
        "maj1@turnK",
    )
    assert selection["stopped_early"] == [] and selection["seconds"] == 4 * 0.5
    saved = json.loads((tmp_path / "run" / "rounds" / "round-3" / "round.json").read_text())
    assert saved["selection"]["best"]["round"] == 2  # what a resumed run reads back


def test_a_stage_stops_after_patience_rounds_without_a_better_score(scripted, tmp_path):
    scripted["scores"].update(
        {"start": 0.3, "round-1": 0.5, "round-2": 0.4, "round-3": 0.5, "round-4": 0.9}
    )
    results = run(scripted, tmp_path, 10, patience=2)
    assert len(results["rounds"]) == 3  # round 3 only ties the best: not a better score
    assert results["selection"]["stopped_early"] == ["sft"]
    assert results["selected_round"] == 1 and final_tag(tmp_path) == "round-1"
    assert on_disk(tmp_path) == ["round-1", "round-3"]


def test_patience_zero_never_stops_early(scripted, tmp_path):
    scripted["scores"].update(
        {"start": 0.3, "round-1": 0.5, "round-2": 0.4, "round-3": 0.4, "round-4": 0.9}
    )
    results = run(scripted, tmp_path, 4, patience=0)
    assert len(results["rounds"]) == 4 and results["selection"]["stopped_early"] == []
    assert results["selected_round"] == 4 and final_tag(tmp_path) == "round-4"


def test_the_start_model_is_kept_when_no_round_beats_it(scripted, tmp_path):
    scripted["scores"].update({"start": 0.5, "round-1": 0.4, "round-2": 0.5})
    results = run(scripted, tmp_path, 5)
    assert len(results["rounds"]) == 2 and results["selected_round"] == 0
    assert final_tag(tmp_path) == "start"
    assert on_disk(tmp_path) == ["round-2"]  # the start model lives outside rounds/


def test_a_later_stage_starts_from_the_best_model_so_far(scripted, tmp_path):
    scripted["scores"].update(
        {"start": 0.3, "round-1": 0.5, "round-2": 0.4, "round-3": 0.4, "round-4": 0.6}
    )
    update = scripted["update"]
    stages = [rounds.Stage("sft", update, 10), rounds.Stage("dpo", update, 1)]
    results = run(scripted, tmp_path, 10, stages=stages, patience=2)
    assert [r["stage"] for r in results["rounds"]] == ["sft"] * 3 + ["dpo"]
    assert scripted["inputs"] == ["start", "round-1", "round-2", "round-1"]
    assert results["selected_round"] == 4 and final_tag(tmp_path) == "round-4"


def test_a_resumed_run_recovers_the_best_and_the_rounds_without_improvement(scripted, tmp_path):
    scripted["scores"].update(
        {"start": 0.3, "round-1": 0.6, "round-2": 0.4, "round-3": 0.5, "round-4": 0.5}
    )
    first = run(scripted, tmp_path, 3, patience=0)
    assert first["selected_round"] == 1 and on_disk(tmp_path) == ["round-1", "round-3"]
    scripted["checked"].clear()
    again = run(scripted, tmp_path, 10, patience=3, resume_from_checkpoint="true")
    assert scripted["checked"] == ["round-4"]  # neither the start nor round 1 scored again
    assert again["rounds"][:3] == first["rounds"] and len(again["rounds"]) == 4
    assert again["selection"]["stopped_early"] == ["sft"]  # rounds 2, 3, 4 without a better one
    assert again["selection"]["start"] == 0.3
    assert again["selected_round"] == 1 and final_tag(tmp_path) == "round-1"
    assert on_disk(tmp_path) == ["round-1", "round-4"]
    scripted["checked"].clear()
    third = run(scripted, tmp_path, 10, patience=3, resume_from_checkpoint="true")
    assert scripted["checked"] == [] and len(third["rounds"]) == 4  # the stage had stopped


def test_a_resumed_run_whose_check_changed_selects_afresh(scripted, tmp_path):
    scripted["scores"].update({"start": 0.3, "round-1": 0.6, "round-2": 0.4, "round-3": 0.5})
    run(scripted, tmp_path, 2, patience=0)
    scripted["checked"].clear()
    again = run(
        scripted, tmp_path, 3, patience=0, validation_problems=7, resume_from_checkpoint="true"
    )
    assert scripted["checked"] == ["round-2", "round-3"]  # the resumed model scored first
    assert again["selected_round"] == 3 and final_tag(tmp_path) == "round-3"


def test_selection_off_keeps_the_newest_round(scripted, tmp_path):
    scripted["scores"].update({"start": 0.9, "round-1": 0.1, "round-2": 0.1, "round-3": 0.1})
    results = run(scripted, tmp_path, 3, select_on_validation=False)
    assert scripted["checked"] == [] and len(results["rounds"]) == 3
    assert all("validation" not in r for r in results["rounds"])
    assert results["selected_round"] == 3 and final_tag(tmp_path) == "round-3"
    assert results["selection"] == {"enabled": False, "reason": "--select_on_validation false"}
    assert on_disk(tmp_path) == ["round-3"]  # one model on disk, as before


def test_no_evaluation_means_no_validation_check(scripted, tmp_path):
    scripted["scores"].update({"start": 0.9, "round-1": 0.1})
    scripted["env"].eval.eval_problems = 0
    results = run(scripted, tmp_path, 1)
    assert scripted["checked"] == [] and final_tag(tmp_path) == "round-1"
    assert "--eval_problems 0" in results["selection"]["reason"]


def test_an_unknown_select_metric_stops_the_run_before_any_round(tiny_model, tmp_path):
    env = Job.of(
        env_id="math/reflection-v0",
        model_name_or_path=tiny_model,
        task="arithmetic",
        difficulty=[1],
        rounds=1,
        eval_problems=1,
        eval_samples=1,
    )
    config = CPUSFTConfig(
        output_dir=str(tmp_path / "run"),
        select_metric="maj@turnK",
        validation_problems=2,
        max_completion_length=4,
    )

    def update(*args):
        raise AssertionError("no round should be played")

    with pytest.raises(ValueError, match=r"select_metric 'maj@turnK' is not a figure.*maj1@turnK"):
        run_train.train_rounds(env, config, "sft", [rounds.Stage("sft", update, 3)])
    assert not (tmp_path / "run" / "rounds").exists()


def test_metric_of_takes_numeric_figures_only():
    metrics = {"maj1@turnK": 0.5, "accuracy": 1, "agents": {"solver_0": {}}, "flag": True}
    assert val.metric_of(metrics, "accuracy") == 1.0
    for key in ("agents", "flag", "nope"):
        with pytest.raises(ValueError, match=r"pass one of: accuracy, maj1@turnK$"):
            val.metric_of(metrics, key)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("validation_problems", 0, "validation_problems=0"),
        ("validation_samples", 0, "validation_samples=0"),
        ("patience", -1, "patience=-1"),
        ("select_metric", "", "select_metric is empty"),
    ],
)
def test_selection_settings_are_checked(tmp_path, field, value, message):
    for config_cls in (CPUSFTConfig, CPUDPOConfig):
        with pytest.raises(ValueError, match=message):
            config_cls(output_dir=str(tmp_path), **{field: value})


def test_offline_scripts_select_on_validation_by_default():
    from trainers.run.cli import make_parser

    for algo in ("sft", "dpo"):
        parser, _ = make_parser(algo, "math/reflection-v0")
        config = parser.parse_args_and_config([])[1]
        assert config.select_on_validation and config.select_metric == "maj1@turnK"
        assert (config.validation_problems, config.validation_samples, config.patience) == (
            100,
            1,
            2,
        )
        flagged = parser.parse_args_and_config(["--patience", "0", "--select_metric", "accuracy"])
        assert (flagged[1].patience, flagged[1].select_metric) == (0, "accuracy")


def test_a_generated_task_validates_on_its_validation_split_apart_from_the_evaluation():
    env = Job.of(env_id="math/reflection-v0", eval_problems=30, difficulty=[2, 3])
    config = CPUSFTConfig(output_dir="unused", validation_problems=20)
    check, why = val.validation_check(env, config, "model")
    assert why == "" and check is not None
    evaluation = check.evaluation
    assert (evaluation.problems.split, evaluation.problems.offset, evaluation.problems.count) == (
        "validation",
        0,
        20,
    )
    assert (evaluation.samples, evaluation.compare, evaluation.intervals) == (1, False, False)
    held = evaluation.problems.problems()
    assert len(held) == 20
    assert {p["id"].split("/")[1] for p in held} == {"validation"}

    env.eval.eval_split = "validation"  # the evaluation reads the validation split too: after it
    check, _ = val.validation_check(env, config, "model")
    assert check is not None and check.evaluation.problems.offset == 30
    import envs
    from trainers.run.bridge import eval_config

    evaluated = eval_config(env, "model", config)
    held = check.evaluation.problems.problems()
    assert len(held) == 20 and check.evaluation.problems.offset == 30
    assert not envs.overlap(held, evaluated.problems.problems())


def test_a_task_without_validation_split_holds_out_training_problems_no_round_plays(
    gsm8k_file, tmp_path
):
    from tests.utils import write_jsonl

    held_out = write_jsonl(
        tmp_path / "dev.jsonl",
        [{"question": f"What is {i} + 100?", "answer": f"#### {i + 100}"} for i in range(5)],
    )
    env = Job.of(
        env_id="math/reflection-v0",
        task="gsm8k",
        data_path=str(gsm8k_file),
        eval_data_path=str(held_out),
        train_problems=5,
        eval_problems=5,
    )
    config = CPUSFTConfig(output_dir="unused", validation_problems=4, rollout_problems=3)
    check, why = val.validation_check(env, config, "model")
    assert why == "" and check is not None
    assert (check.evaluation.problems.offset, check.evaluation.problems.count) == (5, 4)
    validation = {p["id"] for p in check.evaluation.problems.problems()}
    # round k plays problems k*3, k*3+1, k*3+2 of the first 5, wrapping around them
    played = {p["id"] for p in env.train_set("train", 5).problems()}
    assert len(validation) == 4 and not validation & played

    config.validation_problems = 8  # 12 problems: 5 train + 8 do not fit
    check, why = val.validation_check(env, config, "model")
    assert check is None and "holds 12 problems" in why and "--validation_problems 8" in why

    # the evaluation reads the whole training file (--allow_overlap): its problems are off
    env.eval.eval_data_path, env.eval.eval_problems = None, 12
    config.validation_problems = 4
    check, why = val.validation_check(env, config, "model")
    assert check is None and "occur among the evaluation problems" in why
