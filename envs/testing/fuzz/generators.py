"""What the fuzz feeds the code under test: adversarial model output, non-string actions, valid
references per verifier, odd-answer problems, and the inputs that were once slow.

Every strategy here is a Hypothesis ``SearchStrategy``; the targets
(`envs.testing.fuzz.targets`) draw from them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

import envs

ODD_TASK = "fuzz_odd_answers"
"""A task whose references are LaTeX, fractions, intervals and matrices (`register_odd_task`)."""
TASKS = ("arithmetic", "reach", *(family.name for family in envs.families()), ODD_TASK)
# fmt: off
ODD_ANSWERS = (
    "\\frac{1}{2}", "-\\frac{3}{4}", "\\sqrt{2}", "(1, 2)", "[0, \\infty)", "x^2+2x+1",
    "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "10\\%", "\\$2,125", "\\pi", "0.333333",
    "\\text{(B)}", "\\{1, 2\\}", "2^{10}", "1e999999",
)
# fmt: on

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


# ---------------------------------------------------------------- symbolic classes

# Answers that are short and well formed but that sympy cannot finish with: each class once ran
# math-verify to its deadline (5 s then) on a single call (issue 52).
# fmt: off
HUGE_INTEGERS = (
    "10^{9}", "10^{12}", "10^{100}", "5\\cdot 10^8", "123456789", "98765432", "1000000000000",
    "(10^{10})!", "10^{100}!", "1000!", "2^{2^{20}}", "999999999999",
)
SYMBOLIC_CLASSES: tuple[str, ...] = (
    "binomial", "integral", "sum", "product", "e_tower", "limit", "derivative", "sqrt_tower",
    "special_function", "matrix", "big_float",
)
"""The kinds of costly answers `symbolic_answer` writes (``symbolic[<kind>]`` fuzz targets)."""
# fmt: on


def _tower(base: str, height: int, top: str) -> str:
    """``base^{base^{...^{top}}}`` with `height` powers (a base of several characters in
    parentheses)."""
    text, base = top, base if len(base) == 1 else f"({base})"
    for _ in range(height):
        text = f"{base}^{{{text}}}"
    return text


def _e_tower(height: int, top: str, spelling: str) -> str:
    text = top
    for _ in range(height):
        text = f"\\exp({text})" if spelling == "exp" else f"e^{{{text}}}"
    return text


def _sqrt_tower(depth: int, inner: str, plus: bool) -> str:
    text = inner
    for _ in range(depth):
        text = f"\\sqrt{{2+{text}}}" if plus else f"\\sqrt{{{text}}}"
    return text


def symbolic_answer(kind: str | None = None) -> st.SearchStrategy[str]:
    """Short answers that are costly to check symbolically, of one kind of `SYMBOLIC_CLASSES`
    (None: any): binomials of huge numbers (``\\binom{10^{9}}{5\\cdot 10^8}``), integrals,
    limits and derivatives of towers of powers (``\\int x^{x^{x^{x}}} dx``), sums and products
    with bounds up to 10^12, towers of ``e`` and ``\\exp``, nested ``\\sqrt``, ``\\Gamma``
    and ``\\zeta`` of huge arguments, matrices and determinants with huge entries, and floats
    such as ``1e999999``."""
    huge = _huge_integer()
    strategies = {
        **_counting_answers(huge),
        **_calculus_answers(),
        **_tower_answers(),
        **_huge_value_answers(huge),
    }
    if kind is not None:
        return strategies[kind]
    return st.one_of(*(strategies[name] for name in SYMBOLIC_CLASSES))


def _huge_integer() -> st.SearchStrategy[str]:
    """Integers from 10^5 up, some written as powers, factorials or towers (`HUGE_INTEGERS`)."""
    return st.one_of(
        st.sampled_from(HUGE_INTEGERS),
        st.integers(10**5, 10**13).map(str),
        st.integers(5, 15).map(lambda k: f"10^{{{k}}}"),
    )


def _counting_answers(huge: st.SearchStrategy[str]) -> dict[str, st.SearchStrategy[str]]:
    """The ``binomial``, ``sum`` and ``product`` kinds: counts and series up to `huge`."""
    return {
        "binomial": st.builds(
            lambda cmd, n, k: (
                f"{{{n} \\choose {k}}}" if cmd == "choose" else f"\\{cmd}{{{n}}}{{{k}}}"
            ),
            st.sampled_from(("binom", "dbinom", "tbinom", "choose")),
            huge,
            st.one_of(huge, st.integers(2, 10**6).map(str)),
        ),
        "sum": st.builds(
            lambda index, bound, body: (
                f"\\sum_{{{index}=1}}^{{{bound}}} {body.replace('k', index)}"
            ),
            st.sampled_from("kn"),
            huge,
            st.sampled_from(("k^2", "\\frac{1}{k}", "\\frac{1}{k^2}", "k", "k!", "k^{k}", "2^k")),
        ),
        "product": st.builds(
            lambda bound, body: f"\\prod_{{k=1}}^{{{bound}}} {body}",
            huge,
            st.sampled_from(("k", "(1+\\frac{1}{k^2})", "\\frac{k}{k+1}", "k^k")),
        ),
    }


def _calculus_answers() -> dict[str, st.SearchStrategy[str]]:
    """The ``integral``, ``limit`` and ``derivative`` kinds, of towers of powers."""
    variable_tower = st.builds(
        _tower, st.sampled_from(("x", "e", "x+1")), st.integers(2, 5), st.sampled_from("x2")
    )
    return {
        "integral": st.builds(
            lambda sign, body, var: f"{sign} {body}\\,d{var}" if var else f"{sign} {body} dx",
            st.sampled_from(("\\int", "\\int_0^1", "\\int_{0}^{\\infty}", "\\iint", "\\oint")),
            variable_tower,
            st.sampled_from(("x", "")),
        ),
        "limit": st.builds(
            lambda approach, body: f"\\lim_{{{approach}}} {body}",
            st.sampled_from(("x\\to 0", "x \\to \\infty", "n\\to\\infty", "x\\to 0^+")),
            st.one_of(
                variable_tower, st.just("(1+\\frac{1}{n})^{n^{n}}"), st.just("x^{x^{x^{x}}}")
            ),
        ),
        "derivative": st.builds(
            lambda order, body: (
                f"\\frac{{d}}{{dx}} {body}"
                if order == 1
                else f"\\frac{{d^{{{order}}}}}{{dx^{{{order}}}}} {body}"
            ),
            st.sampled_from((1, 2, 10, 100)),
            variable_tower,
        ),
    }


def _tower_answers() -> dict[str, st.SearchStrategy[str]]:
    """The ``e_tower`` and ``sqrt_tower`` kinds: deep towers of ``e``, ``\\exp`` and ``\\sqrt``."""
    return {
        "e_tower": st.builds(
            _e_tower,
            st.integers(4, 8),
            st.sampled_from(("e", "1", "2", "10", "x")),
            st.sampled_from(("e", "exp")),
        ),
        "sqrt_tower": st.builds(
            _sqrt_tower, st.integers(5, 40), st.sampled_from(("2", "x", "e^{e^{e}}")), st.booleans()
        ),
    }


def _huge_value_answers(huge: st.SearchStrategy[str]) -> dict[str, st.SearchStrategy[str]]:
    """The ``special_function``, ``matrix`` and ``big_float`` kinds: values too big to compute."""
    return {
        "special_function": st.builds(
            lambda name, argument: f"\\{name}({argument})",
            st.sampled_from(("Gamma", "zeta", "Gamma", "ln\\Gamma")),
            st.one_of(huge, st.just("\\Gamma(100)"), st.just("10^{12}+1")),
        ),
        "matrix": st.builds(
            lambda det, env, entry: (
                f"{det}\\begin{{{env}}} {entry} & 1 \\\\ 1 & {entry} \\end{{{env}}}"
            ),
            st.sampled_from(("", "\\det")),
            st.sampled_from(("pmatrix", "bmatrix", "vmatrix")),
            st.one_of(huge, st.just("2^{2^{2^{20}}}"), st.just("e^{e^{e^{e^{e}}}}")),
        ),
        "big_float": st.one_of(
            st.sampled_from(
                ("1e999999", "-1e999999", "1e99999999999", "9.99e99999999", "1.0e-99999")
            ),
            st.integers(10**5, 10**12).map(lambda k: f"1e{k}"),
            st.integers(10**5, 10**7).map(lambda k: f"10.0^{{{k}}}"),
        ),
    }


def adversarial_text() -> st.SearchStrategy[str]:
    """Adversarial model output mixed with Hypothesis's own ``st.text()``.

    Building blocks: huge repetitions of one unit (digits, backslashes, braces, markers, NULs,
    lone surrogates, zero-width and right-to-left marks; up to 1.2 MB, one long line), deep
    LaTeX nesting (``\\frac``, ``\\sqrt``, braces, boxes, towers; thousands deep, balanced,
    unclosed or only closers), numbers with thousands of digits and special values
    (``1e999999``, ``0^0``, ``1/0``, ``NaN``), answers costly to check symbolically
    (`symbolic_answer`), answer markers, control/format/surrogate
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
        symbolic_answer(),
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


