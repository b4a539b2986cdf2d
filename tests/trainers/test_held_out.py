"""Every training run checks its evaluation problems against its training problems before it
trains (`trainers.evaluation.held_out.check_held_out`), and evaluates held-out levels only."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from trainers.evaluation import held_out
from trainers.run.args import Job
from trainers.run.bridge import eval_config

CONFIG = SimpleNamespace(temperature=1.0, max_completion_length=32, seed=0, device=None)


def _gsm8k_rows(path, questions):
    path.write_text(
        "".join(
            json.dumps({"question": q, "answer": f"Work.\n#### {i}"}) + "\n"
            for i, q in enumerate(questions)
        )
    )
    return str(path)


def _args(**kwargs):
    return Job.of(env_id="math/solve-v0", **kwargs)


def test_a_run_evaluating_on_its_training_file_refuses_to_start(tmp_path):
    data = _gsm8k_rows(
        tmp_path / "train.jsonl", [f"How many apples are in box {i}?" for i in range(8)]
    )
    args = _args(task="gsm8k", data_path=data, train_problems=8, eval_problems=5)
    with pytest.raises(held_out.OverlapError) as err:
        held_out.check_held_out(args, eval_config(args, "model", CONFIG))
    message = str(err.value)
    assert "5 of the 5 evaluation problems occur among the 8 training problems" in message
    assert message.count("How many apples are in box") == 3  # three examples
    assert "--allow_overlap" in message and "--eval_data_path" in message


def test_overlap_ignores_whitespace_and_case_and_can_be_allowed(tmp_path):
    train = _gsm8k_rows(tmp_path / "train.jsonl", ["What is 2 + 2?", "What is 3 + 3?"])
    held = _gsm8k_rows(tmp_path / "test.jsonl", ["what  IS 3 + 3?", "What is 9 + 9?"])
    args = _args(task="gsm8k", data_path=train, eval_data_path=held, eval_problems=2)
    with pytest.raises(held_out.OverlapError, match="1 of the 2 evaluation problems"):
        held_out.check_held_out(args, eval_config(args, "model", CONFIG))
    allowed = _args(
        task="gsm8k", data_path=train, eval_data_path=held, eval_problems=2, allow_overlap=True
    )
    figures = held_out.check_held_out(allowed, eval_config(allowed, "model", CONFIG))
    assert figures == {"train_problems": 2, "eval_problems": 2, "shared": 1}


def test_a_separate_held_out_file_passes(tmp_path):
    train = _gsm8k_rows(tmp_path / "train.jsonl", ["What is 2 + 2?"])
    held = _gsm8k_rows(tmp_path / "test.jsonl", ["What is 9 + 9?"])
    args = _args(task="gsm8k", data_path=train, eval_data_path=held, eval_problems=1)
    figures = held_out.check_held_out(args, eval_config(args, "model", CONFIG))
    assert figures["shared"] == 0


@pytest.mark.parametrize("eval_split", [None, "validation"])
def test_generated_tasks_pass_and_evaluate_the_levels_that_hold_enough(eval_split):
    args = _args(task="unknown", difficulty=[1, 2, 3], eval_split=eval_split, eval_problems=200)
    evaluation = eval_config(args, "model", CONFIG)
    assert evaluation.levels() == [2, 3]  # level 1 holds 48 test, 47 validation problems
    assert evaluation.protocol.env_kwargs()["split"] == (eval_split or "test")
    assert held_out.check_held_out(args, evaluation)["shared"] == 0
    few = eval_config(_args(task="unknown", eval_problems=60), "model", CONFIG)
    assert few.levels() == [1, 2, 3]


def test_evaluating_on_the_train_split_is_refused():
    with pytest.raises(ValueError, match="eval_split 'train' evaluates on the problems"):
        _args(task="unknown", eval_split="train")


def test_the_training_script_refuses_in_one_line_before_any_model_loads(tmp_path):
    from trainers.run.cli import run_script

    data = _gsm8k_rows(tmp_path / "train.jsonl", [f"What is {i} + {i}?" for i in range(6)])
    argv = ["--task", "gsm8k", "--data_path", data, "--output_dir", str(tmp_path / "out")]
    with pytest.raises(SystemExit) as err:
        run_script("math/reflection-v0", argv)
    assert "refusing to train: 6 of the 6 evaluation problems" in str(err.value)
    assert not (tmp_path / "out" / "metrics.json").exists()


def test_the_report_gives_each_levels_split_sizes_marking_lower_bounds():
    from trainers.evaluation.report.tables import split_size_report
    from trainers.evaluation.splits import level_split_sizes

    sizes = level_split_sizes("unknown", [1, 3], draws=60_000)
    assert sizes["1"] == {"train": 333, "validation": 47, "test": 48, "exact": True}
    assert not sizes["3"]["exact"] and sizes["3"]["test"] > 0
    text = "\n".join(split_size_report(sizes))
    assert "| 1 | 333 | 47 | 48 |" in text and "| 3 | >= " in text


def test_a_run_defaults_to_the_tasks_declared_levels_which_the_embedded_recipe_reads():
    from envs.tasks import default_levels
    from trainers.embedded import EMBEDDED_TASK, EmbeddedRecipe, embedded_levels

    recipe = EmbeddedRecipe()
    assert _args().env.difficulty == default_levels(EMBEDDED_TASK) == list(recipe.difficulty)
    assert embedded_levels("coloring") == default_levels("coloring") == [1, 2, 3, 4]
    assert _args(task="reach").env.difficulty == list(recipe.reach_difficulty) == [1, 2, 3, 4]
    assert _args(task="unknown", difficulty=[3]).env.difficulty == [3]
    assert eval_config(_args(task="reach"), "model", CONFIG).levels() == [1, 2, 3, 4]
