"""The slow path: symbolic equivalence through math-verify, with a bounded time per call.

math-verify bounds its own work with ``signal.alarm``, which works only in the main thread of
the main interpreter. So `symbolic_equal`:

- by default (and always off the main thread), sends the pair to a helper process that runs the
  same code in *its* main thread, and waits for the reply with a hard deadline; a helper that
  misses it is killed (a later call starts a fresh one). The helper also guards against
  computations a signal cannot interrupt (long C-level big-integer work) and caps its memory;
- with ``isolate=False`` in the main thread, calls ``parse`` and ``verify`` here with their own
  timeout arguments: about 1 ms faster, but with no hard deadline (an alarm raised inside a
  garbage-collector callback is swallowed, so ``(1+x)^{100000}`` once ran for 13 minutes).

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
import math
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

__all__ = ["is_math_verify_available", "shutdown_workers", "symbolic_equal"]

logger = logging.getLogger(__name__)

_ROOT = str(Path(__file__).resolve().parent.parent)
_BOOT = "import sys; sys.path.insert(0, {root!r}); from rewards.symbolic import _serve; _serve()"
_START_TIMEOUT_S = 120.0
_MAX_HELPERS = max(4, 2 * (os.cpu_count() or 1))
_MEMORY_LIMIT_BYTES = 4 * 1024**3
_INSTALL_HINT = "pip install math-verify (one of the project's base dependencies)"


def is_math_verify_available() -> bool:
    """Whether math-verify can be imported."""
    return importlib.util.find_spec("math_verify") is not None


FLOAT_ROUNDING = 6  # math-verify's default: numbers compared at 6 decimal places


def require_math_verify() -> None:
    """Raise an `ImportError` naming the package to install when math-verify is missing."""
    if not is_math_verify_available():
        raise ImportError(f"the 'math' verifier needs math-verify: {_INSTALL_HINT}")


def _wrap(expression: str) -> str:
    """Give math-verify a LaTeX environment to find: the bare answer goes in ``\\boxed{}``."""
    text = expression.strip()
    if len(text) >= 2 and text[0] == "$" and text[-1] == "$":
        text = text.strip("$")
    return "\\boxed{" + text + "}"


@functools.lru_cache(maxsize=4096)
def _parse_reference(reference: str, seconds: int) -> list:
    from math_verify import parse

    return parse(_wrap(reference), parsing_timeout=seconds, raise_on_error=True)


def compare_in_process(
    reference: str, answer: str, timeout: float, float_rounding: int = FLOAT_ROUNDING
) -> tuple[bool | None, str]:
    """Run math-verify here; only call this from the main thread (it uses ``signal.alarm``).
    `float_rounding` is math-verify's: the decimal places numbers are compared at.

    Returns:
        ``(True | False, reason)``, or ``(None, reason)`` when it timed out.
    """
    from math_verify import parse, verify
    from math_verify.errors import TimeoutException

    seconds = max(1, math.ceil(timeout))
    deadline = time.monotonic() + 3 * seconds
    try:
        gold = _parse_reference(reference, seconds)
    except TimeoutException:
        return None, f"timeout: math-verify parsing the reference took over {seconds} s"
    except Exception as exc:  # noqa: BLE001 - math-verify raises whatever sympy or antlr raise
        return False, f"math-verify could not parse the reference ({type(exc).__name__})"
    try:
        pred = parse(_wrap(answer), parsing_timeout=seconds, raise_on_error=True)
    except TimeoutException:
        return None, f"timeout: math-verify parsing the answer took over {seconds} s"
    except Exception as exc:  # noqa: BLE001 - as above; the reason names the error type
        return False, f"math-verify could not parse the answer ({type(exc).__name__})"
    if not pred:
        return False, "math-verify could not parse the answer"
    timed_out = False
    # verify() on the whole lists would hide a timeout as False; compare pair by pair instead.
    for gold_item in gold:
        for pred_item in pred:
            if time.monotonic() > deadline:
                return None, f"timeout: math-verify took over {3 * seconds} s"
            try:
                same = verify(
                    gold_item,
                    pred_item,
                    float_rounding=float_rounding,
                    timeout_seconds=seconds,
                    raise_on_error=True,
                )
                if same:
                    return True, "equivalent (math-verify)"
            except TimeoutException:
                timed_out = True
            # A failing comparison is a non-match, as inside verify() itself.
            except Exception:  # noqa: BLE001, S112
                continue
    if timed_out:
        return None, f"timeout: math-verify comparison took over {seconds} s"
    return False, "not equivalent (math-verify)"


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
    import math_verify  # noqa: F401 - pay the import before saying ready

    channel.write('{"ready": true}\n')
    channel.flush()
    for line in sys.stdin:
        request = json.loads(line)
        try:
            ok, reason = compare_in_process(
                request["ref"], request["ans"], request["timeout"], request["rounding"]
            )
        except MemoryError:
            ok, reason = None, "error: math-verify ran out of memory"
        channel.write(json.dumps({"ok": ok, "reason": reason}) + "\n")
        channel.flush()


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
        self, reference: str, answer: str, timeout: float, rounding: int
    ) -> tuple[bool | None, str]:
        request = {"ref": reference, "ans": answer, "timeout": timeout, "rounding": rounding}
        self.proc.stdin.write(json.dumps(request) + "\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        # The helper's own alarms stop it after about 3 x timeout; the margin covers start-up
        # jitter, and anything slower (C code a signal cannot interrupt) is killed.
        reply = self._reply(3 * max(1, math.ceil(timeout)) + 2.0)
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
    """At most `_MAX_HELPERS` helpers (each holds sympy, ~100 MB); more callers wait their turn."""

    def __init__(self) -> None:
        self.forget()

    def compare(
        self, reference: str, answer: str, timeout: float, rounding: int
    ) -> tuple[bool | None, str]:
        # A caller waits at most for a few helpers' worth of bounded calls, then gives up.
        if not self._slots.acquire(timeout=_START_TIMEOUT_S + 12 * max(1, math.ceil(timeout))):
            return None, "timeout: every math-verify helper stayed busy"
        try:
            return self._compare(reference, answer, timeout, rounding)
        finally:
            self._slots.release()

    def _compare(
        self, reference: str, answer: str, timeout: float, rounding: int
    ) -> tuple[bool | None, str]:
        with self._lock:
            worker = self._idle.pop() if self._idle else None
        try:
            worker = worker or _Worker()
        except OSError as exc:
            return None, f"error: could not start a math-verify helper ({exc})"
        try:
            result = worker.ask(reference, answer, timeout, rounding)
        except TimeoutError:
            worker.kill()
            return None, f"timeout: math-verify helper took over {3 * max(1, math.ceil(timeout))} s"
        except (OSError, EOFError, ValueError, KeyError) as exc:
            worker.kill()
            return None, f"error: math-verify helper failed ({type(exc).__name__})"
        with self._lock:
            self._idle.append(worker)
        return result

    def shutdown(self) -> None:
        with self._lock:
            workers, self._idle = self._idle, []
        for worker in workers:
            worker.kill()

    def forget(self) -> None:
        """Start empty; in a forked child the parent's helpers and locks are not ours to use."""
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(_MAX_HELPERS)
        self._idle: list[_Worker] = []


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
    timeout: float = 5.0,
    isolate: bool = True,
    float_rounding: int = FLOAT_ROUNDING,
) -> tuple[bool | None, str]:
    """Whether math-verify finds `answer` equivalent to `reference`, within a bounded time.

    Args:
        reference: the bare reference answer (LaTeX or plain).
        answer: the extracted answer.
        timeout: seconds math-verify may spend on each of parsing and comparing; one call takes
            at most about 3 x timeout.
        isolate: run in a helper process even in the main thread (the default): a hard
            deadline that survives C-level work and signals swallowed by a garbage-collector
            callback or a broad ``except`` in sympy. ``False`` uses the caller's main thread
            when it can (threads always use a helper).
        float_rounding: decimal places numbers are compared at (math-verify's
            ``float_rounding``), matrices' and intervals' entries included.

    Returns:
        ``(True | False, reason)``; ``(None, reason)`` on a timeout or a helper failure.

    Raises:
        ImportError: math-verify is not installed.
    """
    require_math_verify()
    if not isolate and _can_use_signals():
        return compare_in_process(reference, answer, timeout, float_rounding)
    return _POOL.compare(reference, answer, timeout, float_rounding)
