"""How the fuzz times what it runs: time bounds, per-target records, the watchdog, threads.

Every call under test runs inside `timed`, which records its duration in `COLLECTOR` and compares
it with the call's bound. What happens past the bound is the collector's policy: with
``COLLECTOR.enforce_bounds`` (``scripts/fuzz.py``) the call fails; without it (the test suite, on
a shared and busy machine) it is counted in the target's ``over_bound`` and reported. A call
still spinning long past its bound is interrupted by `watchdog` in both cases (a hang is a
failure, not a figure).
"""

from __future__ import annotations

import faulthandler
import gc
import math
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

CALL_BOUND_S = 2.0
"""Seconds any verifier call or extraction may take, before symbolic (math-verify) timeouts."""
STEP_BOUND_S = 2.0
"""Seconds any env step may take, before the math-verify time of the answers it scored."""
PER_MB_S = 10.0
"""Extra seconds per MB of text for the functions that read all of it (references, helpers)."""
HANG_SLACK_S = 3.0
"""Seconds of CPU past the largest bound a call may earn before `watchdog` interrupts it."""
REPORT_HANG_FACTOR = 4.0
"""When bounds are only reported, the watchdog waits this many times longer (plus 30 s): it
still ends a real hang (the regressions the fuzz found took minutes to hours) but not a call
slowed by a busy machine."""


HELPER_RESTART_S = 3.0
"""Seconds a call may wait for a math-verify helper to start (after one was killed at its
deadline, when the spare is not up yet)."""


def symbolic_budget(verifier: Any) -> float:
    """Seconds the verifier may spend in math-verify on one call (0 when it never calls it).

    The `math` verifier gives one answer ``budget_s`` of symbolic time, all its checks together
    (`rewards.symbolic`: a helper that overruns it is killed); the reference is parsed first on
    its own budget, `rewards.symbolic_budget.REFERENCE_BUDGET_S` (once per helper and reference);
    a helper killed at the deadline may leave the next call waiting `HELPER_RESTART_S` for a
    fresh one. Summed over a composite's components; a remote verifier gets the budget of the
    verifier its server runs.
    """
    parts = getattr(verifier, "parts", None)
    if parts is not None:
        return sum(symbolic_budget(part) for part, _ in parts)
    served = getattr(verifier, "served", None)  # a remote verifier: the server's verifier's budget
    if served is not None:
        return symbolic_budget(served)
    budget = getattr(verifier, "budget_s", None)
    if isinstance(budget, (int, float)) and getattr(verifier, "name", "") == "math":
        from rewards.symbolic_budget import REFERENCE_BUDGET_S

        return budget + REFERENCE_BUDGET_S + HELPER_RESTART_S
    return 0.0


def size_allowance(text: Any) -> float:
    """`PER_MB_S` per million characters of `text` (0 for a non-string)."""
    return PER_MB_S * len(text) / 1e6 if isinstance(text, str) else 0.0


def timed_out(reason: Any) -> bool:
    """Whether a verdict's reason says a symbolic (math-verify) check ran out of time."""
    return "timeout" in str(reason)


def ran_symbolic(reason: Any) -> bool:
    """Whether a verdict's reason says math-verify ran (up to its timeout, not only past it)."""
    return "math-verify" in str(reason) or timed_out(reason)


# ---------------------------------------------------------------- records


@dataclass
class Stats:
    """Inputs tried, property failures, symbolic timeouts, calls over their time bound and the
    slowest call of one target (``worst_ratio``: the largest duration / bound of any call)."""

    inputs: int = 0
    failures: int = 0
    timeouts: int = 0
    over_bound: int = 0
    max_s: float = 0.0
    max_s_no_timeout: float = 0.0
    worst_ratio: float = 0.0
    first_failure: str = ""
    first_failure_input: str = ""
    slowest: str = ""
    first_over_bound: str = ""
    nondeterministic: int = 0
    """Hypothesis runs abandoned because the target drew differently when an example was
    replayed (``FlakyStrategyDefinition``): an episode whose length depends on timing, as when a
    verdict lands near a deadline once and not the next time. Counted, not a failure."""