REACH_REFERENCES = (
    "3 * 4 = 12, 12 + 8 = 20",
    "9 - 2 = 7, 7 * 6 = 42, 42 - 5 = 37",
    "4 * 6 = 24, 24 + 6 = 30, 30 + 3 = 33, 33 * 3 = 99, 99 - 7 = 92",
)


def references_for(name: str) -> tuple[str, ...]:
    """Valid references of a verifier: none of them may make it raise."""
    if name == "label":
        return LABEL_REFERENCES
    if name in ("gsm8k", "numeric", "partial_numeric", "composite"):
        return NUMERIC_REFERENCES
    if name == "reach":
        return REACH_REFERENCES
    for family in envs.families():  # a task family's own verifiers: its references
        if name in family.verifiers and family.fuzz_references:
            return family.fuzz_references
    return MATH_REFERENCES


def trl_completion() -> st.SearchStrategy[Any]:
    """One completion as TRL hands it to a reward function (text, a message list, a message,
    multi-part content), or something malformed (a non-string, an empty list)."""
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


# ---------------------------------------------------------------- inputs that were once slow

# fmt: off
KNOWN_SLOW: dict[str, tuple[str, float]] = {
    # name: (text, seconds it may take per call now). Each took 0.5 s to hours before its fix.
    # Quadratic regular expressions over the 4000-character extraction tail:
    "phrase then spaces": ("The answer is 5" + " " * 3980 + "x", 0.5),
    "fraction then spaces": ("\\frac{1}{" + " " * 3990 + "x", 0.5),
    "boxed fraction then spaces": ("\\boxed{\\frac{1}{" + " " * 3980 + "}", 0.5),
    "gsm8k marker then spaces": ("#### 1" + " " * 3990 + "a", 0.5),
    "backslashes": ("\\" * 4000, 0.5),
    "backslashes in answer tags": ("<answer>" + "\\" * 3980 + "</answer>", 0.5),
    # A critic's "verdict" then whitespace backtracked cubically (a 1000-space reply: 36 s):
    "verdict then spaces": ("Verdict" + " " * 3990 + "x", 0.5),
    "verdict then mixed whitespace": ("Verdict" + "\t\n " * 1300 + "x", 0.5),
    "verdict, colon, spaces, stars": ("Verdict:" + " " * 3000 + "**" + " " * 900 + "x", 0.5),
    # Whole-text helpers: canonical_answer took 39 s; each unbraced \\fbox sliced the rest (7 s).
    "40k backslashes": ("\\" * 40_000, 0.5),
    "unbraced fboxes": ("\\fbox 1 " * 150_000, 3.0),
}
# fmt: on
"""Inputs the fuzz once found slow, each with the time a call on it may take now. The
``known_slow`` target (`envs.testing.fuzz.targets.known_slow_target`) times every verifier and
the extraction helpers on each; ``tests/fuzz/test_regressions.py`` checks what they return."""
