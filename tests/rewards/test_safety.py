"""Model output never makes a verifier raise or hang; threads, processes and timeouts."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import pytest

from envs.testing.fuzz import loopback_math_verifier
from envs.testing.fuzz.generators import references_for
from rewards import MathVerifier, Verdict, get_verifier, list_verifiers, symbolic

# sympy would try to build a number with 2^(2^100) digits; the sine keeps it outside the grammar
# of rewards.structure, which answers the bare tower (against "5") without math-verify.
TOWER = "\\boxed{2^{2^{2^{2^{100}}}} \\sin(1)}"

ADVERSARIAL = {
    "empty": "",
    "spaces": "   \n\t ",
    "one_mb_digits": "9" * 1_000_000,
    "one_mb_text": "lorem ipsum " * 90_000,
    "many_boxes": "\\boxed{" * 200_000,
    "many_open_braces": "{" * 1_000_000,
    "many_tags": "<answer>" * 100_000,
    "many_markers": "#### " * 100_000,
    "many_phrases": "the answer is " * 50_000,
    "comma_flood": "1," * 300_000,
    "deep_frac_boxed": "\\boxed{" + "\\frac{" * 5000 + "1" + "}{2}" * 5000 + "}",
    "deep_frac_short": "\\boxed{" + "\\frac{" * 40 + "1" + "}{2}" * 40 + "}",
    "deep_frac_ok": "\\boxed{" + "\\frac{" * 12 + "1" + "}{2}" * 12 + "}",
    "unclosed_box": "The answer is \\boxed{",
    "unclosed_box_expr": "\\boxed{\\frac{1}{2",
    "extra_closers": "\\boxed{}}}}}}",
    "empty_markers": "<answer></answer> #### \\boxed{}",
    "control_chars": "".join(chr(i) for i in range(32)) + "\\boxed{1\x00}",
    "lone_surrogate": "\ud800",
    "surrogates_in_box": "\\boxed{\udfff\ud800}",
    "emoji_rtl": "🙂 الجواب هو \\boxed{٣}",
    "nul_bytes": "\x00" * 10_000,
    "tower": TOWER,
    "huge_factorial": "\\boxed{(10^{10})!}",
    "huge_power": "\\boxed{9^{9^{9^{9}}}}",
    "big_poly": "\\boxed{(1+x)^{100000}}",
    "bad_latex": "\\boxed{\\frac{}{}\\sqrt[}{}^^__}",
    "dollar_soup": "$$$$ $ \\$ \\\\$ $",
}
SHAPES = {"unique_chars", "format", "boxed_format", "similarity", "composite"}
NOT_STRINGS = [None, 18, 1.5, b"\\boxed{18}", ["#### 18"], {"content": "#### 18"}]


def _reference(name: str) -> str:
    return references_for(name)[0]  # "e", "18" or a reach chain


def _verifier(name: str, **math_options: object):
    if name == "composite":
        return get_verifier(name, components={MathVerifier(timeout=1): 1.0, "format": 1.0})
    if name in ("math", "math_verify"):
        return get_verifier(name, timeout=1, **math_options)
    if name == "remote":
        return loopback_math_verifier(timeout=1, **math_options)
    return get_verifier(name)


@pytest.mark.parametrize("name", list_verifiers())
@pytest.mark.parametrize("key", list(ADVERSARIAL))
def test_adversarial_inputs_never_raise_and_stay_bounded(name: str, key: str) -> None:
    verifier = _verifier(name)
    started = time.monotonic()
    verdict = verifier.verify(ADVERSARIAL[key], _reference(name))
    elapsed = time.monotonic() - started
    assert isinstance(verdict, Verdict)
    assert 0.0 <= verdict.score <= 1.0
    assert verdict.score < 1.0 or name in SHAPES  # none of these inputs answers 18
    assert elapsed < 10.0, f"{name} took {elapsed:.1f} s on {key}"
    (verdict.reason + (verdict.extracted or "")).encode("utf-8")  # printable, loggable


@pytest.mark.parametrize("name", list_verifiers())
@pytest.mark.parametrize("response", NOT_STRINGS, ids=repr)
def test_non_string_response_scores_zero(name: str, response: object) -> None:
    verdict = _verifier(name).verify(response, _reference(name))  # type: ignore[arg-type]
    assert verdict.score == 0.0
    assert "str" in verdict.reason


def test_timeout_in_main_thread_without_a_helper() -> None:
    assert threading.current_thread() is threading.main_thread()
    started, cpu = time.monotonic(), time.process_time()
    verdict = MathVerifier(timeout=1, isolate=False).verify(TOWER, "5")
    assert verdict.score == 0.0
    assert verdict.reason.startswith("timeout")
    # parse and verify each stop at the 1 s alarm: about 1.8 CPU-seconds, which a loaded host
    # stretches past 4 s of wall time; unbounded, the tower runs for minutes
    assert time.process_time() - cpu < 5
    assert time.monotonic() - started < 60


def test_timeout_in_a_thread_uses_a_helper_process() -> None:
    box: dict[str, object] = {}

    def run() -> None:
        started = time.monotonic()
        box["verdict"] = MathVerifier(timeout=1).verify(TOWER, "5")
        box["elapsed"] = time.monotonic() - started

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive()
    verdict = box["verdict"]
    assert isinstance(verdict, Verdict)
    assert (verdict.score, verdict.reason[:7]) == (0.0, "timeout")
    assert box["elapsed"] < 30  # helper start-up (imports sympy) plus about 3 x timeout


def test_isolate_runs_in_a_helper_from_the_main_thread() -> None:
    verifier = MathVerifier(timeout=2, isolate=True)
    assert verifier.verify("\\boxed{(x+1)^2}", "x^2+2x+1").score == 1.0
    assert verifier.verify(TOWER, "5").reason.startswith("timeout")


def test_the_default_deadline_survives_a_gc_callback_that_swallows_the_alarm() -> None:
    """An exception raised inside a gc callback is swallowed; the alarm must not be all there is.

    hypothesis installs such a callback; with math-verify's alarm in this process, ``(1+x)^100000``
    once ran for 13 minutes in CI. The default runs it in a helper killed at a hard deadline.
    """
    import gc

    def busy_callback(phase: str, info: dict) -> None:
        if phase == "start":
            time.sleep(0.02)  # the alarm lands in here; with isolate=False this hangs for minutes

    gc.callbacks.append(busy_callback)
    try:
        started = time.monotonic()
        verdict = MathVerifier(timeout=1).verify("\\boxed{(1+x)^{100000} \\sin(x)}", "18")
        elapsed = time.monotonic() - started
    finally:
        gc.callbacks.remove(busy_callback)
    assert (verdict.score, verdict.reason[:7]) == (0.0, "timeout")
    assert elapsed < 10.0


@pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="needs POSIX signals")
def test_a_stuck_helper_is_killed_at_the_hard_deadline() -> None:
    """A helper that stops answering (as in C code no signal interrupts) is killed."""
    verifier = MathVerifier(timeout=1, isolate=True)
    assert verifier.verify("\\boxed{x+1}", "1+x").score == 1.0  # a helper is now idle
    with symbolic._POOL._lock:
        helper = symbolic._POOL._idle[-1]
    os.kill(helper.proc.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        verdict = verifier.verify("\\boxed{x+2}", "2+x")
        assert verdict.reason.startswith("timeout"), verdict
        assert time.monotonic() - started < 15
        assert helper.proc.poll() is not None  # killed, not left behind
    finally:
        if helper.proc.poll() is None:
            os.kill(helper.proc.pid, signal.SIGKILL)
    assert verifier.verify("\\boxed{x+2}", "2+x").score == 1.0  # a fresh helper takes over


MIXED = [
    ("#### 18", "18"),
    ("#### 17", "18"),
    ("\\boxed{(x+1)^2}", "x^2+2x+1"),
    ("\\boxed{x^2+1}", "x^2+2x+1"),
    ("\\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{\\sqrt3}{2}"),
    ("\\boxed{2^{10}}", "1024"),
    ("\\boxed{5} or \\boxed{6}", "5"),
    ("\\boxed{[0, \\infty)}", "[0,\\infty)"),
]


def _serial() -> list[tuple[float, str | None]]:
    verifier = MathVerifier()
    return [(v.score, v.extracted) for v in (verifier.verify(r, ref) for r, ref in MIXED)]


def _score_all(_: int) -> list[tuple[float, str | None]]:
    return _serial()


def test_thread_safety() -> None:
    expected = _serial()
    assert [score for score, _ in expected] == [1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(_score_all, range(12)))
    assert all(result == expected for result in results)


def test_process_safety() -> None:
    expected = _serial()
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    with ProcessPoolExecutor(max_workers=2, mp_context=context) as pool:
        results = list(pool.map(_score_all, range(4)))
    assert all(result == expected for result in results)


def _threaded_symbolic_check(queue: multiprocessing.Queue) -> None:
    with ThreadPoolExecutor(max_workers=2) as pool:
        verdict = pool.submit(MathVerifier().verify, "\\boxed{(x+1)^2}", "x^2+2x+1").result()
    queue.put(verdict.score)


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_forked_child_does_not_reuse_parent_helpers() -> None:
    # Give the parent an idle helper, then fork: the child must start its own.
    with ThreadPoolExecutor(max_workers=1) as pool:
        assert pool.submit(MathVerifier().verify, "\\boxed{x+1}", "1+x").result().score == 1.0
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_threaded_symbolic_check, args=(queue,))
    child.start()
    assert queue.get(timeout=120) == 1.0
    child.join(timeout=30)
    assert child.exitcode == 0
    assert (
        MathVerifier(isolate=True).verify("\\boxed{x+1}", "1+x").score == 1.0
    )  # parent's helper OK
