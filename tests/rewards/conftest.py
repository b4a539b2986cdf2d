"""Fixtures for the verifier tests: GSM8K-style data, generated here (`tests.rewards.helpers`)."""

from __future__ import annotations

import pytest

from tests.rewards.helpers import generated_gsm8k


@pytest.fixture(scope="session")
def gsm8k_generated() -> list[dict[str, str]]:
    return generated_gsm8k()
