"""Cheap structural checks that answer hostile answers before any symbolic (math-verify) work.

math-verify can spend its whole deadline (5 s by default) on an answer a few hundred characters
long: 100 redundant parentheses around ``7``, a tower such as ``10^{10^{10}}``, ``(10^{10})!``,
``(1+x)^{100000}``, a ``\\frac`` nested 20 deep. `structural_verdict` answers such inputs in
well under a millisecond, with the verdict math-verify gives where it can give one, and says
"not sure" (None) otherwise, so the caller falls back to math-verify:

1. Redundant brackets: ``((((7))))``, ``{{x+1}}``, ``\\left(\\left(7\\right)\\right)``, ``[[7]]``
   are peeled (`strip_redundant`; math-verify reads each as its content) when the content holds no
   comma or semicolon (``{(1,2)}`` and ``(1,2)`` differ to math-verify). The peeled answer is
   what the caller compares from then on.
2. Exact arithmetic: an answer and a reference that are both plain rational expressions
   (numbers, ``+ - * /``, ``\\frac``, ``\\sqrt`` of a perfect square, integer powers, small
   factorials) are evaluated exactly (`exact_value`); equal values score right, values further
   apart than math-verify's rounding can bridge score wrong. Otherwise a constant answer and a
   constant (or polynomial, read at 0) reference are enclosed in mpmath intervals (roots and
   ``\\pi`` included): intervals that far apart score wrong (``\\sqrt{\\sqrt{\\sqrt{2}}}`` != 7).
3. Magnitude: a lower bound on ``log10`` of a huge answer (`log10_lower`: towers, factorials,
   and sums, differences and quotients that one huge part dominates) against an upper bound
   for the reference (`log10_upper`, which reads a reference polynomial in its variables at
   zero: a polynomial that equals a constant equals it there) proves ``10^{10^{10}}`` != 18
   without building the number.
4. Degree: ``(a + b x)^{E}`` (a non-constant linear base, ``E`` a whole number of at least
   `MIN_HUGE_DEGREE`) is a polynomial of degree ``E``; a reference that is ``N / D`` with
   ``N`` and ``D`` of degree below ``E`` (`_rational_size`: variables under ``+ - * /`` and
   whole powers, constants anything the grammar reads) differs from it, as ``E + deg D > deg N``.
   Two such powers compare by base and exponent.
5. Unreadable: an answer of only empty brackets (``{{}}``) against a number or expression (not
   a set: ``{}`` is the empty set to math-verify), or with `MIN_IMBALANCE` or more unmatched
   round or square brackets, scores 0, as math-verify parses neither.

Every rule reads a small grammar (`parse_expression`: numbers, single-letter variables other
than ``e`` and ``i``, ``\\pi``, ``+ - * / ^ !``, ``\\cdot``, ``\\times``, ``\\frac``, ``\\sqrt``,
brackets); anything else makes it return None. Rules 2-4 run only on answers that look hostile
(`looks_hostile`: deep nesting, a power, a factorial, a long digit run or a long text), so
ordinary answers reach math-verify exactly as before.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from rewards.numeric import parse_number

__all__ = [
    "MIN_HUGE_DEGREE",
    "Structural",
    "exact_value",
    "log10_lower",
    "log10_upper",
    "looks_hostile",
    "nesting_depth",
    "parse_expression",
    "strip_redundant",
    "structural_verdict",
]

MIN_HUGE_DEGREE = 1000
"""Rule 4 applies to powers with at least this exponent (smaller ones math-verify expands fast)."""
MIN_HUGE_LOG10 = 15.0
"""Rule 3 applies to answers of at least 10^15 (below, math-verify compares them fast)."""
HOSTILE_DEPTH = 6
HOSTILE_DIGITS = 40
HOSTILE_CHARS = 200
MIN_IMBALANCE = 3
"""Answers with this many unmatched ``(`` ``[`` (or ``)`` ``]``) score 0: math-verify 0.9 parses
none of them (``((7`` and ``7))`` are not 7 to it), after up to half a second on deep ones."""
MAX_PARSE_CHARS = 2000
"""Longer answers and references are not parsed (only their redundant brackets are peeled)."""
_MAX_PARSE_DEPTH = 60  # bracket levels the recursive parser follows before giving up
_MAX_EXACT_BITS = 4096  # exact integers and fractions are kept below this size
_MAX_FACTORIAL = 300
_LOG10_E = math.log10(math.e)

# ------------------------------------------------------------------------- brackets

_OPENERS = {"(": ")", "[": "]", "{": "}", "\\left(": "\\right)", "\\left[": "\\right]"}
_CLOSERS = frozenset(_OPENERS.values())
_BRACKET = re.compile(r"\\left[(\[]|\\right[)\]]|\\.|[()\[\]{}]", re.DOTALL)


def _bracket_tokens(text: str) -> list[tuple[str, int, int]]:
    """Bracket tokens (text, start, end); escaped characters (``\\{``, ``\\\\``) are skipped."""
    return [
        (m.group(), m.start(), m.end())
        for m in _BRACKET.finditer(text)
        if m.group() in _OPENERS or m.group() in _CLOSERS
    ]


def nesting_depth(text: str) -> int:
    """The deepest nesting of ``( [ {`` and ``\\left( \\right)`` brackets (kinds not matched)."""
    depth = deepest = 0
    for token, _start, _end in _bracket_tokens(text):
        if token in _OPENERS:
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth = max(0, depth - 1)
    return deepest


def strip_redundant(text: str) -> tuple[str, int]:
    """`text` without brackets that wrap all of it, and how many layers were peeled.

    ``((((7))))`` -> ``("7", 4)``; ``(1)(2)``, ``(1, 2)``, ``((1, 2))`` and unbalanced text are
    returned as they are (with 0). Linear in the length of `text`.

    Examples:
        >>> strip_redundant("\\\\left( ((x+1)) \\\\right)")
        ('x+1', 3)
        >>> strip_redundant("(1)+(2)")
        ('(1)+(2)', 0)
    """
    tokens = _bracket_tokens(text)
    match: dict[int, tuple[int, int]] = {}  # opener start -> (closer start, closer end)
    stack: list[tuple[str, int, int]] = []
    for token, start, end in tokens:
        if token in _OPENERS:
            stack.append((token, start, end))
        elif not stack or _OPENERS[stack[-1][0]] != token:
            return text, 0  # unbalanced or mismatched: read it as it is
        else:
            opener = stack.pop()
            match[opener[1]] = (start, end)
    if stack:
        return text, 0
    ends = {start: end for _token, start, end in tokens if _token in _OPENERS}
    low, high, layers = 0, len(text), 0
    while True:
        while low < high and text[low].isspace():
            low += 1
        while high > low and text[high - 1].isspace():
            high -= 1
        closer = match.get(low)
        if closer is None or closer[1] != high:
            break
        low, high, layers = ends[low], closer[0], layers + 1
    core = text[low:high]
    if layers == 0 or not core or "," in core or ";" in core:
        return text, 0
    return core, layers


# ------------------------------------------------------------------------- a small grammar

_TOKEN = re.compile(
    r"\s+|\\[,;:! ]|\\(?:left|right)(?=[()\[\]])|\\(?:cdot|times|frac|dfrac|tfrac|sqrt|pi)(?![A-Za-z])"
    r"|\d+(?:\.\d+)?|\.\d+|[A-Za-z]|[-+*/^!()\[\]{}]"
)
_SKIP = re.compile(r"\s+|\\[,;:! ]|\\left|\\right")
_CONSTANT_LETTERS = frozenset("eEiI")  # math-verify may read these as e and the imaginary unit


def _tokenize(text: str) -> list[str] | None:
    tokens, position = [], 0
    while position < len(text):
        found = _TOKEN.match(text, position)
        if found is None:
            return None
        token = found.group()
        position = found.end()
        if _SKIP.fullmatch(token):
            continue
        if token in ("\\cdot", "\\times"):
            token = "*"
        elif token in ("\\dfrac", "\\tfrac"):
            token = "\\frac"
        elif token in _CONSTANT_LETTERS:
            return None
        tokens.append(token)
    return tokens


# A node is a tuple: ("num", Fraction, text), ("var", name), ("pi",), ("neg", a), ("add", a, b),
# ("sub", a, b), ("mul", a, b), ("div", a, b), ("pow", a, b), ("fact", a), ("sqrt", a),
# ("root", index, a) for \sqrt[index]{a}.
Node = tuple


class _Parser:
    def __init__(self, tokens: list[str]) -> None:
        self.tokens, self.position, self.depth = tokens, 0, 0

    def peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise ValueError(f"expected {expected!r}, got {token!r}")
        self.position += 1
        return token

    def expression(self) -> Node:
        self.depth += 1
        if self.depth > _MAX_PARSE_DEPTH:
            raise ValueError("nested too deep")
        node = self.term()
        while self.peek() in ("+", "-"):
            operator = self.take()
            node = ("add" if operator == "+" else "sub", node, self.term())
        self.depth -= 1
        return node

    def term(self) -> Node:
        node = self.unary()
        while True:
            token = self.peek()
            if token in ("*", "/"):
                self.take()
                node = ("mul" if token == "*" else "div", node, self.unary())
            elif token == "(" and node[0] == "var":
                raise ValueError("f(x) may be a function")
            elif token in ("(", "\\frac", "\\sqrt", "\\pi"):
                node = ("mul", node, self.postfix())  # 2(3), 2\sqrt{3}, 2\pi (not 2{3}: 23)
            elif token is not None and token.isalpha() and not _is_number(token):
                node = ("mul", node, self.postfix())  # 2x, xy
            else:
                return node

    def unary(self) -> Node:
        if self.peek() == "-":
            self.take()
            return ("neg", self.unary())
        if self.peek() == "+":
            self.take()
            return self.unary()
        return self.postfix()

    def postfix(self) -> Node:
        node = self.primary()
        while self.peek() in ("^", "!"):
            if self.take() == "!":
                node = ("fact", node)
                continue
            token = self.peek()
            if token is not None and _is_number(token) and len(token) > 1:
                raise ValueError("an unbraced exponent of several digits")  # 2^10: 2^1 then 0?
            node = ("pow", node, self.primary())
            if self.peek() == "^":
                raise ValueError("a double exponent")
        return node

    def primary(self) -> Node:
        token = self.take()
        if _is_number(token):
            return ("num", Fraction(token), token)
        if token == "\\pi":
            return ("pi",)
        if token.isalpha() and len(token) == 1:
            return ("var", token)
        if token in ("(", "[", "{"):
            inner = self.expression()
            self.take({"(": ")", "[": "]", "{": "}"}[token])
            return inner
        if token == "\\frac":
            return ("div", self.braced(), self.braced())
        if token == "\\sqrt":
            if self.peek() == "[":
                self.take("[")
                index = self.expression()
                self.take("]")
                return ("root", index, self.braced())
            return ("sqrt", self.braced())
        raise ValueError(f"unexpected {token!r}")

    def braced(self) -> Node:
        self.take("{")
        inner = self.expression()
        self.take("}")
        return inner


def _is_number(token: str) -> bool:
    return token[0].isdigit() or token[0] == "."


def parse_expression(text: str) -> Node | None:
    """The expression tree of `text` in this module's small grammar, or None."""
    tokens = _tokenize(text)
    if not tokens:
        return None
    parser = _Parser(tokens)
    try:
        node = parser.expression()
    except (ValueError, ZeroDivisionError, RecursionError):
        return None
    return node if parser.position == len(tokens) else None


def _variables(node: Node) -> int:
    """How many variable occurrences `node` holds."""
    if node[0] == "var":
        return 1
    if node[0] in ("num", "pi"):
        return 0
    return sum(_variables(child) for child in node[1:])


def _has(node: Node, kinds: tuple[str, ...]) -> bool:
    if node[0] in kinds:
        return True
    if node[0] in ("num", "var", "pi"):
        return False
    return any(_has(child, kinds) for child in node[1:])


# ------------------------------------------------------------------------- exact values


def _small(value: Fraction) -> Fraction:
    if value.numerator.bit_length() > _MAX_EXACT_BITS or value.denominator.bit_length() > (
        _MAX_EXACT_BITS
    ):
        raise OverflowError
    return value


def _exact(node: Node) -> Fraction:
    kind = node[0]
    if kind == "num":
        return node[1]
    if kind == "neg":
        return -_exact(node[1])
    if kind in ("add", "sub", "mul", "div"):
        left, right = _exact(node[1]), _exact(node[2])
        if kind == "add":
            return _small(left + right)
        if kind == "sub":
            return _small(left - right)
        if kind == "mul":
            return _small(left * right)
        if right == 0:
            raise ValueError("division by zero")
        return _small(left / right)
    if kind == "pow":
        base, exponent = _exact(node[1]), _exact(node[2])
        if exponent.denominator != 1 or (base == 0 and exponent <= 0):
            raise ValueError("not a rational power")
        size = max(base.numerator.bit_length(), base.denominator.bit_length())
        if size * abs(exponent.numerator) > _MAX_EXACT_BITS:
            raise OverflowError
        return base**exponent.numerator
    if kind == "fact":
        value = _exact(node[1])
        if value.denominator != 1 or not 0 <= value <= _MAX_FACTORIAL:
            raise ValueError("not a small factorial")
        return Fraction(math.factorial(int(value)))
    if kind == "sqrt":
        value = _exact(node[1])
        if value < 0:
            raise ValueError("not real")
        top, bottom = math.isqrt(value.numerator), math.isqrt(value.denominator)
        if top * top != value.numerator or bottom * bottom != value.denominator:
            raise ValueError("irrational")
        return Fraction(top, bottom)
    raise ValueError(f"no exact value for {kind}")


def exact_value(node: Node) -> Fraction | None:
    """The exact rational value of an expression tree, or None (variables, pi, irrational roots,
    division by zero, numbers over 4096 bits)."""
    try:
        return _exact(node)
    except (ValueError, OverflowError, ZeroDivisionError, RecursionError):
        return None


# ------------------------------------------------------------------------- magnitudes


def _log10(value: Fraction) -> float:
    if value == 0:
        return -math.inf
    value = abs(value)
    return math.log10(value.numerator) - math.log10(value.denominator)


def log10_lower(node: Node) -> float | None:
    """A lower bound on ``log10(|value|)`` of a tree without variables (``-inf`` when the value
    may be 0), or None. Sums of non-negative terms are at least their largest term; ``a - b``
    is at least ``0.9 |a|`` when ``|a| >= 10 |b|``; powers, factorials and roots of large
    values are bounded below without building them."""
    if _variables(node):
        return None
    try:
        return _lower(node)
    except (ValueError, OverflowError, RecursionError):
        return None


_MARGIN = math.log10(0.9)


def _lower(node: Node) -> float:
    kind = node[0]
    if kind == "num":
        return _log10(node[1])
    if kind == "pi":
        return 0.497  # log10(pi) = 0.49715
    if kind == "neg":
        return _lower(node[1])
    if kind in ("add", "sub"):
        if kind == "add" and _nonnegative(node[1]) and _nonnegative(node[2]):
            return max(_lower(node[1]), _lower(node[2]))
        for big, small in ((node[1], node[2]), (node[2], node[1])):
            low, high = _lower(big), log10_upper(small)
            if high is not None and low > high + 1:
                return low + _MARGIN  # |a +- b| >= |a| - |b| >= 0.9 |a|
        return -math.inf
    if kind == "mul":
        left, right = _lower(node[1]), _lower(node[2])
        return -math.inf if -math.inf in (left, right) else left + right
    if kind == "div":
        high = log10_upper(node[2])
        if high is None or high == -math.inf:
            raise ValueError("a denominator that may be 0")
        left = _lower(node[1])
        return left - high
    if kind == "sqrt":
        return _lower(node[1]) / 2
    if kind == "pow":
        base = _lower(node[1])
        if base <= 0 or not _nonnegative(node[2]):  # |base| <= 1 or a negative exponent
            return -math.inf
        exponent = _lower(node[2])
        if exponent == -math.inf:
            return 0.0  # the exponent may be 0: the power is at least 1 (the base is > 1)
        if exponent > 300:
            return math.inf
        return base * 10.0**exponent
    if kind == "fact":
        if not _whole(node[1]):
            raise ValueError("factorial of a fraction")
        inner = _lower(node[1])
        if inner > 300:
            return math.inf
        count = 10.0**inner
        # n! >= (n / e)^n
        return count * (math.log10(count) - _LOG10_E) if count > math.e else 0.0
    raise ValueError(f"no lower bound for {kind}")


def _nonnegative(node: Node) -> bool:
    """Whether the tree's value is real and at least 0, read from its shape."""
    kind = node[0]
    if kind in ("num", "pi", "fact"):
        return True
    if kind in ("add", "mul", "div"):
        return _nonnegative(node[1]) and _nonnegative(node[2])
    if kind in ("sqrt", "pow"):
        return _nonnegative(node[1])
    return False


def _whole(node: Node) -> bool:
    if node[0] == "num":
        return node[1].denominator == 1
    if node[0] in ("add", "mul", "pow", "fact"):
        return all(_whole(child) for child in node[1:])
    return False


def log10_upper(node: Node) -> float | None:
    """An upper bound on ``log10(|value|)``, reading variables as 0 (see the module docstring:
    only for polynomials in the variables), or None."""
    try:
        return _upper(node)
    except (ValueError, OverflowError, RecursionError):
        return None


def _upper(node: Node) -> float:
    kind = node[0]
    if kind == "num":
        return _log10(node[1])
    if kind == "var":
        return -math.inf
    if kind == "pi":
        return math.log10(math.pi)
    if kind == "neg":
        return _upper(node[1])
    if kind in ("add", "sub"):
        return max(_upper(node[1]), _upper(node[2])) + math.log10(2)
    if kind == "mul":
        left, right = _upper(node[1]), _upper(node[2])
        return -math.inf if -math.inf in (left, right) else left + right
    if kind == "div":
        if _variables(node[2]):
            raise ValueError("not a polynomial")
        bottom = log10_lower(node[2])
        if bottom is None or bottom == -math.inf:
            exact = exact_value(node[2])
            if exact is None or exact == 0:
                raise ValueError("no lower bound for the denominator")
            bottom = _log10(exact)
        return _upper(node[1]) - bottom
    if kind == "sqrt":
        if _variables(node[1]):
            raise ValueError("not a polynomial")
        return _upper(node[1]) / 2
    if kind == "pow":
        exponent = exact_value(node[2])
        if exponent is None or exponent.denominator != 1 or exponent < 0:
            raise ValueError("not a whole power")
        if exponent == 0:
            return 0.0
        return _upper(node[1]) * float(exponent)
    if kind == "fact":
        value = exact_value(node[1])
        if value is None or value.denominator != 1 or not 0 <= value <= 10**6:
            raise ValueError("no upper bound for this factorial")
        return math.lgamma(int(value) + 1) / math.log(10)
    raise ValueError(f"no upper bound for {kind}")


# ------------------------------------------------------------------------- intervals


def _interval(node: Node, zero_variables: bool) -> Any:
    """An mpmath interval enclosing the value of `node` (variables read as 0 when
    `zero_variables`); raises ValueError where it cannot give one."""
    from mpmath import iv

    kind = node[0]
    if kind == "num":
        return iv.mpf(node[1].numerator) / iv.mpf(node[1].denominator)
    if kind == "pi":
        return iv.pi
    if kind == "var":
        if not zero_variables:
            raise ValueError("a variable")
        return iv.mpf(0)
    if kind == "neg":
        return -_interval(node[1], zero_variables)
    if kind in ("add", "sub", "mul", "div"):
        left, right = _interval(node[1], zero_variables), _interval(node[2], zero_variables)
        if kind == "add":
            return left + right
        if kind == "sub":
            return left - right
        if kind == "mul":
            return left * right
        if right.a <= 0 <= right.b:
            raise ValueError("a denominator that may be 0")
        return left / right
    if kind in ("sqrt", "root"):
        index = Fraction(2) if kind == "sqrt" else exact_value(node[1])
        inner = _interval(node[-1], zero_variables)
        if index is None or index.denominator != 1 or not 2 <= index <= 1000 or inner.a < 0:
            raise ValueError("not a real root")
        return inner ** (iv.mpf(1) / int(index))
    if kind == "pow":
        exponent = exact_value(node[2])
        if exponent is None or exponent.denominator != 1:
            raise ValueError("not a whole power")
        base = _interval(node[1], zero_variables)
        if exponent < 0:
            if base.a <= 0 <= base.b:
                raise ValueError("a power of 0 below 0")
            return 1 / base ** int(-exponent)
        return base ** int(exponent)
    if kind == "fact":
        value = exact_value(node)
        if value is None:
            raise ValueError("not a small factorial")
        return iv.mpf(value.numerator)
    raise ValueError(f"no interval for {kind}")


def _intervals_apart(first: Any, second: Any, float_rounding: int) -> bool:
    """Whether every value of one interval is further from every value of the other than
    math-verify's rounding can bridge (see `_numbers_differ`)."""
    from mpmath import mpf

    low, high = (mpf(v) for v in first._mpi_)
    other_low, other_high = (mpf(v) for v in second._mpi_)
    gap = max(low - other_high, other_low - high)
    scale = max(abs(low), abs(high), abs(other_low), abs(other_high))
    if not (gap > 0 and scale < mpf("inf")):
        return False
    return gap > max(mpf(2) / mpf(10) ** float_rounding, mpf("1e-9"), scale * mpf("1e-9"))


def _apart(tree: Node, gold: Node, float_rounding: int) -> bool:
    """Whether the constant `tree` provably differs from `gold`, a constant or a polynomial
    (read at 0: a polynomial equal to a constant equals it there), by interval arithmetic."""
    if _variables(tree) or (_variables(gold) and log10_upper(gold) is None):
        return False
    try:
        first, second = _interval(tree, False), _interval(gold, True)
    except (ValueError, ZeroDivisionError, ArithmeticError, OverflowError):
        return False
    return _intervals_apart(first, second, float_rounding)


# ------------------------------------------------------------------------- huge powers


def _linear(node: Node) -> dict[str, Fraction] | None:
    """``{variable: coefficient, "": constant}`` of a linear expression, or None."""
    kind = node[0]
    if kind == "num":
        return {"": node[1]}
    if kind == "var":
        return {node[1]: Fraction(1)}
    if kind == "neg":
        inner = _linear(node[1])
        return None if inner is None else {k: -v for k, v in inner.items()}
    if kind in ("add", "sub"):
        left, right = _linear(node[1]), _linear(node[2])
        if left is None or right is None:
            return None
        sign = 1 if kind == "add" else -1
        total = dict(left)
        for key, value in right.items():
            total[key] = total.get(key, Fraction(0)) + sign * value
        return total
    if kind == "mul":  # a number times a variable: 2x
        left, right = _linear(node[1]), _linear(node[2])
        if left is None or right is None:
            return None
        for constant, other in ((left, right), (right, left)):
            if set(constant) == {""}:
                return {k: constant[""] * v for k, v in other.items()}
        return None
    return None


def _rational_size(node: Node) -> int | None:
    """A bound ``s`` such that `node` is ``N / D`` with polynomials of degree at most ``s`` in
    its variables, or None (a root or factorial of a variable, a power that is not a whole
    number)."""
    kind = node[0]
    if kind == "var":
        return 1
    if not _variables(node):
        return 0
    if kind == "neg":
        return _rational_size(node[1])
    if kind in ("add", "sub", "mul", "div"):
        left, right = _rational_size(node[1]), _rational_size(node[2])
        return None if left is None or right is None else left + right
    if kind == "pow":
        exponent = exact_value(node[2])
        base = _rational_size(node[1])
        if exponent is None or exponent.denominator != 1 or base is None:
            return None
        return base * abs(exponent.numerator)
    return None


def _huge_power(node: Node) -> tuple[dict[str, Fraction], int] | None:
    """(the linear base without zero terms, the exponent) of ``(a + b x)^{E}`` with a
    non-constant base and a whole ``E >= MIN_HUGE_DEGREE``, else None."""
    if node[0] != "pow" or node[2][0] != "num":
        return None
    exponent = node[2][1]
    if exponent.denominator != 1 or exponent < MIN_HUGE_DEGREE:
        return None
    base = _linear(node[1])
    if base is None:
        return None
    base = {k: v for k, v in base.items() if v != 0}
    if not any(key for key in base):
        return None
    return base, int(exponent)


# ------------------------------------------------------------------------- the verdict


@dataclass(frozen=True)
class Structural:
    """What the structural checks found.

    Attributes:
        verdict: True (equal), False (different) or None (no cheap verdict: ask math-verify).
        reason: why, when `verdict` is not None.
        answer: the answer with redundant brackets peeled, for the checks that follow.
    """

    verdict: bool | None
    reason: str
    answer: str


def looks_hostile(text: str) -> bool:
    """Whether an answer is worth the structural checks: deep nesting, a power, a factorial, a
    long digit run or a long text."""
    return (
        len(text) >= HOSTILE_CHARS
        or "^" in text
        or "!" in text.replace("\\!", "")
        or re.search(rf"\d{{{HOSTILE_DIGITS}}}", text) is not None
        or nesting_depth(text) >= HOSTILE_DEPTH
    )


def _numbers_differ(first: Fraction, second: Fraction, float_rounding: int) -> bool:
    """Whether two exact values are further apart than math-verify's rounding (its
    ``float_rounding`` decimal places, and 1e-9 relative) can bridge."""
    gap = abs(first - second)
    scale = max(abs(first), abs(second))
    return gap > max(Fraction(2, 10**float_rounding), Fraction(1, 10**9), scale / 10**9)


def _plain_value(reference: str) -> bool:
    """Whether a reference is a number or an expression of this module's grammar."""
    if len(reference) > MAX_PARSE_CHARS:
        return False
    try:
        return parse_expression(reference) is not None or parse_number(reference) is not None
    except RecursionError:
        return False


def _core_of(text: str) -> str:
    """`text` without any brackets (``{{}}`` -> ``""``), for the empty-answer check."""
    return re.sub(r"\\left|\\right|[()\[\]{}\s]", "", text) if len(text) < 100_000 else text


def _round_imbalance(text: str) -> int:
    """Round and square openers minus closers (``\\left(`` and ``\\right)`` included)."""
    gap = 0
    for token, _start, _end in _bracket_tokens(text):
        if token != "{" and token in _OPENERS:
            gap += 1
        elif token != "}" and token in _CLOSERS:
            gap -= 1
    return gap


def _same_power(
    first: tuple[dict[str, Fraction], int], second: tuple[dict[str, Fraction], int]
) -> bool:
    """Whether ``L1^{E1}`` and ``L2^{E2}`` (non-constant linear bases) are one polynomial: the
    same degree, and bases equal or (for an even degree) opposite; non-proportional linear forms
    give different polynomials (unique factorisation), and ``(aL)^E = L^E`` needs ``a^E = 1``."""
    (base, degree), (other, other_degree) = first, second
    if degree != other_degree:
        return False
    return base == other or (degree % 2 == 0 and base == {k: -v for k, v in other.items()})


def structural_verdict(answer: str, reference: str, float_rounding: int = 6) -> Structural:
    """The cheap verdict on `answer` against `reference`, or ``verdict=None``.

    Examples:
        >>> structural_verdict("(" * 100 + "7" + ")" * 100, "7").verdict
        True
        >>> structural_verdict("10^{10^{10}}", "18").verdict
        False
        >>> structural_verdict("x^2", "18").verdict is None
        True
    """
    if answer.split() == reference.split():
        return Structural(True, "correct: the same text", answer)
    stripped, layers = strip_redundant(answer)
    reference_core, _ = strip_redundant(reference)
    if layers and " ".join(stripped.split()) == " ".join(reference_core.split()):
        return Structural(True, f"correct: the same expression inside {layers} brackets", stripped)
    if layers == 0 and not _core_of(answer) and _plain_value(reference_core):
        # Not against a set: {} is the empty set to math-verify.
        return Structural(False, "wrong: only empty brackets", answer)
    gap = _round_imbalance(answer)
    if abs(gap) >= MIN_IMBALANCE:
        return Structural(False, f"wrong: {abs(gap)} unmatched round or square brackets", answer)
    unsure = Structural(None, "", stripped)
    if max(len(stripped), len(reference_core)) > MAX_PARSE_CHARS or not looks_hostile(answer):
        return unsure
    try:
        found = _decide(stripped, reference_core, float_rounding)
    except RecursionError:
        return unsure
    return unsure if found is None else Structural(found[0], found[1], stripped)


def _decide(answer: str, reference: str, float_rounding: int) -> tuple[bool, str] | None:
    tree = parse_expression(answer)
    if tree is None:
        return None
    gold = parse_expression(reference)
    if gold is None:
        number = parse_number(reference)  # "\\$2,125", "50%": either reading of the percent
        if number is not None:
            bound = max(abs(number.value), abs(number.actual))
            return _differ(tree, ("num", bound, reference))
        parts = _reference_parts(reference)
        if parts is not None and all(_differ(tree, part) for part in parts):
            return False, f"wrong: one value against {len(parts)}, none of them equal to it"
        return None
    value, expected = exact_value(tree), exact_value(gold)
    if value is not None and expected is not None:
        if value == expected:
            return True, "correct: the same exact value"
        if _numbers_differ(value, expected, float_rounding):
            return False, "wrong: a different exact value"
        return None
    if _apart(tree, gold, float_rounding):
        return False, "wrong: a different value (interval arithmetic)"
    power, other = _huge_power(tree), _huge_power(gold)
    if power is not None and other is not None:
        if _same_power(power, other):
            return True, f"correct: the same polynomial of degree {power[1]}"
        return False, "wrong: a different huge power"
    return _differ(tree, gold)


def _differ(tree: Node, gold: Node | None) -> tuple[bool, str] | None:
    """``(False, why)`` when a huge `tree` provably differs from `gold` (None: +-infinity, which
    no number equals), else None."""
    lower = log10_lower(tree)
    if gold is None:
        # A tree of + * ^ ! over numbers, or a polynomial, is finite.
        if (lower is not None and lower >= MIN_HUGE_LOG10) or _huge_power(tree) is not None:
            return False, "wrong: a finite value is not infinite"
        return None
    if lower is not None and lower >= MIN_HUGE_LOG10:
        upper = log10_upper(gold)
        if upper is not None and lower > upper + 1:
            return False, (
                f"wrong: the answer is over 10^{_short(lower)}, the reference under "
                f"10^{_short(upper + 1)}"
            )
    power = _huge_power(tree)
    if power is not None:
        size = _rational_size(gold)
        if size is not None and size < power[1]:
            return False, (
                f"wrong: a polynomial of degree {power[1]} against a reference of lower degree"
            )
    return None


_OUTER_OPEN = re.compile(r"\s*(?:\\left\s*)?(?:\(|\[|\\\{)")
_OUTER_CLOSE = re.compile(r"(?:\\right\s*)?(?:\)|\]|\\\})\s*$")
_INFINITY = re.compile(r"\s*[-+]?\s*\\infty\s*")


def _reference_parts(reference: str) -> list[Node | None] | None:
    """The parts of a reference of two or more values (a tuple, interval, set or list:
    ``(1, 2)``, ``[0, \\infty)``), each parsed (None for +-infinity), or None.

    A single value equals none of these to math-verify unless it equals one of the parts (a set
    ``{a}``, a degenerate interval ``[a, a]``), so an answer that differs from every part is
    wrong."""
    opening = _OUTER_OPEN.match(reference)
    closing = _OUTER_CLOSE.search(reference)
    start = opening.end() if opening else 0
    end = closing.start() if closing else len(reference)
    inner = reference[start:end]
    parts, depth, begin = [], 0, 0
    for index, char in enumerate(inner):
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(inner[begin:index])
            begin = index + 1
    parts.append(inner[begin:])
    if len(parts) < 2:
        return None
    parsed: list[Node | None] = []
    for part in parts:
        if _INFINITY.fullmatch(part):
            parsed.append(None)
            continue
        tree = parse_expression(part)
        if tree is None:
            return None
        parsed.append(tree)
    return parsed


def _short(value: float) -> str:
    return "inf" if value == math.inf else f"{value:.3g}"
