"""Property-based fuzzing of every environment and every verifier with adversarial text.

Shared by ``tests/fuzz/test_fuzz.py`` (a small, derandomized budget in the default test run) and
``scripts/fuzz.py`` (a large budget and a summary table). A `Target` is one thing under test and
one property: ``target.check(data)`` draws its inputs from a Hypothesis ``st.data()`` object,
runs them, records the time of every call in `COLLECTOR` and raises ``AssertionError`` (or the
unexpected exception) when the property fails.

Properties:

- environments (every id in ``envs.list_envs()``, with the ``arithmetic`` task and with
  `ODD_TASK`, whose references are LaTeX, fractions, intervals and matrices): full episodes in
  which every action is adversarial text, now and then a non-string; the only exception allowed
  is the documented ``TypeError`` naming the agent for a non-string action (after which the
  episode goes on); rewards are finite floats, infos carry the documented keys and no reference,
  observations lie in their spaces, the episode ends within ``max_turns``, and each step stays
  within `STEP_BOUND_S` plus the verifier's symbolic budget for each answer math-verify checked;
- verifiers (every name in ``rewards.list_verifiers()``): ``verify(response, reference)``
  returns a `Verdict` with a finite score in [0, 1] and a str reason, raises nothing for
  adversarial responses, only ``ValueError`` for adversarial references, and returns within
  `CALL_BOUND_S` plus its symbolic budget (``symbolic_budget``), also from a non-main thread;
- ``rewards.verify_batch``, the TRL adapter ``rewards.as_reward_func`` and the extraction
  functions of ``rewards.extract`` on the same inputs.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gc
import math
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis import target as hypothesis_target
from pettingzoo import ParallelEnv

import envs
from rewards import (
    CompositeVerifier,
    Verdict,
    as_reward_func,
    get_verifier,
    list_verifiers,
    verify_batch,
)
from rewards import extract as rx

CALL_BOUND_S = 2.0
"""Seconds any verifier call or extraction may take, before symbolic (math-verify) timeouts."""
STEP_BOUND_S = 2.0
"""Seconds any env step may take, before the math-verify time of the answers it scored."""
ODD_TASK = "fuzz_odd_answers"
TASKS = ("arithmetic", ODD_TASK)
# fmt: off
ODD_ANSWERS = (
    "\\frac{1}{2}", "-\\frac{3}{4}", "\\sqrt{2}", "(1, 2)", "[0, \\infty)", "x^2+2x+1",
    "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "10\\%", "\\$2,125", "\\pi", "0.333333",
    "\\text{(B)}", "\\{1, 2\\}", "2^{10}", "1e999999",
)
# fmt: on
REFERENCE_CHAR_LIMIT = {"similarity": 64}
"""Adversarial references are cut to this many characters for these verifiers. `similarity`
runs difflib's SequenceMatcher (autojunk off) over up to 2000 characters of each side; its time
grows superlinearly when both sides repeat a few characters: a 2000-character response against a
400-character reference "aaaa..." takes ~17 s, against "\\,"*1000 ~200 s (found by this fuzz;
natural references, such as GSM8K solutions, stay under 0.3 s)."""
PER_MB_S = 10.0
"""Extra seconds per MB of text for the functions that read all of it (references, helpers)."""
LEAK_KEYS = frozenset({"answer", "reference", "ground_truth", "solution"})
BASE_INFO_KEYS = frozenset({"problem_id", "turn"})
ACTED_INFO_KEYS = frozenset(
    {"problem_id", "turn", "round", "role", "extracted", "correct", "score", "reason"}
    | {"parse_error"}
)

# ---------------------------------------------------------------- adversarial text

# fmt: off
UNITS = (
    "9", "0", "a", " ", "\\", "{", "}", "$", "%", "\n", "\t", "\x00", "\ud800", "\udfff", "\u200b",
    "\u200f", "\u202e", "\ufeff", "\u0301", "ع", "中", "🙂", "#### ", "#### 1 ", "1 ", "1,", "1.",
    "-1", "1/", "answer: ", "The answer is 5. ", "<answer>", "</answer>", "\\boxed{", "\\boxed{1}",
    "\\boxed ", "\\fbox{", "\\frac{1}{2}", "\\sqrt{", "\\\\", "x=1 ", " or ", "\\quad ",
    "Verdict: correct ", "\\left(", "^{", "e999",
)
# fmt: on
# fmt: off
NESTINGS = (
    ("\\frac{", "1", "}{2}"), ("\\sqrt{", "2", "}"), ("\\sqrt[3]{", "8", "}"), ("{", "x", "}"),
    ("\\boxed{", "7", "}"), ("\\left(", "1", "\\right)"), ("(", "1", ")"), ("[", "1", "]"),
    ("2^{", "2", "}"), ("\\begin{pmatrix}", "1", "\\end{pmatrix}"), ("\\text{", "a", "}"),
    ("<answer>", "5", "</answer>"),
)
# fmt: on
# fmt: off
SPECIAL_NUMBERS = (
    "1e999999", "-1e999999", "1e-999999", "1E+308", "0^0", "0^{0}", "0/0", "1/0", "\\frac{1}{0}",
    "\\frac{0}{0}", "-0", "+0.0", "NaN", "nan", "inf", "-inf", "\\infty", "-\\infty",
    "10^{10^{10}}", "9^{9^{9^{9}}}", "2^{2^{2^{2^{100}}}}", "(10^{10})!", "\\sqrt{-1}", "\\log(0)",
    "0.999...", "1,000,000,000,000,000,000", "١٢٣", "１２３", "\\$-0.00", "50\\%", "12%%%",
)
# fmt: on
# fmt: off
MARKERS = (
    # The last few ("Verdict", ...) once met long runs of spaces quadratically or worse.
    "\\boxed{", "\\boxed{}", "\\boxed", "\\fbox{", "}", "<answer>", "</answer>",
    "<answer></answer>", "####", "#### ", "The answer is", "Final answer:", "Answer:",
    "Verdict: correct", "Verdict: incorrect", "\\boxed{correct}", "$", "$$", "\\(", "\\)", "\\[",
    "\\]", "\\text{", "\\%", "\\$", "{,}", "\\!", "\\dfrac", "<think>", "</think>", "entailment",
    "neutral or contradiction", "Verdict", "Verdict:", "verdict -", "The answer is 5",
    "\\frac{1}{", "#### 1", "5,",
)
# fmt: on
WRAPPERS: tuple[Callable[[str], str], ...] = (
    lambda s: s,
    lambda s: "\\boxed{" + s + "}",
    lambda s: "\\boxed{" + s,
    lambda s: f"The answer is {s}.",
    lambda s: f"#### {s}",
    lambda s: f"<answer>{s}</answer>",
    lambda s: f"${s}$",
    lambda s: s + "\n#### 18",
    lambda s: f"<think>{s}</think><answer>{s}</answer>",
    lambda s: f"Verdict: correct\n{s}",
)
# A prefix, a long run of one unit, a suffix: the shape that makes backtracking regexes slow.
# fmt: off
RUN_PREFIXES = (
    "", "Verdict", "Verdict:", "verdict -", "The answer is 5", "Answer:", "\\frac{1}{",
    "\\boxed{\\frac{1}{", "#### ", "#### 1", "5,", "<answer>", "\\boxed{", "\\text{", "$",
)
# fmt: on
RUN_UNITS = (" ", "\t", "\n", "\\", "9", "{", "}", "1,", "*", "$", "-", "\\,", " \t", "<answer>")
RUN_SUFFIXES = ("", "x", "?", "}", "</answer>", "correct", "\n#### 18", "because")
MAX_REPEAT_CHARS = 1_200_000


def _sizes() -> st.SearchStrategy[int]:
    """Small, medium (around the 4000-character extraction tail) and huge (100k+ characters)."""
    return st.one_of(
        st.integers(1, 64),
        st.integers(150, 250),
        st.integers(3_000, 9_000),
        st.integers(100_000, MAX_REPEAT_CHARS),
    )


def _repeat(unit: str, size: int) -> str:
    return unit * max(1, size // len(unit))


def _nest(template: tuple[str, str, str], depth: int, mode: str) -> str:
    opening, middle, closing = template
    if mode == "unclosed":
        return opening * depth + middle
    if mode == "closers":
        return middle + closing * depth
    return opening * depth + middle + closing * depth


def _big_number(digits: int, kind: str) -> str:
    if kind == "int":
        return "9" * digits
    if kind == "neg":
        return "-" + "1" * digits
    if kind == "grouped":
        return "1" + ",000" * max(1, digits // 3)
    if kind == "tiny":
        return "0." + "0" * digits + "1"
    if kind == "frac":
        return "\\frac{" + "7" * digits + "}{" + "3" * max(1, digits // 2) + "}"
    return "1" + "0" * digits + "\\%"


def adversarial_text() -> st.SearchStrategy[str]:
    """Adversarial model output mixed with Hypothesis's own ``st.text()``.

    Building blocks: huge repetitions of one unit (digits, backslashes, braces, markers, NULs,
    lone surrogates, zero-width and right-to-left marks; up to 1.2 MB, one long line), deep
    LaTeX nesting (``\\frac``, ``\\sqrt``, braces, boxes, towers; thousands deep, balanced,
    unclosed or only closers), numbers with thousands of digits and special values
    (``1e999999``, ``0^0``, ``1/0``, ``NaN``), answer markers, control/format/surrogate
    characters, and concatenations of all these, optionally wrapped in an answer marker.
    """
    odd_chars = st.text(
        alphabet=st.characters(categories=["Cc", "Cf", "Cs", "Co", "Mn", "Zs", "Zl", "Zp"]),
        max_size=64,
    )
    repeated = st.builds(_repeat, st.sampled_from(UNITS), _sizes())
    nested = st.builds(
        _nest,
        st.sampled_from(NESTINGS),
        st.one_of(st.integers(1, 40), st.integers(100, 5_000)),
        st.sampled_from(("balanced", "unclosed", "closers")),
    )
    numbers = st.one_of(
        st.sampled_from(SPECIAL_NUMBERS),
        st.builds(
            _big_number,
            st.one_of(st.integers(1, 30), st.integers(150, 250), st.integers(1_000, 5_000)),
            st.sampled_from(("int", "neg", "grouped", "tiny", "frac", "percent")),
        ),
        st.integers().map(str),
        st.fractions().map(str),
        st.floats().map(repr),
        st.decimals(allow_nan=True).map(str),
    )
    runs = st.builds(
        lambda prefix, unit, size, suffix: prefix + _repeat(unit, size) + suffix,
        st.sampled_from(RUN_PREFIXES),
        st.sampled_from(RUN_UNITS),
        _sizes(),
        st.sampled_from(RUN_SUFFIXES),
    )
    block = st.one_of(
        runs,
        st.text(),
        st.text(max_size=2_000),
        odd_chars,
        repeated,
        nested,
        numbers,
        st.sampled_from(MARKERS),
    )
    combined = st.builds(
        lambda wrap, parts: wrap("".join(parts)),
        st.sampled_from(WRAPPERS),
        st.lists(block, min_size=1, max_size=6),
    )
    return st.one_of(block, combined)


NON_STRINGS = st.sampled_from(
    (None, 0, 18, -1.5, math.nan, math.inf, b"\\boxed{18}", ["#### 18"], {"text": "18"}, object())
)

# ---------------------------------------------------------------- references

# fmt: off
NUMERIC_REFERENCES = (
    "18", "0", "-3", "2,125", "0.5", "1/2", "\\frac{1}{2}", "50%", "\\$18.00", "1" + "0" * 150,
    "0." + "0" * 150 + "1", "-0." + "0" * 100 + "7", "Sam pays 9 * 2 = 18 dollars.\n#### 18",
)
# fmt: on
LABEL_REFERENCES = ("e", "n", "c", "entailment", "neutral", "contradiction", "Contradiction.")
MATH_REFERENCES = NUMERIC_REFERENCES + ODD_ANSWERS + ("x", "\\boxed{\\frac{\\sqrt{3}}{2}}")


def references_for(name: str) -> tuple[str, ...]:
    """Valid references of a verifier: none of them may make it raise."""
    if name == "label":
        return LABEL_REFERENCES
    if name in ("gsm8k", "numeric", "partial_numeric", "composite"):
        return NUMERIC_REFERENCES
    return MATH_REFERENCES


_WARM: list[bool] = []


def warm_up() -> None:
    """Import math-verify (and sympy) once, outside any timing: the first symbolic check pays it."""
    if not _WARM:
        verdict = get_verifier("math").verify("\\boxed{x+1}", "1+x")
        assert verdict.score == 1.0, verdict
        _WARM.append(True)


def build_verifier(name: str, math_timeout: float | None = None) -> Any:
    """The verifier registered as `name`, built with its defaults.

    Args:
        name: a name from ``rewards.list_verifiers()``.
        math_timeout: seconds for the math-verify based verifiers (None: their default); a
            shorter one only makes symbolic timeouts cheaper to hit while fuzzing.
    """
    warm_up()
    math_options = {} if math_timeout is None else {"timeout": math_timeout}
    if name == "composite":  # the only verifier that needs options: a few of the others
        return CompositeVerifier(
            {
                get_verifier("math", **math_options): 2.0,
                "partial_numeric": 1.0,
                "format": 1.0,
                "similarity": 0.5,
            }
        )
    if name in ("math", "math_verify"):
        return get_verifier(name, **math_options)
    if name == "remote":  # the client, against a real reward server on loopback
        from tests.rewards.conftest import remote_math_verifier

        remote = remote_math_verifier(**math_options)
        remote.served = get_verifier("math", **math_options)  # what the server runs, for budgets
        return remote
    return get_verifier(name)


def symbolic_budget(verifier: Any) -> float:
    """Seconds the verifier may spend in math-verify on one call (0 when it never calls it).

    `rewards.symbolic.symbolic_equal` bounds each parse and comparison by ``timeout`` (signals in
    the main thread, a helper process with a hard deadline elsewhere); one call is documented
    at "about 3 x timeout". Here: ``4 x ceil(timeout) + 1`` (the last comparison may start just
    before the 3 x timeout deadline), summed over a composite's components; a remote verifier
    gets the budget of the verifier its server runs.
    """
    parts = getattr(verifier, "parts", None)
    if parts is not None:
        return sum(symbolic_budget(part) for part, _ in parts)
    served = getattr(verifier, "served", None)  # a remote verifier: the server's verifier's budget
    if served is not None:
        return symbolic_budget(served)
    timeout = getattr(verifier, "timeout", None)
    if isinstance(timeout, (int, float)) and getattr(verifier, "name", "") == "math":
        return 4 * math.ceil(timeout) + 1.0
    return 0.0


def size_allowance(text: Any) -> float:
    """`PER_MB_S` per million characters of `text` (0 for a non-string)."""
    return PER_MB_S * len(text) / 1e6 if isinstance(text, str) else 0.0


def _timed_out(reason: Any) -> bool:
    return "timeout" in str(reason)


def _symbolic(reason: Any) -> bool:
    """Whether a verdict's reason says math-verify ran (up to its timeout, not only past it)."""
    return "math-verify" in str(reason) or _timed_out(reason)


