"""Verifier behaviour: table-driven cases for every built-in verifier."""

from __future__ import annotations

import pytest

from envs.testing.fuzz import loopback_math_verifier
from rewards import (
    CompositeVerifier,
    FormatVerifier,
    LabelVerifier,
    MathVerifier,
    NumericVerifier,
    PartialNumericVerifier,
    SimilarityVerifier,
    UniqueCharsVerifier,
    Verdict,
    Verifier,
    get_verifier,
    list_verifiers,
)

MATH_CASES = [
    ("#### 18", "18", 1.0),  # GSM8K marker
    ("so \\boxed{\\frac{1}{2}}", "0.5", 1.0),  # fraction against decimal (fast path)
    ("\\boxed{0.3333}", "\\frac{1}{3}", 0.0),  # too few decimals
    ("\\boxed{0.333333}", "1/3", 1.0),  # math-verify's 6-decimal rounding
    ("\\boxed{\\$2,125}", "2125", 1.0),  # currency and commas
    ("The answer is 20%.", "20", 1.0),  # percent between integers
    ("\\boxed{2^{10}}", "1024", 1.0),  # expression against a number (symbolic)
    ("\\boxed{(x+1)^2}", "x^2+2x+1", 1.0),  # algebraic equivalence
    ("\\boxed{x^2+1}", "x^2+2x+1", 0.0),  # not equivalent
    ("\\boxed{[0, \\infty)}", "[0,\\infty)", 1.0),  # interval
    ("\\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{\\sqrt3}{2}", 1.0),  # radicals
    ("\\boxed{x = 5}", "5", 1.0),  # equation against a value
    ("\\boxed{\\begin{pmatrix}1\\\\2\\end{pmatrix}}", "\\begin{pmatrix}1\\\\2\\end{pmatrix}", 1.0),
    ("\\boxed{\\pi}", "\\pi", 1.0),  # constants
    ("\\boxed{17}", "18", 0.0),  # wrong number
    ("no answer here", "18", 0.0),  # nothing to extract
    ("She solves it: ... #### 18", "Long solution text.\n#### 18", 1.0),  # GSM8K reference text
]


@pytest.mark.parametrize(
    ("response", "reference", "score"), MATH_CASES, ids=[c[0][:30] for c in MATH_CASES]
)
def test_math_verifier(response: str, reference: str, score: float) -> None:
    assert MathVerifier().verify(response, reference).score == score


def test_math_fast_path_never_calls_math_verify(monkeypatch: pytest.MonkeyPatch) -> None:
    import rewards.verifiers as module

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("numeric answers must not reach math-verify")

    monkeypatch.setattr(module, "symbolic_equal", forbidden)
    verifier = MathVerifier()
    assert verifier.verify("#### 1,234", "1234").score == 1.0
    assert verifier.verify("\\boxed{\\frac{3}{4}}", "0.75").score == 1.0
    assert verifier.verify("\\boxed{12}", "13").score == 0.0


def test_math_reasons() -> None:
    verifier = MathVerifier()
    assert verifier.verify("#### 17", "18").reason == "wrong answer: 17 != 18"
    assert "no answer" in verifier.verify("nothing", "18").reason
    assert verifier.verify("#### 18", "18").extracted == "18"


NUMERIC_CASES = [
    ({}, "#### 18", "18", 1.0),  # exact
    ({}, "#### 18.0", "18", 1.0),  # integer-valued decimal
    ({}, "The answer is x = 18", "18", 1.0),  # value after '='
    ({}, "#### 18.5", "18", 0.0),  # off
    ({"rel_tol": 0.05}, "#### 18.5", "18", 1.0),  # within 5%
    ({"rel_tol": 0.01}, "#### 18.5", "18", 0.0),  # outside 1%
    ({}, "\\boxed{50.0\\%}", "50", 1.0),  # percent with a decimal: either reading
    ({}, "\\boxed{x+1}", "18", 0.0),  # not a number
]


@pytest.mark.parametrize(("options", "response", "reference", "score"), NUMERIC_CASES)
def test_numeric_verifier(options: dict, response: str, reference: str, score: float) -> None:
    assert NumericVerifier(**options).verify(response, reference).score == score


LABEL_CASES = [
    ("Answer: entailment", "e", 1.0),  # full label, letter reference
    ("Answer: entailment", "entailment", 1.0),  # full reference
    ("\\boxed{E}", "e", 1.0),  # letter in a box
    ("<answer>contradiction</answer>", "c", 1.0),  # answer tags
    ("The premise contradicts it.\nSo: contradicts", "c", 1.0),  # verb form on the last line
    ("Therefore the relation is **Neutral**.", "n", 1.0),  # last line, markdown
    ("Answer: neutral", "e", 0.0),  # wrong label
    ("I think it is a tough one", "e", 0.0),  # no label ("a" is not a label here)
]


@pytest.mark.parametrize(("response", "reference", "score"), LABEL_CASES)
def test_label_verifier(response: str, reference: str, score: float) -> None:
    assert LabelVerifier().verify(response, reference).score == score


def test_label_verifier_custom_labels() -> None:
    verifier = LabelVerifier(labels=["a", "b", "c", "d"])
    assert verifier.verify("The answer is (B).", "b").score == 1.0
    assert verifier.verify("a thing, b thing\nAnswer: d", "d").score == 1.0
    yes_no = LabelVerifier(labels=["yes", "no"], aliases={"true": "yes", "false": "no"})
    assert yes_no.verify("Answer: true", "yes").score == 1.0
    with pytest.raises(ValueError, match="not one of"):
        yes_no.verify("yes", "maybe")
    with pytest.raises(ValueError, match="unknown labels"):
        LabelVerifier(labels=["yes"], aliases={"y": "nope"})


