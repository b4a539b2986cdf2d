"""No model answer stalls a step (issue 52): answers sympy cannot finish with are refused before
math-verify sees them (`rewards.costly`), and everything else runs within the symbolic budget
(`rewards.symbolic`, the `math` verifier's ``budget_s``).

No test here reads a clock against a bound: structural refusals are checked by the reason and by
`symbolic_equal` never being called; the budget by the reason of an answer that cannot finish and
by the budgets the verifier hands to `symbolic_equal` (with a fake clock). The timings are
``scripts/fuzz.py --only '^symbolic\\['``'s."""

from __future__ import annotations

import math
import sys
import threading

import pytest

from rewards import MathVerifier, Verdict, get_verifier, symbolic_budget
from rewards import symbolic as symbolic_module
from rewards import verifiers as verifiers_module
from rewards.costly import REFUSED, costly_reason, variable_exponent_depth
from rewards.structure import structural_verdict
from rewards.symbolic import DEFAULT_BUDGET_S, REFERENCE_BUDGET_S, check_budget

# Beyond what the structural checks read (the sine), and beyond any budget for sympy.
UNFINISHABLE = "\\boxed{2^{2^{2^{2^{100}}}} \\sin(1)}"
MATRIX = "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}"

# (class, answer): each once ran math-verify to its deadline on one call.
COSTLY = [
    ("binomial", "\\binom{10^{9}}{5\\cdot 10^8}"),
    ("binomial", "\\binom{123456789}{98765432}"),
    ("binomial", "\\dbinom{1000000}{500000}"),
    ("binomial", "\\binom{(10^{10})!}{3}"),
    ("binomial", "{10^{9} \\choose 5\\cdot 10^8}"),
    ("binomial", "\\dbinom{1000!}{10^{15}}"),
    ("integral", "\\int x^{x^{x^{x}}} dx"),
    ("integral", "\\int_0^1 e^{x^{x^{x}}}dx"),
    ("integral", "\\iint x^{x^{x}} \\,dx\\,dy"),
    ("sum", "\\sum_{k=1}^{10^{12}} k^2"),
    ("sum", "\\sum_{n=1}^{1000000000000} \\frac{1}{n}"),
    ("sum", "\\sum\\limits_{n=1}^{10^{5}} \\frac{1}{n}"),
    ("product", "\\prod_{k=1}^{10^{12}} k"),
    ("product", "\\prod_{k=1}^{10^{9}} (1+\\frac{1}{k^2})"),
    ("limit", "\\lim_{x\\to 0} x^{x^{x^{x}}}"),
    ("limit", "\\lim_{n\\to\\infty} (1+\\frac{1}{n})^{n^{n}}"),
    ("derivative", "\\frac{d}{dx} x^{x^{x^{x^{x}}}}"),
    ("derivative", "\\frac{d^{100}}{dx^{100}} x^{x^{x}}"),
    ("gamma", "\\Gamma(10^{12})"),
    ("gamma", "\\Gamma(\\Gamma(100))"),
    ("gamma", "\\ln\\Gamma\\left(10^{9}\\right)"),
    ("function", "\\zeta((10^{10})!)"),
    ("function", "\\sin\\left(10^{10^{7}}\\right)"),
    ("matrix", "\\det\\begin{pmatrix} 10^{100}! & 1 \\\\ 1 & 1\\end{pmatrix}"),
    ("matrix", "\\begin{pmatrix} 2^{2^{2^{20}}} \\end{pmatrix}"),
    ("tuple", "(1, 10^{10^{7}})"),
]
E_TOWERS = [
    "e^{e^{e^{e^{e}}}}",
    "\\exp(\\exp(\\exp(\\exp(\\exp(1)))))",
    "\\sqrt{e^{e^{e^{e^{e}}}}}",
]
# Answers of the same kinds that math-verify checks at once: none is refused. (answer, reference,
# score under math-verify)
LEGITIMATE = [
    ("\\binom{10}{3}", "120", 1.0),
    ("\\binom{10^{9}}{2}", "499999999500000000", 1.0),
    ("\\frac{1}{2}", "0.5", 1.0),
    ("\\sqrt{2}", "2^{1/2}", 1.0),
    ("e^{2}", "e^2", 1.0),
    ("e^{e^{e}}", "18", 0.0),
    ("\\sum_{k=1}^{10} k", "55", 1.0),
    ("\\sum_{k=1}^{2023} k", "2047276", 1.0),
    ("\\prod_{k=1}^{5} k", "120", 1.0),
    ("\\int_0^1 x\\,dx", "\\frac{1}{2}", 1.0),
    ("\\int_0^1 x^2 dx", "\\frac{1}{3}", 1.0),
    ("\\lim_{x\\to 0} \\frac{\\sin x}{x}", "1", 1.0),
    ("\\frac{d}{dx} x^2", "2x", 1.0),
    ("\\Gamma(5)", "24", 1.0),
    ("\\zeta(10^{12}+1)", "18", 0.0),
    ("\\binom{1000!}{2}", "18", 0.0),
    ("\\det\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}", "-2", 1.0),
    ("1e999999", "18", 0.0),
]