# ---------------------------------------------------------------- records


@dataclass
class Stats:
    """Inputs tried, property failures, symbolic timeouts and the slowest call of one target."""

    inputs: int = 0
    failures: int = 0
    timeouts: int = 0
    max_s: float = 0.0
    max_s_no_timeout: float = 0.0
    first_failure: str = ""
    first_failure_input: str = ""
    slowest: str = ""


@dataclass
class Collector:
    """Counts and durations per target, shared by every test of a session (thread-safe)."""

    stats: dict[str, Stats] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    slowest_now: float = 0.0  # slowest call of the current example (Hypothesis `target`s it)

    def _get(self, target: str) -> Stats:
        return self.stats.setdefault(target, Stats())

    def call(self, target: str, seconds: float, timed_out: bool = False, what: str = "") -> None:
        """Record one timed call (`what` describes the input, kept for the slowest call)."""
        with self.lock:
            stats = self._get(target)
            self.slowest_now = max(self.slowest_now, seconds)
            if seconds > stats.max_s:
                stats.max_s, stats.slowest = seconds, what
            if timed_out:
                stats.timeouts += 1
            else:
                stats.max_s_no_timeout = max(stats.max_s_no_timeout, seconds)

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

    def table(self) -> str:
        """A markdown table: target, inputs, failures, timeouts, max s per call."""
        columns = "target|inputs|failures|symbolic timeouts|max s/call|max s/call (no timeout)"
        rows = [
            f"| {columns.replace('|', ' | ')} | slowest input |",
            "|---|" + "---:|" * 5 + "---|",
        ]
        for name in sorted(self.stats):
            s = self.stats[name]
            rows.append(
                f"| {name} | {s.inputs} | {s.failures} | {s.timeouts} | {s.max_s:.3f} | "
                f"{s.max_s_no_timeout:.3f} | {s.slowest[:70].replace('|', '/')} |"
            )
        return "\n".join(rows)

    def as_json(self) -> dict[str, dict[str, Any]]:
        return {name: vars(stats).copy() for name, stats in sorted(self.stats.items())}


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


