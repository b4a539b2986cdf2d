"""A trained model's protocol file (`trainers.run.protocol`) and how ``mathteams evaluate``
plays it. The end-to-end check (train 1 step, evaluate with defaults, same options) is
`tests/test_scripts.py::test_train_script_end_to_end`."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from trainers.run.args import Job
from trainers.run.evaluate_cli import make_parser, protocol_defaults, trained_protocol
from trainers.run.protocol import (
    PROTOCOL_FILE,
    ProtocolError,
    protocol_of,
    read_protocol,
    write_protocol,
)


def _protocol(tmp_path, **options):
    job = Job.of(env_id="math/reflection-v0", task="unknown", difficulty=[2], **options)
    config = SimpleNamespace(max_completion_length=40, temperature=0.7)
    write_protocol(tmp_path, protocol_of(job, config, "grpo"))
    return tmp_path


def test_a_written_protocol_reads_back_as_json_writes_it(tmp_path):
    folder = _protocol(tmp_path, rounds=1, audit="critic,refiner", refiner_mode="patch")
    protocol = read_protocol(folder)
    assert protocol["env_id"] == "math/reflection-v0" and protocol["task"] == "unknown"
    assert protocol["difficulty"] == [2] and protocol["algo"] == "grpo"
    assert protocol["max_completion_length"] == 40 and protocol["temperature"] == 0.7
    options = protocol["env_options"]
    assert options["rounds"] == 1 and options["refiner_mode"] == "patch"
    assert options["audit"] == ["critic", "refiner"]


def test_no_protocol_where_there_is_no_file_or_no_folder(tmp_path):
    assert read_protocol(None) is None
    assert read_protocol(tmp_path) is None
    assert read_protocol("Qwen/Qwen2.5-0.5B-Instruct") is None


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("{not json", "not readable JSON"),
        ("[1, 2]", "holds a list; expected an object"),
        ('{"format": 1, "env_id": "math/reflection-v0", "rnds": 2}', "expected the keys"),
        ('{"format": 9, "env_id": "math/reflection-v0"}', "format 1"),
        ('{"format": 1, "env_id": "math/reflection-v0", "env_options": [1]}', "env_options"),
    ],
)
def test_a_bad_protocol_file_is_refused_naming_it_and_what_was_expected(tmp_path, text, match):
    (tmp_path / PROTOCOL_FILE).write_text(text)
    with pytest.raises(ProtocolError, match=match) as err:
        read_protocol(tmp_path)
    assert str(tmp_path / PROTOCOL_FILE) in str(err.value)


def _parsed(argv):
    """`argv` parsed as ``mathteams evaluate`` parses it, the protocol applied."""
    protocol, _ = trained_protocol(argv)
    parser = make_parser(protocol["env_id"] if protocol else "math/reflection-v0")
    if protocol:
        parser.set_defaults(**protocol_defaults(protocol, parser.get_default("option_names")))
    return parser.parse_args(argv)


def test_evaluate_plays_the_protocol_and_a_flag_overrides_it(tmp_path):
    folder = str(_protocol(tmp_path, rounds=1, audit="critic", refiner_mode="patch"))
    args = _parsed(["--model_name_or_path", folder])
    assert (args.rounds, args.audit, args.refiner_mode) == (1, "critic", "patch")
    assert (args.max_completion_length, args.temperature) == (40, 0.7)
    args = _parsed(["--model_name_or_path", folder, "--rounds", "3", "--audit", ""])
    assert (args.rounds, args.audit, args.refiner_mode) == (3, "", "patch")


def test_a_protocol_of_another_env_does_not_apply(tmp_path, capsys):
    folder = str(_protocol(tmp_path, rounds=1))
    argv = ["--model_name_or_path", folder, "--env_id", "math/debate-v0"]
    assert trained_protocol(argv) == (None, None)
    assert "was trained on math/reflection-v0" in capsys.readouterr().out


def test_options_without_a_flag_travel_as_env_options(tmp_path):
    protocol = json.loads(
        json.dumps(
            {
                "format": 1,
                "env_id": "math/reflection-v0",
                "task": "unknown",
                "env_options": {"verifier": "math", "rounds": 2},
            }
        )
    )
    defaults = protocol_defaults(protocol, ["rounds"])
    assert defaults["rounds"] == 2 and defaults["env_option"] == [("verifier", "math")]
