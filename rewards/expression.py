"""What the small expression grammar's trees (`rewards.grammar`) compute without sympy.

On trees of `parse_expression`: `exact_value` (exact rationals, bounded in size), `log10_lower`
and `log10_upper` (bounds on magnitude that never build a huge number), `apart` (whether two
trees' mpmath intervals, roots and pi included and variables read at zero, lie further apart
than math-verify's rounding), and `huge_power` and `rational_size` (the degree of
``(a + b x)^E`` against a rational reference). `Node` and `parse_expression` are re-exported
from `rewards.grammar`. Every function is bounded in time by the tree's size; none calls
math-verify or sympy.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from rewards.grammar import Node, count_variables, parse_expression

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
_MAX_EXACT_BITS = 4096  # exact integers and fractions are kept below this size
_MAX_FACTORIAL = 300
_LOG10_E = math.log10(math.e)

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
    if count_variables(node):
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
        if count_variables(node[2]):
            raise ValueError("not a polynomial")
        bottom = log10_lower(node[2])
        if bottom is None or bottom == -math.inf:
            exact = exact_value(node[2])
            if exact is None or exact == 0:
                raise ValueError("no lower bound for the denominator")
            bottom = _log10(exact)
        return _upper(node[1]) - bottom
    if kind == "sqrt":
        if count_variables(node[1]):
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
    if count_variables(tree) or (count_variables(gold) and log10_upper(gold) is None):
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
    if not count_variables(node):
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