class _StopTarget(BaseException):
    """Ends a target's run early (Hypothesis lets a non-Exception through without shrinking)."""


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
    """Time the block, record it, and fail when it took longer than ``bound()`` seconds.

    The block may set ``box["timed_out"] = True`` (a symbolic timeout was reported), which the
    bound callable can read from the same dict. `inputs` is described in the record. A block
    still spinning after ``most + 3`` seconds of CPU (`most`: the largest bound the block may
    earn, default ``bound()`` now) is interrupted by `watchdog` and fails with `Hang`.
    """
    box: dict[str, Any] = {"timed_out": False}
    # No garbage collection inside the call: Hypothesis registers a gc callback, and math-verify's
    # SIGALRM timeout raised while that callback runs is printed and lost ("Exception ignored in
    # gc_callback"), so the timed-out computation would go on. The fuzz measures the project.
    collecting = gc.isenabled()
    gc.disable()
    started = time.perf_counter()
    try:
        with watchdog((bound() if most is None else most) + 3.0):
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
    COLLECTOR.call(
        target, elapsed, box["timed_out"], describe(inputs) if inputs is not None else ""
    )
    limit = bound()
    if elapsed > limit:
        error = AssertionError(
            f"{what} took {elapsed:.2f} s (bound {limit:.1f} s) on {describe(inputs)}"
        )
        error.fuzz_input = inputs  # type: ignore[attr-defined]
        raise error


