"""Running the fuzz: the Hypothesis profiles (``ci`` for the test suite, ``long`` for
``scripts/fuzz.py``) and `run_target`, which runs one target for a number of examples."""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis import target as hypothesis_target
from hypothesis.errors import FlakyStrategyDefinition

from envs.testing.fuzz.targets import Target
from envs.testing.fuzz.timing import COLLECTOR, Hang, Stats


class _StopTarget(BaseException):
    """Ends a target's run early (Hypothesis lets a non-Exception through without shrinking)."""


PROFILES = {"ci": 50, "long": 2000}
"""Hypothesis profiles and their examples per target: ``ci`` (the default test run,
derandomized) and ``long``."""
PROFILE_VAR = "MATHTEAMS_FUZZ_PROFILE"
COLLECT_CHUNK = 50
"""Examples per Hypothesis run in `collect` mode: a run abandoned on a differing replay loses at most
this many."""


def register_profiles() -> None:
    """Register the ``ci`` and ``long`` profiles (no deadline: the properties time themselves)."""
    for name, examples in PROFILES.items():
        settings.register_profile(
            name,
            max_examples=examples,
            deadline=None,
            derandomize=name == "ci",
            database=None,
            suppress_health_check=list(HealthCheck),
            print_blob=True,
            # ci: no targeted search toward slow inputs, so the default run stays quick.
            phases=[p for p in Phase if name == "long" or p is not Phase.target],
        )


def current_profile() -> settings:
    """The profile named by `PROFILE_VAR`, else the loaded one if it is ``ci``/``long``, else ci."""
    register_profiles()
    name = os.environ.get(PROFILE_VAR) or settings.get_current_profile_name()
    return settings.get_profile(name if name in PROFILES else "ci")


def run_target(
    target: Target,
    base: settings,
    max_examples: int,
    collect: bool = False,
    seed: int | None = None,
    max_failures: int = 3,
    max_seconds: float | None = None,
    enforce_bounds: bool = True,
) -> Stats:
    """Run `target` for `max_examples` Hypothesis examples under the `base` settings.

    Args:
        target: what to run.
        base: Hypothesis settings (a profile); `max_examples` replaces its budget.
        max_examples: examples to generate (at least 1).
        collect: record each failing example in `COLLECTOR` and go on (the fuzz script's
            table), instead of raising the first one (and letting Hypothesis shrink it).
        seed: a Hypothesis seed for a reproducible run (None: the profile decides).
        max_failures: in `collect` mode, stop the target after this many failures (a hang
            costs its whole watchdog time, and the targeted search would look for more).
        max_seconds: stop generating examples after this long (None: no limit).
        enforce_bounds: a call over its time bound fails (True), or is only counted in the
            target's ``over_bound`` (False: timings on a busy machine are figures to report,
            not properties). A hang fails either way.

    Returns:
        The target's `Stats`.
    """
    previous = COLLECTOR.enforce_bounds
    COLLECTOR.enforce_bounds = enforce_bounds
    try:
        return _run(target, base, max_examples, collect, seed, max_failures, max_seconds)
    finally:
        COLLECTOR.enforce_bounds = previous


def _run(
    target: Target,
    base: settings,
    max_examples: int,
    collect: bool,
    seed: int | None,
    max_failures: int,
    max_seconds: float | None,
) -> Stats:
    started = time.perf_counter()
    stopped: list[bool] = []

    def once(data: Any) -> None:
        COLLECTOR.slowest_now = 0.0
        try:
            target.check(data)
        except (Exception, Hang) as err:
            if not collect:
                raise
            COLLECTOR.failure(
                target.name,
                f"{type(err).__name__}: {str(err)[:300]}",
                getattr(err, "fuzz_input", None),
            )
            if COLLECTOR.stats[target.name].failures >= max_failures:
                stopped.append(True)
                raise _StopTarget from None
        # Targeted search: Hypothesis mutates the inputs that were slowest towards slower ones.
        hypothesis_target(COLLECTOR.slowest_now, label="slowest call (s)")

    # With a time limit, run in chunks and look at the clock between them (stopping Hypothesis
    # in the middle of a run confuses its record of the examples). When collecting, chunks also
    # bound what a replay that draws differently (FlakyStrategyDefinition) costs: the rest of its
    # chunk, not of the whole target.
    if max_seconds is not None:
        chunk = 10
    elif collect:
        chunk = COLLECT_CHUNK
    else:
        chunk = max(1, max_examples)
    done = 0
    while done < max(1, max_examples) and not stopped:
        count = min(chunk, max(1, max_examples) - done)
        property_test = settings(base, max_examples=count)(given(st.data())(once))
        if seed is not None:
            property_test = hypothesis_seed(seed + done)(property_test)
        try:
            with contextlib.suppress(_StopTarget):  # the failures are in COLLECTOR
                property_test()
        except FlakyStrategyDefinition:
            # The target drew differently on a replay (timing-dependent episodes): the rest of
            # this chunk is lost, counted in its Stats; the next chunk, or target, goes on.
            if not collect:
                raise
            COLLECTOR.abandoned(target.name)
        done += count
        if max_seconds is not None and time.perf_counter() - started > max_seconds:
            break
    return COLLECTOR.stats.setdefault(target.name, Stats())
