"""Property-based fuzzing of every env and every verifier (see `tests.fuzz.harness`).

Parametrized over ``envs.list_envs()`` and ``rewards.list_verifiers()``, so a new env or verifier
is fuzzed with no edit here. The default run uses the derandomized ``ci`` profile (60 examples
per target, fewer for the slower ones); ``scripts/fuzz.py`` runs the same targets with a large
budget.
"""

from __future__ import annotations

import pytest

import envs
from rewards import list_verifiers
from tests.fuzz import harness

PROFILE = harness.current_profile()
SCALES = harness.env_scales()


def _run(target: harness.Target) -> None:
    stats = harness.run_target(target, PROFILE, round(PROFILE.max_examples * target.scale))
    assert stats.inputs > 0
    assert stats.failures == 0


@pytest.mark.parametrize("task", harness.TASKS)
@pytest.mark.parametrize("env_id", envs.list_envs())
def test_env_episodes(env_id: str, task: str) -> None:
    _run(harness.env_target(env_id, task, SCALES.get(env_id, 1.0)))


@pytest.mark.parametrize("name", list_verifiers())
def test_verify(name: str) -> None:
    _run(harness.verify_target(name))


@pytest.mark.parametrize("name", list_verifiers())
def test_verify_bad_reference(name: str) -> None:
    _run(harness.reference_target(name))


@pytest.mark.parametrize("name", list_verifiers())
def test_verify_in_thread(name: str) -> None:
    _run(harness.thread_target(name))


def test_verify_batch() -> None:
    _run(harness.batch_target())


def test_reward_func() -> None:
    _run(harness.reward_func_target())


def test_extract() -> None:
    _run(harness.extract_target())