def check_verdict(verdict: Any, what: str, printable: bool = True) -> None:
    """A `Verdict` with a finite score in [0, 1], a str reason and a str-or-None extraction;
    with `printable`, reason and extraction also encode as UTF-8 (no lone surrogates)."""
    assert isinstance(verdict, Verdict), f"{what} returned {type(verdict).__name__}"
    assert isinstance(verdict.score, (int, float)) and not isinstance(verdict.score, bool)
    assert math.isfinite(verdict.score) and 0.0 <= verdict.score <= 1.0, verdict.score
    assert isinstance(verdict.reason, str), f"{what}: reason is {type(verdict.reason).__name__}"
    assert verdict.extracted is None or isinstance(verdict.extracted, str)
    if printable:
        (verdict.reason + (verdict.extracted or "")).encode("utf-8")  # loggable


# ---------------------------------------------------------------- targets


@dataclass(frozen=True)
class Target:
    """One thing under test and its property.

    Args:
        name: the table row, e.g. ``verify[math]`` or ``env[math/debate-v0|arithmetic]``.
        check: ``check(data)`` draws inputs from a Hypothesis ``st.data()`` object and raises
            when the property fails.
        scale: this target's share of the example budget (slow targets use less).
    """

    name: str
    check: Callable[[Any], None]
    scale: float = 1.0


