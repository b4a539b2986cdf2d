"""Answer-checking verifiers: `math` (symbolic), `gsm8k` (numeric), `exact` and `label`.

Each one extracts the final answer (`rewards.extract.analyze`), refuses hedged responses
(`rewards.hedge.hedge_reason`) and only then compares. Model output never makes ``verify``
raise: a non-string response scores 0 with a reason. A bad reference (not a string, empty, or
not a number where a number is needed) raises `ValueError`. References may be bare answers or
full solutions: ``"... #### 18"`` and ``"... \\boxed{18}"`` both mean ``"18"``.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Mapping, Sequence

from rewards.base import Verdict
from rewards.extract import (
    analyze,
    canonical_answer,
    normalize_text,
    sanitize,
)
from rewards.numeric import (
    Num,
    numbers_match,
    parse_decimal_comma,
    parse_number,
)
from rewards.screen import (
    NO_ANSWER,
    answer_number,
    check_reference,
    not_a_string,
    reference_decimal_comma,
    reference_number,
    screen,
)
from rewards.structure import strip_redundant, structural_verdict
from rewards.symbolic import require_math_verify, symbolic_equal
from rewards.symbolic_budget import DEFAULT_BUDGET_S, REFERENCE_BUDGET_S, check_budget

__all__ = [
    "NO_ANSWER",
    "ExactVerifier",
    "LabelVerifier",
    "MathVerifier",
    "NumericVerifier",
    "answer_number",
    "check_reference",
    "not_a_string",
]

_clock = time.perf_counter  # what a response's symbolic budget is measured with

# Spellings math-verify does not equate (math-verify 0.9 reads \varnothing as a symbol).
_SYNONYMS = (("\\varnothing", "\\emptyset"), ("\\cfrac", "\\frac"))
_LAYOUT = re.compile(r"(?<!\\)\\(?:[,;:! ]|left\b|right\b|displaystyle\b)")
_SPACE_AROUND_SYMBOL = re.compile(r" ?([^A-Za-z0-9 \\]) ?")


def _synonyms(text: str) -> str:
    for spelling, canonical in _SYNONYMS:
        text = text.replace(spelling, canonical)
    return text


def _latex_key(text: str) -> str:
    """The answer with layout (spaces, ``\\left``, ``\\,``, ``\\dfrac``) and synonyms normalised:
    two answers with one key are one expression, with no symbolic check needed."""
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == "$":
        text = text.strip("$")
    text = _LAYOUT.sub(
        " ", _synonyms(text).replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    )
    return _SPACE_AROUND_SYMBOL.sub(r"\1", " ".join(sanitize(text, len(text)).split()))


def _brace_depth(text: str) -> int:
    depth = deepest = 0
    for char in text:
        if char == "{":
            depth += 1
            deepest = max(deepest, depth)
        elif char == "}":
            depth -= 1
    return deepest


class _Budget:
    """What is left of one response's symbolic budget (its checks run one after another)."""

    __slots__ = ("spent", "total")

    def __init__(self, total: float) -> None:
        self.total, self.spent = total, 0.0

    def left(self) -> float:
        return self.total - self.spent


