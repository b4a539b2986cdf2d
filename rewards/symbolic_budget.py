"""math-verify run in this process, within a budget of wall time: the budget's bounds
(`check_budget`), the timer that keeps it, and one answer's check (`compare_in_process`).

math-verify's own timeouts are whole seconds of ``signal.alarm``, so they are switched off and
the budget is kept here, by an interval timer (``setitimer``) that raises math-verify's
``TimeoutException`` when the budget runs out, and again every `_REFIRE_S` after that: one that
lands in a finalizer (a ``__del__``, a garbage-collector callback) cannot stop the work, and
Python would report it as an "exception ignored"; while the timer runs those are dropped (the
next one stops the work), and every other one goes on to ``sys.unraisablehook``. Signals work
only in the main thread of the main interpreter: `rewards.symbolic` runs these checks in helper
processes' main threads, or here with ``isolate=False``.
"""

from __future__ import annotations

import contextlib
import functools
import math
import sys
from collections.abc import Callable
from typing import TypeVar

__all__ = [
    "DEFAULT_BUDGET_S",
    "FLOAT_ROUNDING",
    "MAX_BUDGET_S",
    "REFERENCE_BUDGET_S",
    "budget_text",
    "check_budget",
    "compare_in_process",
    "warm_up",
]

_T = TypeVar("_T")

DEFAULT_BUDGET_S = 1.0
"""Seconds of wall time math-verify may spend on one answer (parsing and comparing it)."""
MAX_BUDGET_S = 600.0
"""The largest budget accepted (a budget is a bound on one answer, not a way to switch it off)."""
REFERENCE_BUDGET_S = 5.0
"""Seconds math-verify may spend parsing a reference (once per process and reference: cached)."""
_REFIRE_S = 0.02
"""After the budget runs out, the timer fires again this often until the work stops."""

FLOAT_ROUNDING = 6  # math-verify's default: numbers compared at 6 decimal places


def _wrap(expression: str) -> str:
    """Give math-verify a LaTeX environment to find: the bare answer goes in ``\\boxed{}``."""
    text = expression.strip()
    if len(text) >= 2 and text[0] == "$" and text[-1] == "$":
        text = text.strip("$")
    return "\\boxed{" + text + "}"


