"""Property-based fuzzing of every env and every verifier (see `envs.testing.fuzz`).

Parametrized over ``envs.list_envs()`` and ``rewards.list_verifiers()``, so a new env or verifier
is fuzzed with no edit here. The default run uses the derandomized ``ci`` profile (50 examples
per target, fewer for the slower ones) and reports the time bounds instead of enforcing them
(each target's calls over their bound, and its slowest call, appear in the "reported timings"
summary at the end of the run); ``scripts/fuzz.py`` runs the same targets with a large budget
and enforces every bound. A hang still fails here.
"""

from __future__ import annotations

import pytest

import envs
from envs.testing import fuzz as harness
from rewards import list_verifiers

PROFILE = harness.current_profile()
SCALES = harness.env_scales()


@pytest.fixture
def run(report_fuzz):
    """Run a target on the profile's budget, bounds reported, not enforced; check the property."""

    def run_target(target: harness.Target) -> None:
        examples = round(PROFILE.max_examples * target.scale)
        stats = harness.run_target(target, PROFILE, examples, enforce_bounds=False)
        report_fuzz(target.name, stats)
        assert stats.inputs > 0
        assert stats.failures == 0

    return run_target


@pytest.mark.parametrize("task", harness.TASKS)
@pytest.mark.parametrize("env_id", envs.list_envs())
def test_env_episodes(env_id: str, task: str, run) -> None:
    run(harness.env_target(env_id, task, SCALES.get(env_id, 1.0)))


@pytest.mark.parametrize("name", list_verifiers())
def test_verify(name: str, run) -> None:
    run(harness.verify_target(name))


@pytest.mark.parametrize("name", list_verifiers())
def test_verify_bad_reference(name: str, run) -> None:
    run(harness.reference_target(name))


@pytest.mark.parametrize("name", list_verifiers())
def test_verify_in_thread(name: str, run) -> None:
    run(harness.thread_target(name))


def test_verify_batch(run) -> None:
    run(harness.batch_target())


def test_reward_func(run) -> None:
    run(harness.reward_func_target())


def test_extract(run) -> None:
    run(harness.extract_target())


def test_known_slow_inputs(run) -> None:
    run(harness.known_slow_target())


def test_bounds_are_reported_in_the_suite_and_enforced_by_the_script() -> None:
    """A call over its bound is counted when bounds are reported and fails when enforced."""
    from envs.testing.fuzz.timing import timed

    def check(data) -> None:
        harness.COLLECTOR.input("bound check")
        with timed("bound check", lambda: 1e-9, "a call that always overruns"):
            sum(range(1000))

    target = harness.Target("bound check", check)
    stats = harness.run_target(target, PROFILE, 1, enforce_bounds=False)
    assert stats.over_bound == 1 and stats.failures == 0 and stats.worst_ratio > 1
    assert "a call that always overruns" in stats.first_over_bound
    with pytest.raises(AssertionError, match=r"always overruns took .* \(bound 0.0 s\)"):
        harness.run_target(target, PROFILE, 1, enforce_bounds=True)
    assert harness.COLLECTOR.enforce_bounds is True  # run_target puts the policy back


def test_a_target_that_draws_differently_on_replay_is_counted_and_the_run_goes_on():
    """An env whose episode length depends on timing draws differently when Hypothesis replays
    an example; the fuzz script (``collect``) counts the abandoned run instead of crashing."""
    import itertools

    from hypothesis import strategies as st
    from hypothesis.errors import FlakyStrategyDefinition

    calls = itertools.count()

    def check(data) -> None:
        harness.COLLECTOR.input("replays differ")
        # a draw count that changes from call to call, and a failure so Hypothesis replays
        for _ in range(1 + next(calls) % 3):
            data.draw(st.integers(0, 3))
        raise ValueError("fails, so the example is replayed")

    target = harness.Target("replays differ", check)
    stats = harness.run_target(target, PROFILE, 20, collect=True, seed=0, max_failures=1000)
    assert stats.nondeterministic >= 1
    with pytest.raises(FlakyStrategyDefinition):
        harness.run_target(target, PROFILE, 20, seed=0)  # outside the script: it raises


def test_a_run_abandoned_on_replay_costs_its_chunk_not_the_whole_target():
    """The fuzz script runs a target in chunks, so a replay that draws differently early loses
    at most `COLLECT_CHUNK` examples, and the rest of the target's budget still runs."""
    import itertools

    from hypothesis import strategies as st

    calls = itertools.count()

    def check(data) -> None:
        harness.COLLECTOR.input("differs early")
        call = next(calls)
        if call < 5:  # the first examples draw differently each time and fail, so they replay
            for _ in range(1 + call % 3):
                data.draw(st.integers(0, 3))
            raise ValueError("fails, so the example is replayed")
        data.draw(st.integers(0, 10**9))  # a space Hypothesis does not exhaust

    target = harness.Target("differs early", check)
    examples = 2 * harness.COLLECT_CHUNK + 20
    stats = harness.run_target(target, PROFILE, examples, collect=True, seed=0, max_failures=1000)
    assert stats.nondeterministic == 1
    assert stats.inputs >= harness.COLLECT_CHUNK + 20  # the later chunks ran in full