@dataclass
class Collector:
    """Counts and durations per target, shared by every test of a session (thread-safe).

    Args:
        enforce_bounds: whether a call over its time bound fails (True: ``scripts/fuzz.py``)
            or is only counted and reported (False: the test suite; see `timed`).
    """

    stats: dict[str, Stats] = field(default_factory=dict)
    durations: dict[str, list[float]] = field(default_factory=dict)  # every call's, per target
    enforce_bounds: bool = True
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    slowest_now: float = 0.0  # slowest call of the current example (Hypothesis `target`s it)

    def _get(self, target: str) -> Stats:
        return self.stats.setdefault(target, Stats())

    def hang_after(self, seconds: float) -> float:
        """When to give up on a call whose bound (plus slack) is `seconds`: then, when bounds
        are enforced; `REPORT_HANG_FACTOR` times later (plus 30 s) when they are reported."""
        return seconds if self.enforce_bounds else REPORT_HANG_FACTOR * seconds + 30.0

    def call(
        self,
        target: str,
        seconds: float,
        timed_out: bool = False,
        what: str = "",
        bound: float | None = None,
    ) -> None:
        """Record one timed call (`what` describes the input, kept for the slowest call and
        the first call over its `bound`)."""
        with self.lock:
            stats = self._get(target)
            self.durations.setdefault(target, []).append(seconds)
            self.slowest_now = max(self.slowest_now, seconds)
            if seconds > stats.max_s:
                stats.max_s, stats.slowest = seconds, what
            if timed_out:
                stats.timeouts += 1
            else:
                stats.max_s_no_timeout = max(stats.max_s_no_timeout, seconds)
            if bound is None:
                return
            if bound > 0:
                stats.worst_ratio = max(stats.worst_ratio, seconds / bound)
            if seconds > bound:
                stats.over_bound += 1
                if not stats.first_over_bound:
                    stats.first_over_bound = f"{seconds:.2f} s > {bound:.1f} s on {what}"

    def input(self, target: str) -> None:
        with self.lock:
            self._get(target).inputs += 1

    def failure(self, target: str, description: str, inputs: Any = None) -> None:
        """Record a failing example (the first one's inputs are kept, as ``ascii()``)."""
        with self.lock:
            stats = self._get(target)
            stats.failures += 1
            if not stats.first_failure:
                stats.first_failure = description
                stats.first_failure_input = "" if inputs is None else ascii(inputs)[:200_000]

    def abandoned(self, target: str) -> None:
        """Record a Hypothesis run of `target` abandoned as nondeterministic (`Stats`)."""
        with self.lock:
            self._get(target).nondeterministic += 1

    def table(self) -> str:
        """A markdown table of every target (see `table`)."""
        return table(self.as_json())

    def as_json(self) -> dict[str, dict[str, Any]]:
        """Every target's `Stats` fields, with the median and 99th percentile of its calls'
        durations (``p50_s``, ``p99_s``)."""
        with self.lock:
            return {
                name: {
                    **vars(stats),
                    "p50_s": percentile(self.durations.get(name, []), 0.50),
                    "p99_s": percentile(self.durations.get(name, []), 0.99),
                }
                for name, stats in sorted(self.stats.items())
            }


def percentile(values: list[float], q: float) -> float:
    """The nearest-rank `q` quantile of `values` (0 for none)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(math.ceil(q * len(ordered)) - 1, 0)]


def table(stats: dict[str, dict[str, Any]]) -> str:
    """A markdown table: target, inputs, failures, symbolic timeouts, calls over their bound,
    the median, 99th percentile and max s per call (the max with and without a timeout), the
    worst duration/bound and the slowest input.

    Args:
        stats: target name -> the fields of its `Stats` (as `Collector.as_json` gives them).
    """
    columns = (
        "target|inputs|failures|symbolic timeouts|over bound|p50 s/call|p99 s/call|max s/call|"
        "max s/call (no timeout)|worst s/bound|slowest input"
    )
    rows = [f"| {columns.replace('|', ' | ')} |", "|---|" + "---:|" * 9 + "---|"]
    for name in sorted(stats):
        s = stats[name]
        rows.append(
            f"| {name} | {s['inputs']} | {s['failures']} | {s['timeouts']} | "
            f"{s['over_bound']} | {s.get('p50_s', 0.0):.3f} | {s.get('p99_s', 0.0):.3f} | "
            f"{s['max_s']:.3f} | {s['max_s_no_timeout']:.3f} | "
            f"{s['worst_ratio']:.2f} | {s['slowest'][:70].replace('|', '/')} |"
        )
    return "\n".join(rows)


COLLECTOR = Collector()


def describe(value: Any, width: int = 60) -> str:
    """A short printable description of a fuzz input: its length, head and tail."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(describe(v, width // 2) for v in value[:4]) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {describe(v, width // 2)}" for k, v in value.items()) + "}"
    if not isinstance(value, str):
        return f"{type(value).__name__} {value!r:.{width}}"
    if len(value) <= width:
        return ascii(value)
    return f"{len(value)} chars {value[: width // 2]!a}...{value[-width // 2 :]!a}"


