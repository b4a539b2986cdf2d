"""Scripted, oracle and random test-double policies."""

from __future__ import annotations

import pytest

from agents.scripted import ODD_UNICODE, OraclePolicy, RandomTextPolicy, ScriptedPolicy

OBS = {"instruction": "Solve.", "prompt": "What is 2 + 3?", "question": "What is 2 + 3?"}


def test_scripted_cycles_across_calls() -> None:
    policy = ScriptedPolicy(["a", "b", "c"])
    assert policy.act([OBS, OBS]) == ["a", "b"]
    assert policy.act([OBS, OBS, OBS]) == ["c", "a", "b"]
    assert len(policy.history) == 5
    policy.reset()
    assert policy.act([OBS]) == ["a"]


def test_scripted_callable_sees_observation() -> None:
    policy = ScriptedPolicy(lambda obs: obs["prompt"].upper())
    assert policy.act([OBS, {"prompt": "x"}]) == ["WHAT IS 2 + 3?", "X"]
    assert policy.act([]) == []


def test_scripted_rejects_bad_replies() -> None:
    with pytest.raises(TypeError, match="is a str"):
        ScriptedPolicy("abc")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="empty"):
        ScriptedPolicy([])


def test_oracle_templates_answers() -> None:
    policy = OraclePolicy(lambda obs: "5" if "2 + 3" in obs["prompt"] else None, fallback="?")
    assert policy.act([OBS, {"prompt": "unknown"}]) == ["The answer is \\boxed{5}.", "?"]
    custom = OraclePolicy(lambda obs: "7", template="#### {answer}")
    assert custom.act([OBS]) == ["#### 7"]


def test_oracle_from_answers() -> None:
    policy = OraclePolicy.from_answers({"What is 2 + 3?": "5"})
    assert policy.act([OBS, {"prompt": "p", "question": "other"}, {"prompt": "p"}]) == [
        "The answer is \\boxed{5}.",
        "",
        "",
    ]
    by_id = OraclePolicy.from_answers({"p7": "42"}, key="problem_id", template="{answer}")
    assert by_id.act([{"prompt": "p", "problem_id": "p7"}]) == ["42"]


@pytest.mark.parametrize("template", ["no field", "{answer} {other}", "\\boxed{answer}}"])
def test_oracle_rejects_bad_template(template: str) -> None:
    with pytest.raises(ValueError):
        OraclePolicy(lambda obs: "1", template=template)


def test_random_text_is_seeded_and_bounded() -> None:
    a, b, c = RandomTextPolicy(seed=1), RandomTextPolicy(seed=1), RandomTextPolicy(seed=2)
    batch = [OBS] * 50
    first = a.act(batch)
    assert first == b.act(batch)
    assert first != c.act(batch)
    assert a.act(batch) != first  # the RNG advances between calls
    assert all(0 <= len(t) <= 64 for t in first)
    assert any(ch in ODD_UNICODE for t in first for ch in t)


def test_random_text_options() -> None:
    policy = RandomTextPolicy(seed=0, min_len=3, max_len=5, charset="xy")
    texts = policy.act([OBS] * 20)
    assert all(3 <= len(t) <= 5 and set(t) <= {"x", "y"} for t in texts)
    with pytest.raises(ValueError, match="min_len"):
        RandomTextPolicy(min_len=5, max_len=2)
    with pytest.raises(ValueError, match="charset"):
        RandomTextPolicy(charset="")