class MathVerifier:
    """Symbolic equivalence through math-verify, behind an exact numeric fast path.

    When both the extracted answer and the reference are plain numbers they are compared
    exactly (`rewards.numeric.numbers_match`, which follows math-verify's rules for percent,
    thousands commas, currency and 6-decimal float rounding) and math-verify is never called.
    The numbers read here include spaced thousands (``1 000``), mixed numbers
    (``15\\frac{39}{40}``) and, against a one-number reference, decimal commas (``3,5``).
    Answers that differ from the reference only in layout (spaces, ``\\left``, ``\\dfrac``) or
    in a spelling math-verify does not equate (``\\varnothing``, ``\\cfrac``) match without it.
    Answers whose symbolic check cannot end in time (a binomial of huge numbers, an integral
    of a tower of powers, a sum with a bound over 10^4, a tower of ``e``, ...) are refused
    before math-verify sees them, with a reason that starts "refused" (`rewards.structure`,
    `rewards.costly`). Anything else (expressions, intervals, matrices, LaTeX) goes to
    math-verify within the symbolic budget (`rewards.symbolic.symbolic_equal`); an answer that
    runs out of it scores 0 with a reason that starts "timeout". Two markers that differ in
    text are compared by math-verify too (at most `rewards.hedge.MAX_SAME_CHECKS`), so one
    value in two notations is not a hedge; the verdict's reason then says that math-verify ran.

    Args:
        budget_s: seconds of wall time math-verify may spend on one response's answer, all its
            symbolic checks together (default 1.0; `rewards.symbolic.DEFAULT_BUDGET_S`). The
            reference is parsed outside it, once (references are data, not model output).
            Past it the answer scores 0, reason "timeout: ...". A number above 0 and at most
            600; anything else raises.
        isolate: run math-verify in a helper process, killed when the budget is spent (default
            True). ``False`` runs it in the caller's main thread under a timer: about 1 ms
            faster per symbolic check, but C-level work (a huge integer) cannot be interrupted
            there, so one answer can run on past the budget.
        max_answer_chars: longer extracted answers score 0 without a symbolic check (1000).
        max_nesting: answers with deeper brace nesting score 0 without a check (32).
        float_rounding: the decimal places numbers written with a decimal point are compared at,
            in a plain number and inside a matrix, interval, set or tuple alike (6, as
            math-verify's ``float_rounding``): with 2, ``(0.5, 1.33]`` matches
            ``(\\frac{1}{2}, \\frac{4}{3}]`` and ``0.33`` matches ``\\frac{1}{3}``.
        timeout: the older name of `budget_s` (give one of them).

    Raises:
        ImportError: math-verify is not installed (the message says how to install it).
        TypeError, ValueError: a bad option (the message names it).

    Examples:
        >>> v = MathVerifier()
        >>> v.verify("so the total is \\\\boxed{\\\\frac{1}{2}}", "0.5").score
        1.0
        >>> v.verify("#### 17", "18").reason
        'wrong answer: 17 != 18'
    """

    name = "math"

    def __init__(
        self,
        budget_s: float = DEFAULT_BUDGET_S,
        isolate: bool = True,
        max_answer_chars: int = 1000,
        max_nesting: int = 32,
        float_rounding: int = 6,
        *,
        timeout: float | None = None,
    ) -> None:
        if timeout is not None:
            if budget_s != DEFAULT_BUDGET_S:
                raise ValueError("math verifier: give budget_s or its older name timeout, not both")
            budget_s, name = timeout, "timeout"
        else:
            name = "budget_s"
        try:
            self.budget_s = check_budget(budget_s, name)
        except (TypeError, ValueError) as err:
            raise type(err)(f"math verifier: {err}") from None
        if isinstance(float_rounding, bool) or not isinstance(float_rounding, int):
            raise TypeError(f"math verifier: float_rounding must be an int, got {float_rounding!r}")
        if not 0 <= float_rounding <= 15:
            raise ValueError(
                f"math verifier: float_rounding must be 0 to 15 decimal places, got {float_rounding}"
            )
        require_math_verify()
        self.isolate = bool(isolate)
        self.max_answer_chars = int(max_answer_chars)
        self.max_nesting = int(max_nesting)
        self.float_rounding = float_rounding

    @property
    def timeout(self) -> float:
        """The older name of `budget_s`."""
        return self.budget_s

    def verify(self, response: str, reference: str) -> Verdict:
        """Score one response against one reference (see the class docstring)."""
        asked: list[str] = []
        budget = _Budget(self.budget_s)
        same = functools.partial(self._same, asked=asked, budget=budget)
        verdict = self._verify(response, reference, same, budget)
        if asked and "math-verify" not in verdict.reason:
            # The reason says when math-verify ran, so a slow verdict is explained by it.
            reason = f"{verdict.reason} (final answers compared by math-verify: {asked[-1]})"
            return Verdict(verdict.score, verdict.extracted, reason)
        return verdict

    def _verify(
        self,
        response: str,
        reference: str,
        same: Callable[[str, str], bool],
        budget: _Budget,
    ) -> Verdict:
        bare = check_reference(reference, self.name)
        screened = screen(response, bare, same)
        if isinstance(screened, Verdict):
            return screened
        answer = screened.answer or ""
        decided = self._numbers(answer, answer, bare)
        if decided is not None:
            return decided
        # Hostile answers (deep nesting, towers, huge powers) are answered here, without
        # math-verify, where a cheap verdict is sound (`rewards.structure`).
        structural = structural_verdict(answer, bare, self.float_rounding)
        if structural.verdict is not None:
            return Verdict(float(structural.verdict), answer, structural.reason)
        core = structural.answer  # the answer without redundant brackets around it
        if core != answer:
            decided = self._numbers(core, answer, bare)
            if decided is not None:
                return decided
        too_big = self._too_big(core)
        if too_big is not None:
            return Verdict(0.0, answer, too_big)
        if _latex_key(core) == _latex_key(bare):
            return Verdict(1.0, answer, "correct: the same expression")
        same, why = self._symbolic(bare, core, budget, REFERENCE_BUDGET_S)
        return Verdict(1.0 if same else 0.0, answer, why if same is not False else f"wrong: {why}")

    def _numbers(self, text: str, answer: str, bare: str) -> Verdict | None:
        """The verdict when `text` (the answer, or its core) and the reference are plain numbers
        that `rewards.numeric.numbers_match` can compare, else None."""
        gold, pred = reference_number(bare), parse_number(text)
        if gold is not None and pred is None:
            pred = parse_decimal_comma(text)
        elif gold is None and pred is not None and pred.is_float:
            gold = reference_decimal_comma(bare)
        if gold is not None and pred is not None:
            same = numbers_match(gold, pred, self.float_rounding)
            if same is not None:
                if same:
                    return Verdict(1.0, answer, "correct: numbers match")
                return Verdict(0.0, answer, f"wrong answer: {answer:.60} != {bare:.60}")
        return None

    def _too_big(self, answer: str) -> str | None:
        """Why `answer` is refused a symbolic check (too long, nested too deep), or None."""
        if len(answer) > self.max_answer_chars:
            return f"answer too long for a symbolic check ({len(answer)})"
        if _brace_depth(answer) > self.max_nesting:
            return f"answer nested deeper than {self.max_nesting} braces"
        return None

    def _symbolic(
        self, first: str, second: str, budget: _Budget, reference_s: float | None
    ) -> tuple[bool | None, str]:
        """math-verify on the two texts, synonyms normalised, within what is left of `budget`
        (`first` is parsed on its own budget of `reference_s` unless that is None)."""
        left = budget.left()
        if left <= 0:
            return None, (
                f"timeout: the symbolic budget ({budget.total:.3g} s) was spent on earlier checks"
            )
        started = _clock()
        try:
            return symbolic_equal(
                _synonyms(first),
                _synonyms(second),
                left,
                self.isolate,
                self.float_rounding,
                reference_s,
            )
        finally:
            budget.spent += _clock() - started

    def _same(self, first: str, second: str, asked: list[str], budget: _Budget) -> bool:
        """Whether two final-answer markers state one value (``\\boxed{\\sqrt{2}/2}`` and
        ``\\boxed{\\frac{\\sqrt2}{2}}``), so that writing both is not a hedge; `asked` collects
        math-verify's reasons."""
        if _latex_key(first) == _latex_key(second):
            return True
        for one, other in ((first, second), (second, first)):
            structural = structural_verdict(one, other, self.float_rounding)
            if structural.verdict is not None:
                return structural.verdict
        first, second = strip_redundant(first)[0], strip_redundant(second)[0]
        if self._too_big(first) is not None or self._too_big(second) is not None:
            return False
        same, why = self._symbolic(first, second, budget, None)  # both are model output
        asked.append(why)
        return same is True