def check_budget(value: object, what: str = "budget_s") -> float:
    """`value` as a budget in seconds: a real number above 0 and at most `MAX_BUDGET_S`.

    Raises:
        TypeError: `value` is not a real number (a bool is not one).
        ValueError: it is not finite, not above 0, or over `MAX_BUDGET_S`.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} must be a number of seconds, got {type(value).__name__} {value!r}")
    if not (math.isfinite(value) and 0 < value <= MAX_BUDGET_S):
        raise ValueError(
            f"{what} must be a number of seconds in (0, {MAX_BUDGET_S:g}], got {value!r}"
        )
    return float(value)


class _Timer:
    __slots__ = ("active",)

    def __init__(self) -> None:
        self.active = False


@functools.cache
def _budget_out() -> type[Exception]:
    """The timer's exception: math-verify's ``TimeoutException`` (what its callers catch), of a
    class of its own so that a finalizer's copy is known for the budget's."""
    from math_verify.errors import TimeoutException

    return type("BudgetOut", (TimeoutException,), {"__module__": __name__})


def _within(seconds: float, work: Callable[[], _T]) -> _T:
    """``work()``, interrupted by math-verify's ``TimeoutException`` once `seconds` of wall time
    have passed and every `_REFIRE_S` after, until it ends; main thread only (``SIGALRM``).

    The handler in place before is put back, and so is ``sys.unraisablehook``: meanwhile, a
    timeout raised inside a finalizer (which cannot stop the work: the next one does) is dropped
    instead of reported. ``timer.active = False`` is the first statement of the ``finally`` (no
    signal is handled before it), and a late signal only disarms the timer, so no timeout escapes
    the call.
    """
    import signal

    budget_out = _budget_out()
    timer = _Timer()
    reported = sys.unraisablehook

    def expire(signum: int, frame: object) -> None:
        if timer.active:
            raise budget_out("the symbolic budget ran out")
        signal.setitimer(signal.ITIMER_REAL, 0)

    def unraisable(args: sys.UnraisableHookArgs) -> None:
        if not isinstance(args.exc_value, budget_out):
            reported(args)

    previous = signal.signal(signal.SIGALRM, expire)
    sys.unraisablehook = unraisable
    try:
        timer.active = True
        signal.setitimer(signal.ITIMER_REAL, max(seconds, 1e-3), _REFIRE_S)  # 0 would disarm
        return work()
    finally:
        timer.active = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL if previous is None else previous)
        sys.unraisablehook = reported


def _quiet_math_verify() -> None:
    """math-verify warns once that its own timeout is off: the budget here replaces it."""
    from math_verify import grader, parser

    grader.TIMEOUT_WARNING_SHOWN = parser.TIMEOUT_WARNING_SHOWN = True  # type: ignore[attr-defined]


@functools.lru_cache(maxsize=4096)
def _parse_reference(reference: str) -> list:
    from math_verify import parse

    return parse(_wrap(reference), parsing_timeout=None, raise_on_error=True)  # type: ignore[arg-type]


def budget_text(seconds: float) -> str:
    """`seconds` as a reason writes it (``"1 s"``, ``"0.25 s"``)."""
    return f"{seconds:.3g} s"


def compare_in_process(
    reference: str,
    answer: str,
    budget_s: float = DEFAULT_BUDGET_S,
    float_rounding: int = FLOAT_ROUNDING,
    reference_s: float | None = REFERENCE_BUDGET_S,
    started: Callable[[], None] | None = None,
    share: float = 1.0,
) -> tuple[bool | None, str]:
    """Run math-verify here, within `budget_s` of wall time for the answer (see the module
    docstring); only call this from the main thread (it uses ``SIGALRM``).

    Args:
        reference: the bare reference.
        answer: the bare answer.
        budget_s: seconds for parsing the answer and comparing it (and for parsing the
            reference when `reference_s` is None).
        float_rounding: math-verify's: the decimal places numbers are compared at.
        reference_s: seconds for parsing the reference first, on a budget of its own; None: the
            reference is model output too, parsed within `budget_s`.
        started: called when the budget starts (after the reference is parsed).
        share: stop at this share of `budget_s` (a helper stops early, so that its reply
            arrives before its caller's deadline).

    Returns:
        ``(True | False, reason)``, or ``(None, reason)`` when a budget ran out.
    """
    from math_verify.errors import TimeoutException

    _quiet_math_verify()
    gold: list | None = None
    if reference_s is not None:
        try:
            gold = _within(reference_s, functools.partial(_parse_reference, reference))
        except TimeoutException:
            return None, f"timeout: math-verify parsing the reference took over {reference_s:g} s"
        except Exception as exc:  # noqa: BLE001 - math-verify raises whatever sympy or antlr raise
            return False, f"math-verify could not parse the reference ({type(exc).__name__})"
    if started is not None:
        started()
    step = ["parsing the reference"]
    try:
        return _within(
            share * budget_s, lambda: _check(reference, answer, gold, float_rounding, step)
        )
    except TimeoutException:
        spent = budget_text(budget_s)
        return None, f"timeout: math-verify ran past the symbolic budget ({spent}) {step[0]}"


def _check(
    reference: str, answer: str, gold: list | None, float_rounding: int, step: list[str]
) -> tuple[bool, str]:
    """Parse what is left to parse and compare; `step` names the stage reached (for a timeout's
    reason)."""
    from math_verify import parse

    if gold is None:
        try:
            gold = _parse_reference(reference)
        except Exception as exc:  # noqa: BLE001 - as in `compare_in_process`
            return False, f"math-verify could not parse the reference ({type(exc).__name__})"
    step[0] = "parsing the answer"
    try:
        pred = parse(_wrap(answer), parsing_timeout=None, raise_on_error=True)  # type: ignore[arg-type]
    except Exception as exc:  # noqa: BLE001 - the reason names the error type
        return False, f"math-verify could not parse the answer ({type(exc).__name__})"
    step[0] = "comparing"
    return _compare(gold, pred, float_rounding)


def _compare(gold: list, pred: list, float_rounding: int) -> tuple[bool, str]:
    """math-verify's verdict on parsed lists, pair by pair (a failing pair is a non-match, as
    inside ``verify()``; a timeout propagates)."""
    from math_verify import verify
    from math_verify.errors import TimeoutException

    if not pred:
        return False, "math-verify could not parse the answer"
    for gold_item in gold:
        for pred_item in pred:
            try:
                same = verify(
                    gold_item,
                    pred_item,
                    float_rounding=float_rounding,
                    timeout_seconds=None,
                    raise_on_error=True,
                )
            except TimeoutException:
                raise
            except Exception:  # noqa: BLE001, S112
                continue
            if same:
                return True, "equivalent (math-verify)"
    return False, "not equivalent (math-verify)"


def warm_up() -> None:
    """Pay math-verify's lazy first-use costs (its grammar, sympy's sets, matrices and
    intervals) before a helper says it is ready, and before the first check run in this process
    (`_warmed_up`), so that no answer's budget pays them."""
    for reference, answer in (
        ("x^2+2x+1", "(x+1)^2"),
        ("\\frac{1}{2}", "0.5"),
        ("[0, \\infty)", "[0,\\infty)"),
        ("\\{1, 2\\}", "\\{2, 1\\}"),
        ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}"),
        ("\\sqrt{2}", "2^{1/2}"),
        ("x = 2", "2"),
    ):
        with contextlib.suppress(Exception):
            compare_in_process(reference, answer, 30.0, FLOAT_ROUNDING, 30.0)
    _parse_reference.cache_clear()
