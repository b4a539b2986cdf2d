"""The TRL reward-function adapter."""

from __future__ import annotations

import pytest

from rewards import Verdict, as_reward_func, get_verifier
from rewards.reward_funcs import completion_text


def test_name_follows_the_verifier() -> None:
    assert as_reward_func("math").__name__ == "math_reward"
    assert as_reward_func(get_verifier("label")).__name__ == "label_reward"


def test_string_completions() -> None:
    reward = as_reward_func("gsm8k")
    assert reward(["#### 18", "#### 7"], answer=["18", "18"]) == [1.0, 0.0]


def test_conversational_completions() -> None:
    reward = as_reward_func("math")
    completions = [
        [{"role": "assistant", "content": "\\boxed{18}"}],  # one assistant turn
        [  # several turns: the last assistant message counts
            {"role": "assistant", "content": "\\boxed{18}"},
            {"role": "user", "content": "are you sure?"},
            {"role": "assistant", "content": "\\boxed{17}"},
        ],
        [{"role": "assistant", "content": [{"type": "text", "text": "\\boxed{18}"}]}],  # parts
    ]
    assert reward(completions, answer=["18", "18", "18"]) == [1.0, 0.0, 1.0]


def test_none_reference_skips_the_row() -> None:
    reward = as_reward_func("gsm8k")
    assert reward(["#### 1", "#### 2"], answer=[None, "2"]) == [None, 1.0]


def test_trl_call_signature_and_other_columns() -> None:
    reward = as_reward_func("gsm8k", reference_column="solution")
    scores = reward(
        prompts=["q1", "q2"],
        completions=["#### 18", "#### 3"],
        completion_ids=[[1], [2]],
        solution=["Long text.\n#### 18", 3],  # a GSM8K solution and a non-string reference
        trainer_state=None,
    )
    assert scores == [1.0, 1.0]


def test_missing_column_and_length_mismatch() -> None:
    reward = as_reward_func("gsm8k")
    with pytest.raises(ValueError, match="'answer' column"):
        reward(["#### 1"], solution=["1"])
    with pytest.raises(ValueError, match="2 completions but 1"):
        reward(["#### 1", "#### 2"], answer=["1"])


def test_non_string_completion_scores_zero() -> None:
    assert as_reward_func("gsm8k")([None, 5], answer=["1", "5"]) == [0.0, 0.0]


def test_not_a_verifier() -> None:
    with pytest.raises(TypeError):
        as_reward_func(object())  # type: ignore[arg-type]


def test_custom_verifier_object() -> None:
    class Length:
        name = "length"

        def verify(self, response: str, reference: str) -> Verdict:
            return Verdict(min(1.0, len(response) / 10))

    reward = as_reward_func(Length())
    assert reward.__name__ == "length_reward"
    assert reward(["12345"], answer=["x"]) == [0.5]


COMPLETION_TEXT_CASES = [
    ("plain", "plain"),  # a string
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], "a"),  # chat
    ({"role": "assistant", "content": "single"}, "single"),  # one message
    ([{"role": "user", "content": "only user"}], "only user"),  # no assistant: last message
    ([], []),  # nothing: unchanged, the verifier scores it 0
]


@pytest.mark.parametrize(("completion", "text"), COMPLETION_TEXT_CASES)
def test_completion_text(completion: object, text: object) -> None:
    assert completion_text(completion) == text


class _BatchOnly:
    """A verifier whose `verify` must not be used when it has `verify_batch` (one call per batch)."""

    name = "batchonly"

    def __init__(self):
        self.calls = []

    def verify(self, response, reference):
        raise AssertionError("verify() called although verify_batch exists")

    def verify_batch(self, responses, references):
        self.calls.append((list(responses), list(references)))
        return [
            Verdict(float(r.strip() == ref), r, "")
            for r, ref in zip(responses, references, strict=True)
        ]


def test_reward_func_sends_one_batch_to_a_batching_verifier_and_keeps_none_rows():
    verifier = _BatchOnly()
    reward = as_reward_func(verifier)
    scores = reward(["5", "6", "7"], answer=["5", None, "8"])
    assert scores == [1.0, None, 0.0]
    assert verifier.calls == [(["5", "7"], ["5", "8"])]