def verify_target(name: str, math_timeout: float | None = None) -> Target:
    """``verify(adversarial response, valid reference)``: never raises, bounded, valid Verdict."""
    verifier = build_verifier(name, math_timeout)
    target = f"verify[{name}]"
    budget = symbolic_budget(verifier)
    references = references_for(name)

    def check(data: Any) -> None:
        response = data.draw(adversarial_text(), label="response")
        reference = data.draw(st.sampled_from(references), label="reference")
        COLLECTOR.input(target)
        with timed(target, lambda: CALL_BOUND_S + budget, target, (response, reference)) as box:
            verdict = verifier.verify(response, reference)
            box["timed_out"] = _timed_out(getattr(verdict, "reason", ""))
        check_verdict(verdict, target)

    return Target(target, check)


def reference_target(name: str, math_timeout: float | None = None) -> Target:
    """An adversarial reference (and response): a `Verdict` or the documented ValueError.

    References are data, not model output, and are read whole: the bound adds
    `size_allowance` (linear in the reference's length) to that of `verify_target`.
    """
    verifier = build_verifier(name, math_timeout)
    target = f"verify_bad_reference[{name}]"
    budget = symbolic_budget(verifier)

    limit = REFERENCE_CHAR_LIMIT.get(name)

    def check(data: Any) -> None:
        reference = data.draw(st.one_of(adversarial_text(), NON_STRINGS), label="reference")
        if limit is not None and isinstance(reference, str):
            reference = reference[-limit:]
        response = data.draw(adversarial_text(), label="response")
        COLLECTOR.input(target)
        bound = CALL_BOUND_S + budget + size_allowance(reference)
        with timed(target, lambda: bound, target, (response, reference)) as box:
            try:
                verdict = verifier.verify(response, reference)
            except ValueError as err:
                verdict = None
                assert str(err), "a ValueError must say what was wrong"
            box["timed_out"] = _timed_out(getattr(verdict, "reason", ""))
        if verdict is not None:
            # Reasons quote the reference, so a reference with a lone surrogate gives one too.
            check_verdict(verdict, target, printable=False)

    return Target(target, check, scale=0.5)


_HELPER_START_S: list[float] = []


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


def _helper_start_s() -> float:
    """Seconds a math-verify helper process takes to start here (measured once, from a thread)."""
    if not _HELPER_START_S:
        from rewards.symbolic import shutdown_workers

        shutdown_workers()  # measure a cold start, as after a helper is killed
        started = time.perf_counter()
        verify = get_verifier("math").verify
        verdict = in_thread(verify, "\\boxed{x+1}", "1+x", wait=300)
        assert verdict.score == 1.0, verdict
        _HELPER_START_S.append(time.perf_counter() - started)
    return _HELPER_START_S[0]


def thread_target(name: str, math_timeout: float | None = None) -> Target:
    """`verify_target` from a non-main thread, where math-verify's signal timeout cannot work.

    The bound adds two helper-process start-ups (a helper that misses its deadline is killed
    and the next call starts a fresh one) to the symbolic budget.
    """
    verifier = build_verifier(name, math_timeout)
    target = f"verify_in_thread[{name}]"
    budget = symbolic_budget(verifier)
    references = references_for(name)

    def check(data: Any) -> None:
        start_s = _helper_start_s() if budget else 0.0
        response = data.draw(adversarial_text(), label="response")
        reference = data.draw(st.sampled_from(references), label="reference")
        COLLECTOR.input(target)
        bound = CALL_BOUND_S + budget + 2 * start_s + 1.0
        with timed(target, lambda: bound, target, (response, reference)) as box:
            verdict = in_thread(verifier.verify, response, reference, wait=2 * bound + 5)
            box["timed_out"] = _timed_out(getattr(verdict, "reason", ""))
        check_verdict(verdict, target)

    return Target(target, check, scale=0.5)