class Hang(BaseException):
    """A call ran past its watchdog (raised from a SIGPROF handler in the main thread).

    A `BaseException`, like `KeyboardInterrupt`, so that no ``except Exception`` swallows it.
    """


@contextmanager
def watchdog(seconds: float) -> Iterator[None]:
    """Interrupt a call that spins past `seconds` of CPU time; end the process at a hard limit.

    In the main thread a ``SIGPROF`` timer raises `Hang` (CPython checks signals inside long
    regular-expression matches too; math-verify's own timeouts use ``SIGALRM``, not this one).
    Anywhere, ``faulthandler`` dumps every thread's stack and exits after ``4 x seconds + 60``
    of wall time, so a hang in C code ends the run with a traceback instead of never ending.
    """
    use_signal = (
        hasattr(signal, "SIGPROF") and threading.current_thread() is threading.main_thread()
    )
    previous: Any = None
    if use_signal:

        def interrupt(signum: int, frame: Any) -> None:
            raise Hang(f"still running after {seconds:.0f} s of CPU time")

        previous = signal.signal(signal.SIGPROF, interrupt)
        signal.setitimer(signal.ITIMER_PROF, seconds)
    faulthandler.dump_traceback_later(4 * seconds + 60, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        if use_signal:
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.signal(signal.SIGPROF, previous)


@contextmanager
def timed(
    target: str,
    bound: Callable[[], float],
    what: str,
    inputs: Any = None,
    most: float | None = None,
) -> Iterator[dict[str, Any]]:
    """Time the block and record it with its bound, ``bound()`` seconds; when it took longer,
    fail if ``COLLECTOR.enforce_bounds``, else only count it (``Stats.over_bound``).

    The block may set ``box["timed_out"] = True`` (a symbolic timeout was reported), which the
    bound callable can read from the same dict. `inputs` is described in the record. A block
    still spinning after ``most + HANG_SLACK_S`` seconds of CPU (`most`: the largest bound the
    block may earn, default ``bound()`` now; later when bounds are only reported, see
    `Collector.hang_after`) is interrupted by `watchdog` and fails with `Hang`.
    """
    box: dict[str, Any] = {"timed_out": False}
    # No garbage collection inside the call: Hypothesis registers a gc callback, and math-verify's
    # SIGALRM timeout raised while that callback runs is printed and lost ("Exception ignored in
    # gc_callback"), so the timed-out computation would go on. The fuzz measures the project.
    collecting = gc.isenabled()
    gc.disable()
    started = time.perf_counter()
    try:
        with watchdog(COLLECTOR.hang_after((bound() if most is None else most) + HANG_SLACK_S)):
            yield box
    except Hang as hang:
        elapsed = time.perf_counter() - started
        COLLECTOR.call(target, elapsed, False, describe(inputs) if inputs is not None else "")
        error = Hang(f"{what}: {hang} on {describe(inputs)}")
        error.fuzz_input = inputs  # type: ignore[attr-defined]
        raise error from None
    finally:
        if collecting:
            gc.enable()
    elapsed = time.perf_counter() - started
    box["elapsed"] = elapsed
    limit = bound()
    described = describe(inputs) if inputs is not None else what
    COLLECTOR.call(target, elapsed, box["timed_out"], described, limit)
    if elapsed > limit and COLLECTOR.enforce_bounds:
        error = AssertionError(
            f"{what} took {elapsed:.2f} s (bound {limit:.1f} s) on {describe(inputs)}"
        )
        error.fuzz_input = inputs  # type: ignore[attr-defined]
        raise error


def in_thread(function: Callable[..., Any], *args: Any, wait: float) -> Any:
    """``function(*args)`` in a fresh daemon thread; raise `Hang` if it runs past `wait` s."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = function(*args)
        except BaseException as err:  # noqa: BLE001 - re-raised in the caller below
            box["error"] = err

    thread = threading.Thread(target=run, name="fuzz-verify", daemon=True)
    thread.start()
    thread.join(wait)
    if thread.is_alive():
        raise Hang(f"still running in a thread after {wait:.0f} s")
    if "error" in box:
        raise box["error"]
    return box["result"]
