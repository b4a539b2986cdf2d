"""The slow path: symbolic equivalence through math-verify, within a budget of wall time.

One answer's symbolic check (parsing it and comparing it with the reference) runs under a
budget, `DEFAULT_BUDGET_S` (1 s) unless the caller gives another: a rollout batch waits for its
slowest verification, so no answer may hold it longer. The reference is parsed first, under its
own `REFERENCE_BUDGET_S` (references are data, parsed once per process and cached), unless the
caller says it is model output too (``reference_s=None``: the comparison of two final-answer
markers).

math-verify's own timeouts are switched off and the budget is kept by an interval timer that
raises math-verify's ``TimeoutException`` (`rewards.symbolic_budget`, where the check itself
lives). Signals work only in the main thread of the main interpreter, so `symbolic_equal`:

- by default (and always off the main thread), sends the pair to a helper process that runs the
  same code in *its* main thread, with the timer at `_HELPER_SHARE` of the budget, and waits for
  the reply until the budget is spent; a helper that misses it (C-level big-integer work, which
  no signal interrupts) is killed, and a fresh one is started in the background for the next
  call. The helper also caps its memory;
- with ``isolate=False`` in the main thread, runs it here under the same timer: about 1 ms
  faster, but with no hard deadline (C-level work runs on past the timer).

A check that runs out of budget gives ``(None, "timeout: ...")``: the `math` verifier scores it
0 with that reason. Waiting for a free helper, or for one to start, is not charged to the
budget.

Helpers are plain ``subprocess`` children (not ``multiprocessing``), so they never re-import
the caller's ``__main__``; idle ones are pooled, forgotten in forked children and killed at exit.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import importlib.util
import json
import logging
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

from rewards.symbolic_budget import (
    DEFAULT_BUDGET_S,
    FLOAT_ROUNDING,
    MAX_BUDGET_S,
    REFERENCE_BUDGET_S,
    budget_text,
    check_budget,
    compare_in_process,
    warm_up,
)

__all__ = [
    "DEFAULT_BUDGET_S",
    "MAX_BUDGET_S",
    "REFERENCE_BUDGET_S",
    "check_budget",
    "is_math_verify_available",
    "shutdown_workers",
    "symbolic_equal",
]

logger = logging.getLogger(__name__)

_ROOT = str(Path(__file__).resolve().parent.parent)
_BOOT = "import sys; sys.path.insert(0, {root!r}); from rewards.symbolic import _serve; _serve()"
_START_TIMEOUT_S = 120.0
_MAX_HELPERS = max(4, 2 * (os.cpu_count() or 1))
_MEMORY_LIMIT_BYTES = 4 * 1024**3
_INSTALL_HINT = "pip install math-verify (one of the project's base dependencies)"

_HELPER_SHARE = 0.8
"""A helper stops its own work at this share of the budget, so that its reply arrives in time
and it is kept; the caller kills it only at the full budget."""
_START_REPLY_S = 2.0
"""Seconds a helper may take to acknowledge a request (it does at once, or after parsing the
reference) beyond the reference's own budget."""


def is_math_verify_available() -> bool:
    """Whether math-verify can be imported."""
    return importlib.util.find_spec("math_verify") is not None


def require_math_verify() -> None:
    """Raise an `ImportError` naming the package to install when math-verify is missing."""
    if not is_math_verify_available():
        raise ImportError(f"the 'math' verifier needs math-verify: {_INSTALL_HINT}")


@functools.cache
def _warmed_up() -> None:
    """`warm_up`, once in this process (for checks run in it, ``isolate=False``)."""
    warm_up()


