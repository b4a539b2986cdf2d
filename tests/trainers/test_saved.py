"""What a trained model carries (`trainers.evaluation.saved`: its run's protocol and evaluation)
and how ``mathteams evaluate`` and ``evaluate(model=...)`` replay it. The end-to-end check
(train 1 step, ``evaluate(model=RUN/final)`` from Python, the same config as the run's own
after-training evaluation) is `tests/trainers/test_run.py::test_evaluate_a_run_folder_replays_its_evaluation`."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from envs.protocol import Protocol, ProtocolError
from envs.tasks.problems import ProblemSet
from trainers.evaluation.config import EvalConfig
from trainers.evaluation.saved import (
    SAVED_FILE,
    for_model,
    read_saved,
    saved_data,
    trained_evaluation,
)
from trainers.run.args import Job
from trainers.run.bridge import eval_config
from trainers.run.evaluate_args import make_parser
from trainers.run.evaluate_cli import resolve

CONFIG = SimpleNamespace(max_completion_length=40, temperature=0.7, seed=3)


def _saved(folder, **options):
    job = Job.of(
        env_id="math/reflection-v0", task="unknown", difficulty=[2], eval_problems=30, **options
    )
    after = eval_config(job, str(folder), CONFIG)
    folder.mkdir(parents=True, exist_ok=True)
    data = saved_data(folder, job.protocol(config=CONFIG), after, "grpo")
    (folder / SAVED_FILE).write_text(json.dumps(data))
    return job, after


def test_a_saved_run_reads_back_as_written(tmp_path):
    job, after = _saved(tmp_path, rounds=1, audit="critic,refiner", refiner_mode="patch")
    saved = read_saved(tmp_path)
    assert saved.algo == "grpo" and saved.protocol == job.protocol(config=CONFIG)
    assert saved.protocol.options["audit"] == ("critic", "refiner")
    assert saved.protocol.max_completion_length == 40 and saved.protocol.temperature == 0.7
    assert saved.evaluation == after  # the folder's own path written relative, read back whole
    data = json.loads((tmp_path / SAVED_FILE).read_text())
    assert data["evaluation"]["players"]["model"] == "."
    assert data["protocol"]["base_model"] is None  # the embedded default


def test_a_moved_folder_still_plays_itself(tmp_path):
    _saved(tmp_path / "a")
    (tmp_path / "a").rename(tmp_path / "b")
    assert read_saved(tmp_path / "b").evaluation.model == str(tmp_path / "b")


def test_no_saved_run_where_there_is_no_file_or_no_folder(tmp_path):
    assert read_saved(None) is None
    assert read_saved(tmp_path) is None
    assert read_saved("Qwen/Qwen2.5-0.5B-Instruct") is None


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("{not json", "not readable JSON"),
        ("[1, 2]", "expected an object with the keys format, algo, protocol, evaluation"),
        ('{"format": 2, "protocol": {}, "rnds": 2}', "got .*rnds"),
        ('{"format": 9}', "format 2"),
        ('{"format": 2, "protocol": {"env_id": "math/reflection-v0", "rnds": 2}}', "rnds"),
        ('{"format": 2, "protocol": {"problems": {"task": "unknown", "lvls": [1]}}}', "lvls"),
        ('{"format": 2, "protocol": {"options": {"rounds": -1}}}', "rounds"),
        ('{"format": 1, "env_id": "math/reflection-v0", "env_options": [1]}', "format-1"),
    ],
)
def test_a_bad_file_is_refused_naming_it_and_what_was_expected(tmp_path, text, match):
    (tmp_path / SAVED_FILE).write_text(text)
    with pytest.raises(ProtocolError, match=match) as err:
        read_saved(tmp_path)
    assert str(tmp_path) in str(err.value)


def test_a_format_one_file_plays_its_task_and_levels_held_out(tmp_path):
    (tmp_path / SAVED_FILE).write_text(
        json.dumps(
            {
                "format": 1,
                "env_id": "math/reflection-v0",
                "task": "unknown",
                "difficulty": [2],
                "env_options": {"verifier": "math", "rounds": 1},
                "max_completion_length": 40,
                "temperature": 0.7,
                "algo": "grpo",
            }
        )
    )
    saved = read_saved(tmp_path)
    config = trained_evaluation(saved, tmp_path)
    assert config.model == str(tmp_path) and config.problems.split == "test"
    assert config.levels() == [2] and config.problems.verifier == "math"
    assert config.protocol.options == {"rounds": 1} and config.protocol.temperature == 0.7


def _resolved(argv):
    """`argv` resolved as ``mathteams evaluate`` resolves it."""
    parser = make_parser()

    def error(message):
        raise SystemExit(message)

    return resolve(parser.parse_args(argv), error)


def test_evaluate_replays_the_run_and_a_flag_overrides_it(tmp_path):
    _, after = _saved(tmp_path, rounds=1, audit="critic", refiner_mode="patch")
    config = _resolved(["--model_name_or_path", str(tmp_path)])
    assert config.protocol == after.protocol and config.seed == 3
    assert config.problems.count == 30 and config.model == str(tmp_path)
    config = _resolved(["--model_name_or_path", str(tmp_path), "--rounds", "3", "--audit", ""])
    options = config.protocol.options
    assert (options["rounds"], options["audit"], options["refiner_mode"]) == (3, (), "patch")
    assert config.protocol.temperature == 0.7 and config.protocol.max_completion_length == 40


def test_a_saved_run_of_another_env_does_not_apply(tmp_path, capsys):
    _saved(tmp_path, rounds=1)
    config = _resolved(["--model_name_or_path", str(tmp_path), "--env_id", "math/debate-v0"])
    assert config.env_id == "math/debate-v0" and config.protocol.temperature == 1.0
    assert "was trained on math/reflection-v0" in capsys.readouterr().out


def test_an_option_of_another_env_is_refused_naming_the_envs_that_take_it():
    with pytest.raises(SystemExit, match="math/debate-v0 takes no option --refiner_mode"):
        _resolved(["--env_id", "math/debate-v0", "--refiner_mode", "patch"])
    with pytest.raises(SystemExit, match="--num_agents is math/debate-v0, math/ensemble-v0's"):
        _resolved(["--num_agents", "2"])


def test_python_evaluation_of_a_folder_plays_its_evaluation_with_overrides(tmp_path):
    _, after = _saved(tmp_path, rounds=1)
    assert for_model(tmp_path) == after
    assert for_model(tmp_path, samples=4).samples == 4
    plain = for_model(tmp_path / "nothing-saved")
    assert plain.protocol == EvalConfig().protocol and plain.model == str(
        tmp_path / "nothing-saved"
    )


def test_replacing_the_env_drops_its_options_and_naming_the_same_env_keeps_them():
    config = EvalConfig.of(env_options={"rounds": 1})
    assert config.replaced(env_id="math/reflection-v0").protocol.options == {"rounds": 1}
    assert config.replaced(env_id="math/debate-v0").protocol.options == {}


def test_a_protocol_round_trips_through_its_json_form():
    protocol = Protocol(
        "math/reflection-v0",
        ProblemSet("unknown", split="test", levels=(2, 3), count=5, verifier="math"),
        {"rounds": 1, "audit": ("critic",)},
        64,
        0.5,
        "HuggingFaceTB/SmolLM2-135M-Instruct",
    )
    assert Protocol.from_dict(json.loads(json.dumps(protocol.to_dict()))) == protocol
    assert protocol.env_kwargs()["verifier"] == "math"
    assert protocol.env_kwargs("math/solve-v0") == {
        "task": "unknown",
        "split": "test",
        "task_kwargs": {"difficulty": [2, 3], "size": 5},
        "verifier": "math",
    }