class NumericVerifier:
    """Numeric answers only (GSM8K): exact fraction comparison or a relative tolerance; no sympy.

    Args:
        rel_tol: accept ``|pred - ref| <= rel_tol * |ref|`` (default 0.0: exact, with the same
            percent and 6-decimal rounding rules as `MathVerifier`).

    Examples:
        >>> NumericVerifier().verify("She makes $18 a day.\\\\n#### 18", "18").score
        1.0
        >>> NumericVerifier().verify("#### 1 #### 18", "18").reason[:6]
        'hedged'
    """

    name = "gsm8k"

    def __init__(self, rel_tol: float = 0.0) -> None:
        if not 0.0 <= rel_tol < 1.0:
            raise ValueError(f"gsm8k verifier: rel_tol must lie in [0, 1), got {rel_tol!r}")
        self.rel_tol = float(rel_tol)

    def verify(self, response: str, reference: str) -> Verdict:
        """Score one response against one numeric reference."""
        bare = check_reference(reference, self.name)
        gold = reference_number(bare)
        if gold is None:
            raise ValueError(f"gsm8k verifier: reference {reference!r:.80} is not a number")
        screened = screen(response, bare)
        if isinstance(screened, Verdict):
            return screened
        answer = screened.answer or ""
        pred = answer_number(answer)
        if pred is None:
            return Verdict(0.0, answer, f"answer is not a number: {answer:.60}")
        if self._close(gold, pred):
            return Verdict(1.0, answer, "correct: numbers match")
        return Verdict(0.0, answer, f"wrong answer: {answer:.60} != {bare:.60}")

    def _close(self, gold: Num, pred: Num) -> bool:
        if self.rel_tol == 0.0:
            decided = numbers_match(gold, pred)
            if decided is not None:
                return decided
        # A percent next to a decimal (or any tolerance): accept either reading of the percent.
        tolerance = self.rel_tol or 5e-7
        return any(
            abs(p - g) <= tolerance * abs(g) or p == g
            for g in {gold.value, gold.actual}
            for p in {pred.value, pred.actual}
        )


