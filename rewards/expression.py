"""The small expression grammar of `rewards.structure`, and what it computes without sympy.

`parse_expression` reads numbers, single-letter variables other than ``e`` and ``i``, ``\\pi``,
``+ - * / ^ !``, ``\\cdot``, ``\\times``, ``\\frac``, ``\\sqrt`` and brackets into a tree of
tuples (`Node`); anything else gives None. With ``euler=True`` it also reads ``e`` (not right
after a digit: ``1e5``) and ``\\exp`` as Euler's number, for the magnitude bounds only. On such trees: `exact_value` (exact rationals, bounded
in size), `log10_lower` and `log10_upper` (bounds on magnitude that never build a huge number),
`apart` (whether two trees' mpmath intervals, roots and pi included and variables read at zero,
lie further apart than math-verify's rounding), and `huge_power` and `rational_size` (the degree
of ``(a + b x)^E`` against a rational reference).
Every function is bounded in time by the tree's size; none calls math-verify or sympy.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Any

__all__ = [
    "MIN_HUGE_DEGREE",
    "Node",
    "apart",
    "exact_value",
    "huge_power",
    "log10_lower",
    "log10_upper",
    "parse_expression",
    "rational_size",
]

MIN_HUGE_DEGREE = 1000
"""Rule 4 applies to powers with at least this exponent (smaller ones math-verify expands fast)."""
_MAX_PARSE_DEPTH = 60  # bracket levels the recursive parser follows before giving up
_MAX_EXACT_BITS = 4096  # exact integers and fractions are kept below this size
_MAX_FACTORIAL = 300
_LOG10_E = math.log10(math.e)

# ------------------------------------------------------------------------- a small grammar

_TOKEN = re.compile(
    r"\s+|\\[,;:! ]|\\(?:left|right)(?=[()\[\]])"
    r"|\\(?:cdot|times|frac|dfrac|tfrac|sqrt|pi|exp)(?![A-Za-z])"
    r"|\d+(?:\.\d+)?|\.\d+|[A-Za-z]|[-+*/^!()\[\]{}]"
)
_UPRIGHT_E = re.compile(r"\\(?:mathrm|operatorname|text|rm)\s*\{\s*e\s*\}")
_SKIP = re.compile(r"\s+|\\[,;:! ]|\\left|\\right")
_CONSTANT_LETTERS = frozenset("eEiI")  # math-verify may read these as e and the imaginary unit


def _tokenize(text: str, euler: bool = False) -> list[str] | None:
    if euler:
        text = _UPRIGHT_E.sub("e", text)
    tokens, position = [], 0
    while position < len(text):
        found = _TOKEN.match(text, position)
        if found is None:
            return None
        token = found.group()
        start, position = position, found.end()
        if _SKIP.fullmatch(token):
            continue
        if token in ("\\cdot", "\\times"):
            token = "*"
        elif token in ("\\dfrac", "\\tfrac"):
            token = "\\frac"
        elif token == "\\exp" and not euler:
            return None
        elif token == "e" and euler:
            if start and (text[start - 1].isdigit() or text[start - 1] == "."):
                return None  # 1e5, 2.5e-3: a float to math-verify
        elif token in _CONSTANT_LETTERS:
            return None
        tokens.append(token)
    return tokens


# A node is a tuple: ("num", Fraction, text), ("var", name), ("pi",), ("neg", a), ("add", a, b),
# ("sub", a, b), ("mul", a, b), ("div", a, b), ("pow", a, b), ("fact", a), ("sqrt", a),
# ("root", index, a) for \sqrt[index]{a}; with euler=True also ("e",), and \exp(a) is ("pow", ("e",), a).
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
            elif token in ("(", "\\frac", "\\sqrt", "\\pi", "\\exp"):
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
        if token == "e":  # only tokenized with euler=True
            return ("e",)
        if token == "\\exp":
            if self.peek() not in ("(", "{"):
                raise ValueError("\\exp without brackets")
            return ("pow", ("e",), self.primary())
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


def parse_expression(text: str, euler: bool = False) -> Node | None:
    """The expression tree of `text` in this module's small grammar, or None; with `euler`,
    ``e`` and ``\\exp`` are read as Euler's number (for `log10_lower` and `log10_upper` only:
    math-verify may read ``e`` as a variable, so no other rule trusts such a tree)."""
    tokens = _tokenize(text, euler)
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
    if kind == "e":
        return 0.434  # log10(e) = 0.43429
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
    if kind in ("num", "pi", "e", "fact"):
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
    if kind == "e":
        return _LOG10_E
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

    low, high = mpf(first.a), mpf(first.b)  # the interval's endpoints
    other_low, other_high = mpf(second.a), mpf(second.b)
    gap = max(low - other_high, other_low - high)
    scale = max(abs(low), abs(high), abs(other_low), abs(other_high))
    if not (gap > 0 and scale < mpf("inf")):
        return False
    return gap > max(mpf(2) / mpf(10) ** float_rounding, mpf("1e-9"), scale * mpf("1e-9"))


def apart(tree: Node, gold: Node, float_rounding: int) -> bool:
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


def rational_size(node: Node) -> int | None:
    """A bound ``s`` such that `node` is ``N / D`` with polynomials of degree at most ``s`` in
    its variables, or None (a root or factorial of a variable, a power that is not a whole
    number)."""
    kind = node[0]
    if kind == "var":
        return 1
    if not _variables(node):
        return 0
    if kind == "neg":
        return rational_size(node[1])
    if kind in ("add", "sub", "mul", "div"):
        left, right = rational_size(node[1]), rational_size(node[2])
        return None if left is None or right is None else left + right
    if kind == "pow":
        exponent = exact_value(node[2])
        base = rational_size(node[1])
        if exponent is None or exponent.denominator != 1 or base is None:
            return None
        return base * abs(exponent.numerator)
    return None


def huge_power(node: Node) -> tuple[dict[str, Fraction], int] | None:
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
