"""Shared fixtures. Tests never download: data is generated here, models are built locally."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.utils import HOOK_WARNING, bwrap_problem, write_jsonl


def pytest_configure(config: pytest.Config) -> None:
    """Where bubblewrap cannot run, programs of the suite's envs run in hook mode (an explicit,
    warning opt-in); the sandbox's own bwrap tests name their isolation and skip with the
    reason."""
    from envs.sandbox.config import ISOLATION_VAR

    if ISOLATION_VAR in os.environ or bwrap_problem() is None:
        return
    os.environ[ISOLATION_VAR] = "hook"
    config.addinivalue_line("filterwarnings", HOOK_WARNING)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> str:
    """The tiny embedded-recipe model (random-ish weights, local tokenizer), built once."""
    from tests.trainers.test_embedded import TINY
    from trainers.embedded import build_embedded

    return str(build_embedded(TINY, tmp_path_factory.mktemp("embedded") / "model"))


@pytest.fixture
def gsm8k_file(tmp_path: Path) -> Path:
    rows = [
        {
            "question": f"Sam has {i} apples and buys {i + 2} more. How many now?",
            "answer": f"Sam has {i}+{i + 2}=<<{i}+{i + 2}={2 * i + 2}>>{2 * i + 2}.\n#### {2 * i + 2:,}",
        }
        for i in range(1, 12)
    ]
    rows.append(
        {
            "question": "A house costs $1,500 plus $625. Total?",
            "answer": "1500+625=<<1500+625=2125>>2125\n#### 2,125",
        }
    )
    return write_jsonl(tmp_path / "gsm8k.jsonl", rows)