def test_similarity() -> None:
    verifier = SimilarityVerifier()
    assert verifier.verify("abcd", "abcd").score == 1.0
    half = verifier.verify("ab", "abcd")
    assert half.score == pytest.approx(2 * 2 / 6)  # difflib: 2 * matches / total length
    assert "x100" in half.reason  # the original script's scale is documented in the reason
    assert SimilarityVerifier(use_answer=True).verify("blah \\boxed{42}", "42").score == 1.0


def test_unique_chars() -> None:
    assert UniqueCharsVerifier(cap=10).verify("aabbc", "").score == pytest.approx(0.3)
    assert UniqueCharsVerifier(cap=2).verify("abc", "").score == 1.0  # clipped at the cap
    with pytest.raises(ValueError):
        UniqueCharsVerifier(cap=0)


PARTIAL_CASES = [
    ("#### 100", "100", 1.0),  # exact
    ("#### 90", "100", 0.9),  # 10% off
    ("#### 110", "100", 0.9),  # symmetric
    ("#### 250", "100", 0.0),  # floored at 0
    ("#### 0", "0", 1.0),  # zero reference, zero answer
    ("#### 1", "0", 0.0),  # zero reference, non-zero answer
    ("#### -50", "-100", 0.5),  # negative reference
]


@pytest.mark.parametrize(("response", "reference", "score"), PARTIAL_CASES)
def test_partial_numeric(response: str, reference: str, score: float) -> None:
    assert PartialNumericVerifier().verify(response, reference).score == pytest.approx(score)


FORMAT_CASES = [
    ({}, "so \\boxed{4}", 1.0),  # any: a box
    ({}, "<answer>4</answer>", 1.0),  # any: tags
    ({}, "4", 0.0),  # any: neither
    ({}, "\\boxed{}", 0.0),  # an empty box does not count
    ({}, "\\boxed{4", 0.0),  # an unclosed box does not count
    ({"style": "answer_tag"}, "\\boxed{4}", 0.0),  # tags required
    ({"style": "boxed"}, "<answer>4</answer>", 0.0),  # box required
    ({"style": "think_answer"}, "<think>hm</think>\n<answer>4</answer>", 1.0),  # think then answer
    ({"style": "think_answer"}, "<answer>4</answer>", 0.0),  # no think block
    ({"style": "think_answer"}, "<think>a</think><think>b</think><answer>4</answer>", 0.0),
    ({"pattern": r"^Result: \d+$"}, "Result: 12", 1.0),  # custom regex
]


@pytest.mark.parametrize(("options", "response", "score"), FORMAT_CASES)
def test_format(options: dict, response: str, score: float) -> None:
    assert FormatVerifier(**options).verify(response, "").score == score


def test_composite() -> None:
    composite = CompositeVerifier({"gsm8k": 3.0, FormatVerifier(style="boxed"): 1.0})
    assert composite.verify("\\boxed{18}", "18").score == 1.0
    partial = composite.verify("#### 18", "18")
    assert partial.score == 0.75
    assert "gsm8k=1.00 x3" in partial.reason and "format=0.00 x1" in partial.reason
    assert partial.extracted == "18"
    with pytest.raises(ValueError):
        CompositeVerifier({})
    with pytest.raises(ValueError):
        CompositeVerifier({"gsm8k": -1.0})
    with pytest.raises(ValueError):
        CompositeVerifier({"gsm8k": 0.0})


@pytest.mark.parametrize("name", list_verifiers())
def test_every_verifier_follows_the_protocol(name: str) -> None:
    options = {"components": {"gsm8k": 1.0}} if name == "composite" else {}
    verifier = loopback_math_verifier() if name == "remote" else get_verifier(name, **options)
    assert isinstance(verifier, Verifier)
    assert verifier.__doc__ and ">>>" in verifier.__doc__  # a doctest with a pass and a fail
    reference = {
        "label": "entailment",
        "reach": "3 * 4 = 12, 12 + 8 = 20",
        "coloring": "0 A 1 B 2 C | 0 1, 1 2 | 0 A, 1 B",
    }.get(name, "18")
    verdict = verifier.verify("The answer is \\boxed{18}.", reference)
    assert isinstance(verdict, Verdict)
    assert 0.0 <= verdict.score <= 1.0


BAD_REFERENCES = [None, 18, "", "   ", b"18"]
REFERENCE_CHECKED = ["math", "gsm8k", "exact", "label", "similarity", "partial_numeric"]


@pytest.mark.parametrize("name", REFERENCE_CHECKED)
@pytest.mark.parametrize("reference", BAD_REFERENCES, ids=repr)
def test_bad_reference_raises_value_error(name: str, reference: object) -> None:
    with pytest.raises(ValueError, match="reference"):
        get_verifier(name).verify("#### 18", reference)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["gsm8k", "partial_numeric"])
def test_non_numeric_reference_raises_for_numeric_verifiers(name: str) -> None:
    with pytest.raises(ValueError, match="not a number"):
        get_verifier(name).verify("#### 18", "x + 1")


def test_missing_math_verify_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from rewards import symbolic

    monkeypatch.setattr(symbolic, "is_math_verify_available", lambda: False)
    with pytest.raises(ImportError, match="pip install"):
        MathVerifier()


def test_bad_options_raise() -> None:
    with pytest.raises(ValueError):
        MathVerifier(timeout=0)
    with pytest.raises(ValueError):
        NumericVerifier(rel_tol=-0.1)
    with pytest.raises(ValueError):
        FormatVerifier(style="xml")
    with pytest.raises(ValueError):
        LabelVerifier(labels=[])
