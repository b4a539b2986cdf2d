"""The policy protocol, Generation records and GenerationArguments validation."""

from __future__ import annotations

import dataclasses

import pytest
from transformers import HfArgumentParser

from agents import (
    Generation,
    GenerationArguments,
    GenerativePolicy,
    OraclePolicy,
    Policy,
    RandomTextPolicy,
    ScriptedPolicy,
)
from agents.prompts import build_messages, expand_instructions


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"max_new_tokens": 0}, ValueError, "at least 1"),
        ({"temperature": 0.0}, ValueError, "do_sample=False"),  # the fix is named
        ({"temperature": -1.0}, ValueError, "must be > 0"),
        ({"top_p": 0.0}, ValueError, r"\(0, 1\]"),
        ({"top_p": 1.5}, ValueError, r"\(0, 1\]"),
        ({"top_k": -1}, ValueError, ">= 0"),
        ({"stop_strings": "\n"}, TypeError, "pass a list"),  # a str would be iterated
        ({"stop_strings": ["ok", ""]}, ValueError, "empty"),
        ({"seed": -3}, ValueError, "non-negative"),
        ({"max_batch_size": 0}, ValueError, "positive"),
    ],
)
def test_generation_arguments_validate(kwargs: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        GenerationArguments(**kwargs)


def test_generation_arguments_fields_have_help() -> None:
    args = GenerationArguments(stop_strings=("</answer>",))
    assert args.stop_strings == ["</answer>"]  # tuples from YAML/CLI become lists
    for f in dataclasses.fields(GenerationArguments):
        assert f.metadata.get("help"), f"{f.name} has no help text"


def test_generation_record() -> None:
    g = Generation("hi", [1, 2], [3, 4], [-0.5, -1.0], "stop")
    assert g.num_tokens == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.text = "changed"  # type: ignore[misc]
    with pytest.raises(ValueError, match="one logprob per token"):
        Generation("hi", [1], [3, 4], [-0.5], "stop")
    with pytest.raises(ValueError, match="finish_reason"):
        Generation("hi", [1], [3], [-0.5], "eos")  # type: ignore[arg-type]


def test_protocols() -> None:
    for policy in (ScriptedPolicy(["a"]), OraclePolicy(lambda o: "1"), RandomTextPolicy()):
        assert isinstance(policy, Policy)
        assert not isinstance(policy, GenerativePolicy)
    assert not isinstance(object(), Policy)


def test_build_messages() -> None:
    obs = {"instruction": "Be brief.", "prompt": "2+2?", "role": "solver"}
    assert build_messages(obs) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "2+2?"},
    ]
    assert build_messages(obs, "Override.")[0]["content"] == "Override."
    assert build_messages({"prompt": "2+2?"}) == [{"role": "user", "content": "2+2?"}]
    with pytest.raises(KeyError, match="no 'prompt'"):
        build_messages({"instruction": "x"})
    with pytest.raises(TypeError, match="expected str"):
        build_messages({"prompt": 3})  # type: ignore[dict-item]


def test_expand_instructions_is_problem_major() -> None:
    rows = expand_instructions([{"prompt": "p0"}, {"prompt": "p1"}], ["a", "b", "c"])
    assert [(r["prompt"], r["instruction"]) for r in rows] == [
        ("p0", "a"),
        ("p0", "b"),
        ("p0", "c"),
        ("p1", "a"),
        ("p1", "b"),
        ("p1", "c"),
    ]


def test_generation_arguments_parse_from_command_line() -> None:
    parser = HfArgumentParser(GenerationArguments)  # what TrlParser builds on
    (args,) = parser.parse_args_into_dataclasses(
        ["--stop_strings", "</answer>", "\n\n", "--do_sample", "false", "--seed", "3"]
    )
    assert args == GenerationArguments(stop_strings=["</answer>", "\n\n"], do_sample=False, seed=3)
    with pytest.raises(ValueError, match="top_p"):
        parser.parse_args_into_dataclasses(["--top_p", "2"])