class ExactVerifier:
    """Equality of `rewards.extract.canonical_answer` keys (numbers exactly, text normalised).

    Examples:
        >>> ExactVerifier().verify("Answer: Paris", "paris").score
        1.0
        >>> ExactVerifier().verify("Answer: Lyon", "paris").score
        0.0
    """

    name = "exact"

    def verify(self, response: str, reference: str) -> Verdict:
        """Score one response against one reference."""
        bare = check_reference(reference, self.name)
        screened = screen(response, bare)
        if isinstance(screened, Verdict):
            return screened
        answer = screened.answer or ""
        if canonical_answer(answer) == canonical_answer(bare):
            return Verdict(1.0, answer, "correct: exact match")
        return Verdict(0.0, answer, f"wrong answer: {answer:.60} != {bare:.60}")


_ANLI_ALIASES = {
    "e": "entailment",
    "n": "neutral",
    "c": "contradiction",
    "entail": "entailment",
    "entails": "entailment",
    "entailed": "entailment",
    "contradict": "contradiction",
    "contradicts": "contradiction",
    "contradicted": "contradiction",
    "contradictory": "contradiction",
}
_ANLI_LABELS = ("entailment", "neutral", "contradiction")
_NEGATION = re.compile(r"\b(?:not|no|never|isn't|is not)\s+(?:an?\s+)?$")