def _serve() -> None:
    """Helper process loop: JSON requests on stdin, JSON replies on the original stdout."""
    channel = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # stray prints from sympy must not corrupt the reply channel
    sys.stdout = sys.stderr
    logging.disable(logging.CRITICAL)
    with contextlib.suppress(ImportError, ValueError, OSError):
        import resource

        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = (
            _MEMORY_LIMIT_BYTES
            if hard == resource.RLIM_INFINITY
            else min(hard, _MEMORY_LIMIT_BYTES)
        )
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    warm_up()  # pay the imports and first-use costs before saying ready

    def send(message: dict) -> None:
        channel.write(json.dumps(message) + "\n")
        channel.flush()

    send({"ready": True})
    for line in sys.stdin:
        request = json.loads(line)
        try:
            ok, reason = compare_in_process(
                request["ref"],
                request["ans"],
                request["budget"],
                request["rounding"],
                request["ref_s"],
                started=lambda: send({"started": True}),
                share=_HELPER_SHARE,
            )
        except MemoryError:
            ok, reason = None, "error: math-verify ran out of memory"
        send({"ok": ok, "reason": reason})


class _Worker:
    """One helper process and a reader thread that queues its replies."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT.format(root=_ROOT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            encoding="utf-8",
            start_new_session=os.name == "posix",  # a terminal's Ctrl-C is for the caller
        )
        self.replies: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        threading.Thread(target=self._pump, name="math-verify-reader", daemon=True).start()
        try:
            ready = self._reply(_START_TIMEOUT_S)
        except (TimeoutError, EOFError, ValueError) as exc:
            self.kill()
            raise OSError(f"math-verify helper did not start ({type(exc).__name__})") from exc
        if not ready.get("ready"):
            self.kill()
            raise OSError("math-verify helper did not start")

    def _pump(self) -> None:
        stream = self.proc.stdout
        with contextlib.suppress(OSError, ValueError):
            for line in stream:  # type: ignore[union-attr]
                self.replies.put(line)
        self.replies.put(None)

    def _reply(self, timeout: float) -> dict:
        try:
            line = self.replies.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError from None
        if line is None:
            raise EOFError("math-verify helper exited")
        return json.loads(line)

    def ask(
        self,
        reference: str,
        answer: str,
        budget_s: float,
        reference_s: float | None,
        rounding: int,
    ) -> tuple[bool | None, str]:
        """One comparison; `TimeoutError` when the helper misses its deadline (kill it then)."""
        request = {
            "ref": reference,
            "ans": answer,
            "budget": budget_s,
            "ref_s": reference_s,
            "rounding": rounding,
        }
        self.proc.stdin.write(json.dumps(request) + "\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        # "started" comes once the reference is parsed (within its own budget); from then on
        # the helper stops itself at _HELPER_SHARE of the budget, and one that has not
        # answered by the full budget (C code a signal cannot interrupt) is killed.
        reply = self._reply((reference_s or 0.0) + _START_REPLY_S)
        if reply.get("started"):
            reply = self._reply(budget_s)
        return reply["ok"], str(reply["reason"])

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.kill()
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError, ValueError):
                stream.close()  # type: ignore[union-attr]


class _WorkerPool:
    """At most `_MAX_HELPERS` helpers at work (each holds sympy, ~100 MB) and one spare; more
    callers wait their turn."""

    def __init__(self) -> None:
        self.forget()

    def compare(
        self,
        reference: str,
        answer: str,
        budget_s: float,
        reference_s: float | None,
        rounding: int,
    ) -> tuple[bool | None, str]:
        # A caller waits at most for a few helpers' worth of bounded calls, then gives up.
        wait = _START_TIMEOUT_S + 12 * (budget_s + (reference_s or 0.0) + _START_REPLY_S)
        if not self._slots.acquire(timeout=wait):
            return None, "timeout: every math-verify helper stayed busy"
        try:
            return self._compare(reference, answer, budget_s, reference_s, rounding)
        finally:
            self._slots.release()

    def _compare(
        self,
        reference: str,
        answer: str,
        budget_s: float,
        reference_s: float | None,
        rounding: int,
    ) -> tuple[bool | None, str]:
        try:
            worker = self._take() or _Worker()
        except OSError as exc:
            return None, f"error: could not start a math-verify helper ({exc})"
        try:
            result = worker.ask(reference, answer, budget_s, reference_s, rounding)
        except TimeoutError:
            worker.kill()
            self._start_spare()
            return None, (
                f"timeout: the math-verify helper ran past the symbolic budget "
                f"({budget_text(budget_s)}) and was stopped"
            )
        except (OSError, EOFError, ValueError, KeyError) as exc:
            worker.kill()
            self._start_spare()
            return None, f"error: math-verify helper failed ({type(exc).__name__})"
        with self._ready:
            self._idle.append(worker)
            self._ready.notify()
        return result

    def _take(self) -> _Worker | None:
        """An idle helper (waiting for one that is starting, if none is idle), or None: the
        caller starts one. Taking the last idle helper starts a spare in the background, so
        that a helper killed at its deadline is replaced without a wait."""
        with self._ready:
            while not self._idle and self._starting:
                if not self._ready.wait(timeout=_START_TIMEOUT_S):
                    break
            worker = self._idle.pop() if self._idle else None
            spare = worker is not None and not self._idle and not self._starting
        if spare:
            self._start_spare()
        return worker

    def _start_spare(self) -> None:
        """Start a helper in the background (about a second: sympy's import and warm-up)."""
        with self._ready:
            if self._starting:
                return
            self._starting += 1
            generation = self._generation

        def start() -> None:
            worker = None
            with contextlib.suppress(OSError):
                worker = _Worker()
            with self._ready:
                if generation == self._generation:
                    self._starting -= 1
                    if worker is not None and len(self._idle) <= _MAX_HELPERS:
                        self._idle.append(worker)
                        worker = None
                    self._ready.notify_all()
            if worker is not None:
                worker.kill()

        threading.Thread(target=start, name="math-verify-spare", daemon=True).start()

    def shutdown(self) -> None:
        with self._lock:
            workers, self._idle = self._idle, []
        for worker in workers:
            worker.kill()

    def forget(self) -> None:
        """Start empty; in a forked child the parent's helpers and locks are not ours to use."""
        self._generation = getattr(self, "_generation", 0) + 1
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self._slots = threading.BoundedSemaphore(_MAX_HELPERS)
        self._idle: list[_Worker] = []
        self._starting = 0


_POOL = _WorkerPool()
atexit.register(_POOL.shutdown)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_POOL.forget)