def batch_target(math_timeout: float | None = None) -> Target:
    """``verify_batch`` (serial path) agrees with one-by-one ``verify`` on adversarial batches."""
    target = "verify_batch"
    verifiers = {name: build_verifier(name, math_timeout) for name in list_verifiers()}

    def check(data: Any) -> None:
        name = data.draw(st.sampled_from(sorted(verifiers)), label="verifier")
        verifier = verifiers[name]
        responses = data.draw(st.lists(adversarial_text(), min_size=0, max_size=6), label="rs")
        references = [
            data.draw(st.sampled_from(references_for(name)), label="reference") for _ in responses
        ]
        COLLECTOR.input(target)
        bound = CALL_BOUND_S + len(responses) * (CALL_BOUND_S + symbolic_budget(verifier))
        with timed(target, lambda: bound, f"{target}[{name}]", responses) as box:
            verdicts = verify_batch(verifier, responses, references, num_workers=1)
            box["timed_out"] = any(_timed_out(v.reason) for v in verdicts)
        assert len(verdicts) == len(responses)
        for verdict, response, reference in zip(verdicts, responses, references, strict=True):
            check_verdict(verdict, target)
            again = verifier.verify(response, reference)
            if not (_timed_out(verdict.reason) or _timed_out(again.reason)):
                assert again.score == verdict.score, (again, verdict)

    return Target(target, check, scale=0.5)


def _completion() -> st.SearchStrategy[Any]:
    text = adversarial_text()
    return st.one_of(
        text,
        st.builds(
            lambda t: [{"role": "user", "content": "q"}, {"role": "assistant", "content": t}], text
        ),
        st.builds(lambda t: {"role": "assistant", "content": t}, text),
        st.builds(
            lambda t: [{"role": "assistant", "content": [{"type": "text", "text": t}, {"x": 1}]}],
            text,
        ),
        st.builds(lambda v: [{"role": "assistant", "content": v}], NON_STRINGS),
        NON_STRINGS,
        st.just([]),
    )


def reward_func_target(math_timeout: float | None = None) -> Target:
    """The TRL adapter: one float in [0, 1] per row, None exactly where the reference is None."""
    target = "as_reward_func"
    funcs = {name: as_reward_func(build_verifier(name, math_timeout)) for name in list_verifiers()}
    budgets = {name: symbolic_budget(build_verifier(name, math_timeout)) for name in funcs}

    def check(data: Any) -> None:
        name = data.draw(st.sampled_from(sorted(funcs)), label="verifier")
        completions = data.draw(st.lists(_completion(), max_size=5), label="completions")
        answers = [
            data.draw(st.one_of(st.none(), st.sampled_from(references_for(name))), label="ref")
            for _ in completions
        ]
        COLLECTOR.input(target)
        bound = CALL_BOUND_S + len(completions) * (CALL_BOUND_S + budgets[name])
        with timed(target, lambda: bound, f"{target}[{name}]", completions):
            scores = funcs[name](completions, answer=answers, prompt=["p"] * len(completions))
        assert len(scores) == len(completions)
        for score, answer in zip(scores, answers, strict=True):
            if answer is None:
                assert score is None
            else:
                assert isinstance(score, float) and math.isfinite(score) and 0 <= score <= 1

    return Target(target, check)


def extract_target() -> Target:
    """``rewards.extract`` on adversarial text: no exception, bounded, printable results.

    ``analyze``/``extract_answer``/``sanitize`` read the last 4000 characters: `CALL_BOUND_S`
    whatever the size. ``find_boxed``, ``last_boxed``, ``has_closed_box``, ``prepare_reference``
    and ``canonical_answer`` read all of their text (references, extracted answers): they get
    `size_allowance` on top, i.e. they must stay linear.
    """
    target = "extract"
    whole = "extract (whole-text helpers)"
    warm_up()

    def check(data: Any) -> None:
        texts = data.draw(st.lists(adversarial_text(), min_size=1, max_size=4), label="texts")
        COLLECTOR.input(target)
        for text in texts:
            with timed(target, lambda: CALL_BOUND_S, target, text):  # reads the tail only
                answer = rx.extract_answer(text)
                found = rx.analyze(text)
                clean = rx.sanitize(text)
                answer_key = rx.canonical_answer(answer) if answer is not None else ""
            COLLECTOR.input(whole)
            with timed(whole, lambda t=text: CALL_BOUND_S + size_allowance(t), whole, text):
                boxes = rx.find_boxed(text)
                last = rx.last_boxed(text)
                closed = rx.has_closed_box(text)
                bare = rx.prepare_reference(text)
                key = rx.canonical_answer(text)
            assert answer == found.answer
            assert found.kind in rx.KINDS
            assert (answer is None) == (found.kind == "none")
            assert last == (boxes[-1] if boxes else None)
            assert isinstance(closed, bool) and (not closed or boxes)
            assert all(isinstance(m, str) and m for m in found.markers)
            clean.encode("utf-8")
            (answer or "").encode("utf-8")
            assert isinstance(bare, str) and isinstance(key, str) and isinstance(answer_key, str)
        with timed(target, lambda: CALL_BOUND_S * len(texts), "majority_vote", texts):
            answers = [rx.extract_answer(t) for t in texts]
            winner, votes = rx.majority_vote(answers)
        assert 0 <= votes <= len(texts)
        assert (winner is None) == (votes == 0)
        assert winner is None or winner in answers

    return Target(target, check, scale=1.0)


