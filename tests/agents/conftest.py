"""Fixtures for agent tests: a locally built tokenizer and tiny random-weight models."""

from __future__ import annotations

import pytest
from transformers import PreTrainedModel, PreTrainedTokenizerFast

from agents.tiny import build_tiny_model, build_tokenizer


@pytest.fixture(scope="session")
def tokenizer() -> PreTrainedTokenizerFast:
    return build_tokenizer()


@pytest.fixture
def model(tokenizer: PreTrainedTokenizerFast) -> PreTrainedModel:
    # Function scope: peft wraps models in place, so every test gets a fresh one (~50 ms).
    return build_tiny_model(tokenizer, arch="qwen2", seed=0)


@pytest.fixture
def observations() -> list[dict[str, str]]:
    # Deliberately different lengths, so batches are left-padded.
    return [
        {"instruction": "You are a careful math solver.", "prompt": "What is 2 + 3?"},
        {
            "instruction": "You are a critic.",
            "prompt": "Solution: 12 * 7 = 84, then 84 + 9 = 93. Is every step right? "
            "Point out any mistake and give the final answer in \\boxed{}.",
        },
        {"instruction": "", "prompt": "How many apples are left if Sam eats 3 of 10?"},
        {"instruction": "Solve.", "prompt": "é😀 中文 ∑ odd unicode \u200b?"},
    ]