def shutdown_workers() -> None:
    """Stop the idle math-verify helper processes (they also stop at interpreter exit)."""
    _POOL.shutdown()


def _can_use_signals() -> bool:
    import signal

    return hasattr(signal, "SIGALRM") and threading.current_thread() is threading.main_thread()


def symbolic_equal(
    reference: str,
    answer: str,
    budget_s: float = DEFAULT_BUDGET_S,
    isolate: bool = True,
    float_rounding: int = FLOAT_ROUNDING,
    reference_s: float | None = REFERENCE_BUDGET_S,
) -> tuple[bool | None, str]:
    """Whether math-verify finds `answer` equivalent to `reference`, within a budget.

    Args:
        reference: the bare reference answer (LaTeX or plain).
        answer: the extracted answer.
        budget_s: seconds of wall time math-verify may spend on the answer: parsing it and
            comparing it (`check_budget`). Past it the answer is given up: ``(None,
            "timeout: ...")``.
        isolate: run in a helper process even in the main thread (the default): a hard
            deadline that survives C-level work. ``False`` uses the caller's main thread when
            it can (threads always use a helper).
        float_rounding: decimal places numbers are compared at (math-verify's
            ``float_rounding``), matrices' and intervals' entries included.
        reference_s: seconds for parsing the reference first, outside `budget_s` (parsed once
            per process and cached); None when the reference is model output too (it is then
            parsed within `budget_s`).

    Returns:
        ``(True | False, reason)``; ``(None, reason)`` when a budget ran out or a helper failed.

    Raises:
        ImportError: math-verify is not installed.
        TypeError, ValueError: `budget_s` or `reference_s` is not a valid budget.
    """
    require_math_verify()
    budget_s = check_budget(budget_s)
    if reference_s is not None:
        reference_s = check_budget(reference_s, "reference_s")
    if not isolate and _can_use_signals():
        _warmed_up()  # once per process, outside every budget, as a helper does before it starts
        return compare_in_process(reference, answer, budget_s, float_rounding, reference_s)
    return _POOL.compare(reference, answer, budget_s, reference_s, float_rounding)