def _check_obs(env: Any, agent: str, obs: Any, where: str) -> None:
    space = env.observation_space(agent)
    assert space.contains(obs), f"{where}: observation of {agent} is outside its space"


def _check_reward(reward: Any, where: str) -> None:
    # PettingZoo's own `_clear_rewards` writes an int 0 for agents that did not act.
    real = isinstance(reward, (int, float)) and not isinstance(reward, bool)
    assert real and math.isfinite(reward), f"{where}: reward {reward!r}"


def _check_info(info: Any, keys: frozenset[str], where: str) -> None:
    assert isinstance(info, dict), f"{where}: info is {type(info).__name__}"
    missing = keys - set(info)
    assert not missing, f"{where}: info lacks {sorted(missing)}"
    leaked = LEAK_KEYS & set(info)
    assert not leaked, f"{where}: info carries the reference ({sorted(leaked)})"


def _expect_type_error(step: Callable[[], Any], agents: Sequence[str], bad: Any) -> None:
    try:
        step()
    except TypeError as err:
        message = str(err)
        assert any(repr(a) in message or a in message for a in agents), message
        assert type(bad).__name__ in message, message
        return
    raise AssertionError(f"a non-string action ({type(bad).__name__}) did not raise TypeError")


def register_odd_task() -> None:
    """Register `ODD_TASK`: problems whose references are LaTeX, fractions, intervals, ..."""
    problems = [
        envs.make_problem(f"odd/{i}", f"Odd problem {i}: state the answer.", answer)
        for i, answer in enumerate(ODD_ANSWERS)
    ]
    envs.register_task(
        ODD_TASK,
        lambda **kw: envs.Task(ODD_TASK, envs.ListSource(problems, ODD_TASK), **kw),
        override=True,
    )


def env_target(env_id: str, task: str, scale: float = 1.0) -> Target:
    """Full episodes of `env_id` on `task` with adversarial actions from every agent."""
    register_odd_task()
    warm_up()
    target = f"env[{env_id}:{task}]"

    def check(data: Any) -> None:
        env = envs.make(env_id, task=task)
        raw = getattr(env, "unwrapped", env)
        seed = data.draw(st.integers(0, 2**31 - 1), label="seed")
        budget = symbolic_budget(raw.verifier) if hasattr(raw, "verifier") else 0.0
        COLLECTOR.input(target)
        if isinstance(raw, ParallelEnv):
            _play_parallel(env, raw, data, seed, target, budget)
        else:
            _play_aec(env, raw, data, seed, target, budget)

    return Target(target, check, scale=scale)


def _nonstring_now(data: Any) -> bool:
    return data.draw(st.integers(0, 9), label="non-string?") == 0


def _play_aec(env: Any, raw: Any, data: Any, seed: int, target: str, budget: float) -> None:
    max_turns = raw.max_turns
    env.reset(seed=seed)
    acted = 0
    for agent in env.agent_iter(max_iter=4 * max_turns + 8):
        obs, reward, terminated, truncated, info = env.last()
        where = f"{target} turn {acted} ({agent})"
        _check_obs(env, agent, obs, where)
        _check_reward(reward, where)
        _check_info(info, BASE_INFO_KEYS, where)
        if terminated or truncated:
            env.step(None)
            continue
        if _nonstring_now(data):
            bad = data.draw(NON_STRINGS, label="non-string action")
            _expect_type_error(lambda bad=bad: env.step(bad), [agent], bad)
            assert raw.agent_selection == agent, "a rejected action changed whose turn it is"
        action = data.draw(adversarial_text(), label=f"{agent} action")

        def bound() -> float:
            return STEP_BOUND_S + budget * box["symbolic"]

        with timed(target, bound, where, action, STEP_BOUND_S + budget) as box:
            env.step(action)
            reason = raw.infos[agent].get("reason")
            box["timed_out"], box["symbolic"] = _timed_out(reason), _symbolic(reason)
        acted += 1
        assert acted <= max_turns, f"{where}: more than max_turns={max_turns} turns"
        _check_info(raw.infos[agent], ACTED_INFO_KEYS, where)
        for who, value in raw.rewards.items():
            _check_reward(value, f"{where}, reward of {who}")
    assert not raw.agents, f"{target}: the episode did not end within {max_turns} turns"