@pytest.fixture
def no_symbolic(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """`symbolic_equal` replaced by one that records its calls and raises."""
    calls: list[tuple[str, str]] = []

    def refuse(reference: str, answer: str, *args: object, **kwargs: object) -> None:
        calls.append((reference, answer))
        raise AssertionError(f"math-verify was asked: {reference!r:.40} vs {answer!r:.40}")

    monkeypatch.setattr(verifiers_module, "symbolic_equal", refuse)
    return calls


# ------------------------------------------------------------------------- refused structurally


@pytest.mark.parametrize("reference", ["18", "\\frac{\\sqrt{3}}{2}", MATRIX, "x^2+2x+1", "(1, 2)"])
@pytest.mark.parametrize(
    ("kind", "answer"), COSTLY, ids=[f"{k}-{i}" for i, (k, _) in enumerate(COSTLY)]
)
def test_costly_answers_are_refused_before_math_verify(
    kind: str, answer: str, reference: str, no_symbolic
) -> None:
    verdict = MathVerifier().verify(f"The answer is $\\boxed{{{answer}}}$.", reference)
    assert verdict.score == 0.0
    assert verdict.reason.startswith(REFUSED + ": "), verdict
    assert no_symbolic == []


@pytest.mark.parametrize("answer", E_TOWERS)
@pytest.mark.parametrize("reference", ["18", "\\frac{1}{2}", "x", "(1, 2)", MATRIX])
def test_towers_of_e_score_zero_before_math_verify(
    answer: str, reference: str, no_symbolic
) -> None:
    verdict = MathVerifier().verify(f"\\boxed{{{answer}}}", reference)
    assert verdict.score == 0.0
    # against a number: provably wrong on magnitude; against a matrix: refused
    assert verdict.reason.startswith(("wrong: ", REFUSED)), verdict
    assert no_symbolic == []


def test_the_reasons_name_the_costly_part() -> None:
    reasons = {answer: costly_reason(answer) for _, answer in COSTLY}
    assert "a binomial coefficient" in reasons["\\binom{10^{9}}{5\\cdot 10^8}"]
    assert "an integral of a tower of powers" in reasons["\\int x^{x^{x^{x}}} dx"]
    assert "a sum with a bound of 10^{12}" in reasons["\\sum_{k=1}^{10^{12}} k^2"]
    assert "a product with a bound" in reasons["\\prod_{k=1}^{10^{12}} k"]
    assert "a limit of a tower" in reasons["\\lim_{x\\to 0} x^{x^{x^{x}}}"]
    assert "a derivative of a tower" in reasons["\\frac{d}{dx} x^{x^{x^{x^{x}}}}"]
    assert "\\Gamma of 10^{12}" in reasons["\\Gamma(10^{12})"]
    assert "\\zeta of a number of" in reasons["\\zeta((10^{10})!)"]
    assert "an entry of" in reasons["\\begin{pmatrix} 2^{2^{2^{20}}} \\end{pmatrix}"]


@pytest.mark.parametrize(("answer", "reference", "score"), LEGITIMATE)
def test_answers_of_the_same_kinds_that_math_verify_checks_at_once_are_not_refused(
    answer: str, reference: str, score: float
) -> None:
    assert costly_reason(answer) is None
    assert structural_verdict(answer, reference).verdict is None
    # A budget no machine load can exhaust: the scores are math-verify's, as before.
    assert MathVerifier(budget_s=60).verify(f"\\boxed{{{answer}}}", reference).score == score


@pytest.mark.parametrize(("kind", "answer"), COSTLY[:9:4])
def test_an_answer_in_the_references_own_costly_notation_is_still_compared(
    kind: str, answer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[tuple[str, str]] = []

    def fake(reference: str, answer: str, *args: object, **kwargs: object) -> tuple[bool, str]:
        asked.append((reference, answer))
        return True, "equivalent (math-verify)"

    monkeypatch.setattr(verifiers_module, "symbolic_equal", fake)
    assert structural_verdict(answer, answer).verdict is True  # the same text
    spaced = answer.replace("{", "{ ")
    verdict = MathVerifier().verify(f"\\boxed{{{spaced}}}", answer)
    assert verdict.score == 1.0, verdict
    assert not verdict.reason.startswith(REFUSED)


def test_variable_exponent_depth_counts_towers_not_powers() -> None:
    assert variable_exponent_depth("x^2 + 2^{2^{10}}") == 0
    assert variable_exponent_depth("\\int e^{x^2} dx") == 1
    assert variable_exponent_depth("\\int x^{x} dx") == 1
    assert variable_exponent_depth("\\int_0^{1} x^{x^{x}} dx") == 2
    assert variable_exponent_depth("e^{x^{x^{x}}}") == 3
    assert variable_exponent_depth("{" * 500 + "x^{x}" + "}" * 500) <= 1  # depth-limited


@pytest.mark.parametrize(
    "text",
    [
        "\\binom{" * 300,
        "\\choose " * 280,
        "\\sum_" * 400,
        "\\Gamma(" * 300,
        "x^{" * 600 + "x" + "}" * 600,
        "\\begin{pmatrix}" * 120,
        "\\int " + "{" * 900,
        "1," * 990,
    ],
)
def test_costly_reason_reads_any_text_without_raising(text: str) -> None:
    result = costly_reason(text)
    assert result is None or result.startswith(REFUSED)


# ------------------------------------------------------------------------- the budget


@pytest.mark.parametrize(
    ("value", "error"),
    [(0, ValueError), (-1.0, ValueError), (math.nan, ValueError), (math.inf, ValueError),
     (601, ValueError), ("1", TypeError), (True, TypeError), (None, TypeError)],
)  # fmt: skip
def test_a_bad_budget_raises_a_clear_error(value: object, error: type) -> None:
    with pytest.raises(error, match="math verifier: budget_s must be a number of seconds"):
        MathVerifier(budget_s=value)  # type: ignore[arg-type]
    with pytest.raises(error, match="budget_s"):
        get_verifier("math", budget_s=value)
    with pytest.raises(error, match="budget_s"):
        check_budget(value)


def test_the_budget_option_and_its_older_name() -> None:
    assert MathVerifier().budget_s == DEFAULT_BUDGET_S == 1.0
    assert MathVerifier(budget_s=0.25).budget_s == 0.25
    assert MathVerifier(timeout=3).budget_s == 3.0
    assert MathVerifier(timeout=3).timeout == 3.0
    with pytest.raises(ValueError, match="math verifier: timeout must be"):
        MathVerifier(timeout=0)
    with pytest.raises(ValueError, match="not both"):
        MathVerifier(budget_s=2, timeout=3)


@pytest.mark.parametrize("isolate", [True, False])
def test_an_answer_that_outlasts_the_budget_scores_zero_with_the_reason(isolate: bool) -> None:
    verdict = MathVerifier(budget_s=0.3, isolate=isolate).verify(UNFINISHABLE, "5")
    assert verdict.score == 0.0
    assert verdict.reason.startswith("timeout: "), verdict
    assert "symbolic budget (0.3 s)" in verdict.reason


def test_the_budget_holds_from_a_thread() -> None:
    box: dict[str, Verdict] = {}
    thread = threading.Thread(
        target=lambda: box.setdefault("v", MathVerifier(budget_s=0.3).verify(UNFINISHABLE, "5"))
    )
    thread.start()
    thread.join(timeout=300)  # a hang guard, not a time bound: the answer never finishes
    assert (box["v"].score, box["v"].reason[:9]) == (0.0, "timeout: ")


def test_compare_in_process_stops_at_its_budget() -> None:
    same, reason = symbolic_budget.compare_in_process("5", UNFINISHABLE[7:-1], budget_s=0.2)
    assert same is None
    assert reason.startswith("timeout: math-verify ran past the symbolic budget (0.2 s)")
    # the timer is off again and the previous handler back: the next check is unaffected
    assert symbolic_budget.compare_in_process("1+x", "x+1", budget_s=30)[0] is True


def test_a_check_in_this_process_warms_math_verify_up_once_outside_its_budgets(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first check run here (``isolate=False``) would pay math-verify's first-use costs from
    its budgets (seconds on a loaded machine); it warms up first, once, as a helper does."""
    calls: list[str] = []
    compare = symbolic_module.compare_in_process

    def recording(*args: object, **kwargs: object) -> tuple[bool | None, str]:
        calls.append("compare")
        return compare(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(symbolic_module, "warm_up", lambda: calls.append("warm up"))
    monkeypatch.setattr(symbolic_module, "compare_in_process", recording)
    symbolic_module._warmed_up.cache_clear()
    try:
        for _ in range(2):
            assert symbolic_module.symbolic_equal("x+1", "1+x", isolate=False)[0] is True
    finally:
        symbolic_module._warmed_up.cache_clear()  # the next check warms up for real
    assert calls == ["warm up", "compare", "compare"]


class _SpinsInItsFinalizer:
    def __del__(self) -> None:
        while True:  # until the budget's signal lands here, where it cannot stop the work
            pass


def test_a_timeout_inside_a_finalizer_is_not_reported_and_the_next_one_stops_the_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A signal that lands in a ``__del__`` is an "exception ignored" (it once failed CI through
    pytest's unraisable-exception hook); the refired one stops the work, and nothing is
    reported. Another finalizer's exception still reaches the hook."""
    from math_verify.errors import TimeoutException

    reported: list[BaseException | None] = []

    def hook(args: sys.UnraisableHookArgs) -> None:
        reported.append(args.exc_value)

    monkeypatch.setattr(sys, "unraisablehook", hook)

    def work() -> None:
        _SpinsInItsFinalizer()  # dropped at once: its finalizer runs here
        while True:
            pass

    with pytest.raises(TimeoutException):
        symbolic_budget._within(0.05, work)
    assert reported == []

    class _Fails:
        def __del__(self) -> None:
            raise ValueError("a finalizer's own error")

    assert symbolic_budget._within(5.0, lambda: _Fails() and None) is None
    assert [type(exc) for exc in reported] == [ValueError]
    assert sys.unraisablehook is hook  # put back


class _Clock:
    """A fake clock for the `math` verifier's budget; the fake `symbolic_equal`s move it."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_one_response_shares_one_budget_between_its_checks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two final-answer markers in two notations: their comparison, then the answer's own check,
    draw on one budget (the markers are both model output: parsed within it)."""
    clock = _Clock()
    budgets: list[tuple[float, float | None]] = []

    def fake(first: str, second: str, budget_s: float, *args: object) -> tuple[bool, str]:
        budgets.append((round(budget_s, 6), args[-1]))  # (budget, reference_s)
        clock.now += 0.4
        return True, "equivalent (math-verify)"

    monkeypatch.setattr(verifiers_module, "symbolic_equal", fake)
    monkeypatch.setattr(verifiers_module, "_clock", clock)
    verdict = MathVerifier(budget_s=1.0).verify(
        "\\boxed{\\sin(1)} so \\boxed{\\sin{1}}", "\\cos(1)"
    )
    assert budgets == [(1.0, None), (0.6, REFERENCE_BUDGET_S)]
    assert verdict.score == 1.0


def test_a_spent_budget_stops_the_next_check(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    calls: list[float] = []

    def fake(first: str, second: str, budget_s: float, *args: object) -> tuple[bool, str]:
        calls.append(budget_s)
        clock.now += 5.0  # this check used up more than the whole budget
        return True, "equivalent (math-verify)"

    monkeypatch.setattr(verifiers_module, "symbolic_equal", fake)
    monkeypatch.setattr(verifiers_module, "_clock", clock)
    verdict = MathVerifier(budget_s=1.0).verify(
        "\\boxed{\\sin(1)} or \\boxed{\\sin{1}}", "\\sin(1)"
    )
    assert calls == [1.0]  # the markers' comparison; the answer's own check never ran
    assert verdict.score == 0.0
    assert "timeout: the symbolic budget (1 s) was spent on earlier checks" in verdict.reason


def test_the_reference_is_parsed_on_its_own_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[float, float | None]] = []

    def fake(first: str, second: str, budget_s: float, *args: object) -> tuple[bool, str]:
        seen.append((budget_s, args[-1]))
        return False, "not equivalent (math-verify)"

    monkeypatch.setattr(verifiers_module, "symbolic_equal", fake)
    MathVerifier(budget_s=0.5).verify("\\boxed{\\sin(2)}", "\\sin(1)")
    assert seen == [(0.5, REFERENCE_BUDGET_S)]
