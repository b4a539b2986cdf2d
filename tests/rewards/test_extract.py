"""Answer extraction, canonical keys and majority voting."""

from __future__ import annotations

import pytest

from rewards import canonical_answer, extract_answer, last_boxed, majority_vote
from rewards.extract import KINDS, TAIL_CHARS, analyze, find_boxed, prepare_reference, sanitize

EXTRACT_CASES = [
    ("so the answer is \\boxed{18}.", "18"),  # boxed wins over the phrase around it
    ("\\boxed{3} then \\boxed{5}", "5"),  # the last box
    ("\\fbox{7}", "7"),  # \fbox
    ("x = \\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),  # nested braces
    ("\\boxed{\\frac{1}{2}", "\\frac{1}{2}"),  # missing closing brace: the rest of the text
    ("\\boxed{\\boxed{7}}", "7"),  # nested boxes unwrap
    ("$\\boxed{42}$", "42"),  # box inside inline math
    ("\\boxed 5$ and more", "5"),  # \boxed without braces takes one token
    ("\\\\boxed{9}", "9"),  # double-escaped backslash (JSON-escaped output)
    ("<answer> 42 </answer>", "42"),  # answer tags
    ("<think>hmm 3</think><answer>12</answer>", "12"),  # tags after reasoning
    ("<answer>7", "7"),  # unclosed answer tag
    ("16 - 3 - 4 = <<16-3-4=9>>9\n#### 9", "9"),  # GSM8K marker
    ("#### 2,125", "2,125"),  # GSM8K marker keeps the written number
    ("The answer is 18.", "18"),  # phrase, sentence period dropped
    ("Answer: 5 apples", "5 apples"),  # "Answer:" phrase
    ("**Final Answer:** 12", "12"),  # markdown bold
    ("Final Answer: The final answer is $\\frac{3}{4}$. I hope it is correct.", "\\frac{3}{4}"),
    ("So she makes 9 * 2 = 18 dollars.", "18"),  # last number of the last line
    ("Total: 3/4 of it\n", "3/4"),  # fraction token, trailing newline
    ("she has 5\n\n  \n", "5"),  # blank trailing lines are skipped
    ("It costs $1,234.50 in total", "1,234.50"),  # thousands and decimals
    ("The result is -7", "-7"),  # negative
    ("#### Step 1: add\n3+4=7\n#### Step 2\nso \\boxed{7}", "7"),  # markdown headings
    ("#### Step 1\nthe answer is 4", "4"),  # a heading is not a GSM8K marker
    ("The answer is \\boxed{5}. (Put it in \\boxed{}.)", "5"),  # echoed empty box skipped
]


@pytest.mark.parametrize(
    ("response", "expected"), EXTRACT_CASES, ids=[c[0][:30] for c in EXTRACT_CASES]
)
def test_extract_answer(response: str, expected: str) -> None:
    assert extract_answer(response) == expected


NO_ANSWER = [
    "",  # empty
    "I do not know.",  # no digits, no markers
    "\n\n",  # only whitespace
]


@pytest.mark.parametrize("response", NO_ANSWER)
def test_no_answer(response: str) -> None:
    assert extract_answer(response) is None


def test_non_string_gives_none() -> None:
    assert extract_answer(None) is None  # type: ignore[arg-type]
    assert extract_answer(18) is None  # type: ignore[arg-type]


def test_only_the_tail_is_read() -> None:
    early = "\\boxed{1}" + "x" * (TAIL_CHARS + 10) + " and finally 7"
    assert extract_answer(early) == "7"  # the early box is out of reach


def test_markers_are_collected_in_order() -> None:
    found = analyze("\\boxed{5} then <answer>6</answer> then #### 7")
    assert found.kind == "boxed"
    assert found.markers == ("5", "6", "7")


def test_phrases_are_not_explicit_markers() -> None:
    # Prose self-correction: the last phrase counts, and no marker conflict arises.
    found = analyze("The answer is 4. Wait, no. The answer is 5.")
    assert (found.answer, found.kind, found.markers) == ("5", "phrase", ())


@pytest.mark.parametrize(
    "text, kind",
    [
        ("\\boxed{5}", "boxed"),
        ("<answer>6</answer>", "answer_tag"),
        ("#### 7", "gsm8k"),
        ("The answer is 4.", "phrase"),
        ("$0$", "math"),  # found by the fuzzer: a kind the declared set lacked
        ("so we get $[0,1)$", "math"),
        ("Working.\n12", "last_line"),
        ("", "none"),
    ],
)
def test_every_kind_is_declared(text: str, kind: str) -> None:
    assert analyze(text).kind == kind and kind in KINDS


def test_find_and_last_boxed() -> None:
    assert find_boxed("\\boxed{a} x \\boxed{b{c}}") == ["a", "b{c}"]
    assert last_boxed("\\boxed{a} x \\boxed{b{c}}") == "b{c}"
    assert last_boxed("no box") is None


REFERENCE_CASES = [
    ("18", "18"),  # bare answer
    ("  18 \n", "18"),  # whitespace
    ("She sells 9 eggs.\n#### 2,125", "2,125"),  # GSM8K solution
    ("so $x = \\boxed{\\frac{1}{2}}$", "\\frac{1}{2}"),  # MATH solution
]


@pytest.mark.parametrize(("reference", "expected"), REFERENCE_CASES)
def test_prepare_reference(reference: str, expected: str) -> None:
    assert prepare_reference(reference) == expected


def test_sanitize() -> None:
    assert sanitize("a\x00b\x07c\u200bd") == "abcd"  # control and zero-width characters go
    assert sanitize("x\ud800y") == "x\ufffdy"  # lone surrogates become U+FFFD
    assert sanitize("−5") == "-5"  # unicode minus
    assert len(sanitize("z" * 10_000)) == TAIL_CHARS
    sanitize("\ud800" * 5).encode("utf-8")  # always encodable


CANONICAL_GROUPS = [
    ["0.5", "\\frac{1}{2}", "1/2", "\\dfrac{2}{4}", "$0.50$"],  # one number, many spellings
    ["2125", "2,125", "$2,125", "2125 dollars"],  # currency, commas, units
    ["20", "20%", "20\\%"],  # percent dropped for voting
    ["x + 1", "X+1", " x  +  1 ", "$x+1$"],  # text: case, spaces, math delimiters
]


@pytest.mark.parametrize("group", CANONICAL_GROUPS, ids=[g[0] for g in CANONICAL_GROUPS])
def test_canonical_answer_groups(group: list[str]) -> None:
    assert len({canonical_answer(answer) for answer in group}) == 1


def test_canonical_answer_separates() -> None:
    assert canonical_answer("0.5") != canonical_answer("0.05")
    assert canonical_answer("x+1") != canonical_answer("x-1")


VOTE_CASES = [
    (["7", "7", "8"], ("7", 2)),  # plain majority
    (["0.5", None, "7", "\\frac{1}{2}", "7"], ("0.5", 2)),  # tie: first key to appear wins
    (["8", "7", "7", "8"], ("8", 2)),  # tie broken by first appearance
    (["$2,125", "2125"], ("$2,125", 2)),  # first agent's spelling is returned
    ([None, None], (None, 0)),  # nobody answered
    ([], (None, 0)),  # no agents
    (["", "  ", "3"], ("3", 1)),  # empty answers are ignored
]


@pytest.mark.parametrize(("answers", "expected"), VOTE_CASES)
def test_majority_vote(answers: list[str | None], expected: tuple[str | None, int]) -> None:
    assert majority_vote(answers) == expected