def _play_parallel(env: Any, raw: Any, data: Any, seed: int, target: str, budget: float) -> None:
    max_turns = raw.max_turns
    observations, infos = env.reset(seed=seed)
    for agent in env.agents:
        _check_obs(env, agent, observations[agent], f"{target} reset")
        _check_info(infos[agent], BASE_INFO_KEYS, f"{target} reset")
    rounds = 0
    while env.agents:
        where = f"{target} round {rounds}"
        agents = list(env.agents)
        if _nonstring_now(data):
            bad = data.draw(NON_STRINGS, label="non-string action")
            victim = data.draw(st.sampled_from(agents), label="agent with a non-string")
            bad_actions = {a: (bad if a == victim else "x") for a in agents}
            _expect_type_error(lambda b=bad_actions: env.step(b), [victim], bad)
            assert env.agents == agents, "a rejected step changed the live agents"
        actions = {a: data.draw(adversarial_text(), label=f"{a} action") for a in agents}

        def bound() -> float:
            return STEP_BOUND_S + budget * box["symbolic"]

        most = STEP_BOUND_S + budget * len(agents)
        with timed(target, bound, where, actions, most) as box:
            observations, rewards, terminations, truncations, infos = env.step(actions)
            reasons = [infos[a].get("reason") for a in agents]
            box["symbolic"] = sum(map(_symbolic, reasons))
            box["timed_out"] = any(map(_timed_out, reasons))
        rounds += 1
        assert rounds <= max_turns, f"{where}: more than max_turns={max_turns} rounds"
        for agent in agents:
            _check_reward(rewards[agent], f"{where}, reward of {agent}")
            _check_info(infos[agent], ACTED_INFO_KEYS, f"{where}, {agent}")
            assert isinstance(terminations[agent], bool) and isinstance(truncations[agent], bool)
            _check_obs(env, agent, observations[agent], f"{where}, {agent}")
    assert rounds <= max_turns


# ---------------------------------------------------------------- the whole set

ENV_SCALE_VAR = "MATHTEAMS_FUZZ_ENV_SCALE"
"""``"math/tool-v0=0.2,math/debate-v0=0.5"``: an env's share of the example budget."""


def env_scales(spec: str | None = None) -> dict[str, float]:
    """Per-env example scales from ``spec`` or the `ENV_SCALE_VAR` environment variable.

    Raises:
        ValueError: an entry is not ``env_id=number`` with a number >= 0.
    """
    text = os.environ.get(ENV_SCALE_VAR, "") if spec is None else spec
    scales: dict[str, float] = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        env_id, sep, value = entry.partition("=")
        try:
            scale = float(value)
        except ValueError:
            scale = -1.0
        if not sep or not env_id.strip() or not scale >= 0:
            raise ValueError(
                f"{ENV_SCALE_VAR}: expected 'env_id=scale' entries (scale >= 0), got {entry!r}"
            )
        scales[env_id.strip()] = scale
    return scales


def all_targets(
    math_timeout: float | None = None,
    env_scale: dict[str, float] | None = None,
    pattern: str | None = None,
) -> list[Target]:
    """Every target: each env x task, each verifier (responses, references, thread), the batch
    API, the TRL adapter and the extraction functions.

    Args:
        math_timeout: see `build_verifier` (None: the verifiers' defaults).
        env_scale: per-env share of the example budget (default `env_scales()`).
        pattern: keep only targets whose name matches this regular expression.
    """
    scales = env_scales() if env_scale is None else env_scale
    regex = re.compile(pattern) if pattern else None
    factories: list[tuple[str, Callable[[], Target]]] = []
    for env_id in envs.list_envs():
        for task in TASKS:
            factories.append(
                (
                    f"env[{env_id}:{task}]",
                    lambda e=env_id, t=task: env_target(e, t, scales.get(e, 1.0)),
                )
            )
    for name in list_verifiers():
        factories += [
            (f"verify[{name}]", lambda n=name: verify_target(n, math_timeout)),
            (f"verify_bad_reference[{name}]", lambda n=name: reference_target(n, math_timeout)),
            (f"verify_in_thread[{name}]", lambda n=name: thread_target(n, math_timeout)),
        ]
    factories += [
        ("verify_batch", lambda: batch_target(math_timeout)),
        ("as_reward_func", lambda: reward_func_target(math_timeout)),
        ("extract", extract_target),
    ]
    return [build() for name, build in factories if regex is None or regex.search(name)]


# ---------------------------------------------------------------- running

PROFILES = {"ci": 50, "long": 2000}
"""Hypothesis profiles and their examples per target: ``ci`` (the default test run,
derandomized) and ``long``."""
PROFILE_VAR = "MATHTEAMS_FUZZ_PROFILE"


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

    Returns:
        The target's `Stats`.
    """

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
    # in the middle of a run confuses its record of the examples).
    chunk = max(1, max_examples) if max_seconds is None else 10
    done = 0
    while done < max(1, max_examples) and not stopped:
        count = min(chunk, max(1, max_examples) - done)
        property_test = settings(base, max_examples=count)(given(st.data())(once))
        if seed is not None:
            property_test = hypothesis_seed(seed + done)(property_test)
        with contextlib.suppress(_StopTarget):  # the failures are in COLLECTOR
            property_test()
        done += count
        if max_seconds is not None and time.perf_counter() - started > max_seconds:
            break
    return COLLECTOR.stats.setdefault(target.name, Stats())