class LabelVerifier:
    """Classification answers such as ANLI's entailment / neutral / contradiction.

    The label is read from the final-answer segment (boxed, ``<answer>`` tags, "the answer is",
    else the last line). Single-letter aliases (``e``/``n``/``c``) count only when they are the
    whole answer. Naming two different labels there, or explicit markers that disagree, is
    hedging and scores 0.

    Args:
        labels: the label set (default ANLI's three).
        aliases: extra spellings mapped to labels; by default, for ANLI's labels, the first
            letters and verb forms ("entails", "contradicts"), otherwise each label's unique
            first letter.

    Examples:
        >>> LabelVerifier().verify("The hypothesis follows. Answer: entailment", "e").score
        1.0
        >>> LabelVerifier().verify("Answer: entailment or neutral", "e").reason[:6]
        'hedged'
    """

    name = "label"

    def __init__(
        self, labels: Sequence[str] = _ANLI_LABELS, aliases: Mapping[str, str] | None = None
    ) -> None:
        names = tuple(str(label).strip().lower() for label in labels)
        if not names or len(set(names)) != len(names) or not all(names):
            raise ValueError(f"label verifier: labels must be distinct non-empty, got {labels!r}")
        self.labels = names
        if aliases is None:
            aliases = _ANLI_ALIASES if names == _ANLI_LABELS else self._first_letters(names)
        self.aliases = {k.strip().lower(): v.strip().lower() for k, v in aliases.items()}
        unknown = sorted(set(self.aliases.values()) - set(names))
        if unknown:
            raise ValueError(f"label verifier: aliases point to unknown labels {unknown}")
        spellings = {label: label for label in names} | self.aliases
        # One-letter spellings (e/n/c, or multiple-choice labels a-d) count only as the whole
        # answer: as words they would match every "a" in a sentence.
        self._letters = {k: v for k, v in spellings.items() if len(k) == 1}
        self._words = {k: v for k, v in spellings.items() if len(k) > 1}
        alternation = "|".join(re.escape(w) for w in sorted(self._words, key=len, reverse=True))
        self._pattern = (
            re.compile(rf"(?<![a-z])(?:{alternation})(?![a-z])") if alternation else None
        )

    @staticmethod
    def _first_letters(names: tuple[str, ...]) -> dict[str, str]:
        letters = [name[0] for name in names]
        return {name[0]: name for name in names if letters.count(name[0]) == 1}

    def label_of(self, text: str) -> list[str]:
        """Distinct labels named in `text`, in order of first mention."""
        if len(text) < 40:
            letters = re.sub(r"[^a-z]", "", normalize_text(text))
            if letters in self._letters:
                return [self._letters[letters]]
        found: list[str] = []
        if self._pattern is None:
            return found
        lowered = text.lower()
        for match in self._pattern.finditer(lowered):
            if _NEGATION.search(lowered, max(0, match.start() - 12), match.start()):
                continue  # "not entailment" names the label to deny it
            label = self._words[match.group()]
            if label not in found:
                found.append(label)
        return found

    def _reference_label(self, reference: object) -> str:
        bare = check_reference(reference, self.name).lower().strip(" .")
        label = bare if bare in self.labels else self.aliases.get(bare)
        if label is None:
            raise ValueError(
                f"label verifier: reference {reference!r:.80} is not one of {list(self.labels)}"
            )
        return label

    def verify(self, response: str, reference: str) -> Verdict:
        """Score one response against one reference label."""
        gold = self._reference_label(reference)
        rejected = not_a_string(response)
        if rejected is not None:
            return rejected
        extraction = analyze(response)
        marked = {tuple(self.label_of(m)) for m in extraction.markers if self.label_of(m)}
        if len(marked) > 1:
            return Verdict(0.0, extraction.answer, "hedged: explicit final answers disagree")
        segment = extraction.segment
        if extraction.kind in ("last_line", "none"):  # the last line, numbers or not
            lines = [line for line in sanitize(response).splitlines() if line.strip()]
            segment = lines[-1].strip() if lines else ""
        found = self.label_of(segment)
        if not found:
            return Verdict(0.0, None, f"no label found (expected one of {list(self.labels)})")
        if len(found) > 1:
            return Verdict(0.0, segment[:80], f"hedged: multiple candidate answers {found}")
        if found[0] == gold:
            return Verdict(1.0, found[0], "correct label")
        return Verdict(0.0, found[0], f"wrong label: {found[0]} != {gold}")
