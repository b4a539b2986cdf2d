"""Answers too costly for a symbolic check: refused before math-verify sees them.

A rollout batch waits for its slowest verification, and sympy spends any budget it is given on
some short, well-formed answers a hostile model writes. `costly_reason` names such an answer's
costly part, reading the LaTeX text alone (no sympy), in well under a millisecond:

1. A binomial coefficient (``\\binom``, ``\\dbinom``, ``\\tbinom``, ``{n \\choose k}``) of
   numbers whose value has over `MAX_BINOMIAL_DIGITS` digits (``C(n, k) >= (n/m)^m`` with
   ``m = min(k, n - k)``), or of an argument that alone has that many:
   ``\\binom{10^{9}}{5\\cdot 10^8}``, ``\\binom{123456789}{98765432}``, ``\\binom{(10^{10})!}{3}``,
   ``\\dbinom{1000!}{10^{15}}``.
2. A sum or product (``\\sum``, ``\\prod``) with a bound over `MAX_BOUND` in absolute value:
   ``\\sum_{k=1}^{10^{12}} k^2``, ``\\prod_{k=1}^{10^9} (1+\\frac{1}{k^2})``.
3. An integral, limit, sum, product or derivative (``\\int``, ``\\iint``, ``\\oint``, ``\\lim``,
   ``\\frac{d}{dx}``, ``\\frac{\\partial}{\\partial x}``) of a tower of powers: an exponent with a
   variable, over an exponent with a variable (`variable_exponent_depth` at least
   `MAX_CALCULUS_TOWER` + 1): ``\\int x^{x^{x^{x}}} dx``, ``\\int_0^1 e^{x^{x^{x}}}dx``,
   ``\\lim_{x\\to 0} x^{x^{x}}``. ``\\int e^{x^2} dx`` and ``\\int x^x dx`` are not towers here.
4. ``\\Gamma`` of a number over `MAX_GAMMA_ARGUMENT`: ``\\Gamma(10^{12})``, ``\\Gamma(\\Gamma(100))``;
   any other function (``\\zeta``, ``\\sin``, ``\\log``, ...) of a number of over
   `MAX_CONSTANT_DIGITS` digits: ``\\zeta((10^{10})!)``.
5. A constant of over `MAX_CONSTANT_DIGITS` digits, as a matrix entry or a part of a tuple, set
   or interval, or whole when it needs ``e`` or ``\\exp`` read as Euler's number (a whole answer
   in `rewards.expression`'s plain grammar is left to rule 3 of `rewards.structure`):
   ``e^{e^{e^{e^{e}}}}``, ``\\begin{pmatrix} 2^{2^{2^{20}}} \\end{pmatrix}``.

Every limit sits where math-verify already needs about a second or more (measured with
math-verify 0.9 and sympy 1.14; ``\\binom{100000}{50000}``: 0.5 s, ``\\sum_{n=1}^{10^4}
\\frac{1}{n}``: 1.7 s, ``\\Gamma(10^6)``: over 3 s), so a refused answer is one whose symbolic
check would run out of budget anyway: it scores 0 either way, only sooner. `rewards.structure`
refuses such an answer only when the reference is not costly itself (an answer in the
reference's own notation is still compared). Anything the rules cannot read is left to
math-verify and its budget (`rewards.symbolic`).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

from rewards.expression import exact_value, log10_lower
from rewards.extract import brace_end, top_level_parts
from rewards.grammar import Node, parse_expression

__all__ = [
    "MAX_BINOMIAL_DIGITS",
    "MAX_BOUND",
    "MAX_CALCULUS_TOWER",
    "MAX_CONSTANT_DIGITS",
    "MAX_GAMMA_ARGUMENT",
    "REFUSED",
    "costly_reason",
    "variable_exponent_depth",
]

REFUSED = "refused: too costly for a symbolic check"
"""How the reason of a refused answer starts (then a colon and the costly part)."""
MAX_BOUND = 10**4
"""Sums and products with a bound over this (in absolute value) are refused."""
MAX_BINOMIAL_DIGITS = 10**4
"""Binomial coefficients of over this many digits are refused."""
MAX_CALCULUS_TOWER = 1
"""Calculus operators over a variable exponent depth above this are refused."""
MAX_GAMMA_ARGUMENT = 10**5
"""``\\Gamma`` of a number over this is refused."""
MAX_CONSTANT_DIGITS = 10**6
"""Constants (and matrix entries, tuple parts) of over this many digits are refused."""
MAX_CHARS = 2000
"""Longer texts are not read (the `math` verifier refuses answers over 1000 characters)."""
_MAX_DEPTH = 64  # brace levels followed before giving up

_CALCULUS = re.compile(
    r"\\(?:int|iint|iiint|oint|intop|smallint|sum|prod|lim|limsup|liminf)(?![A-Za-z])"
    r"|\\[dt]?frac\s*\{\s*(?:d|\\partial|\\mathrm\s*\{\s*d\s*\})\s*(?:\^|\})"
)
_OPERATOR_NAMES = {
    "int": "an integral",
    "iint": "an integral",
    "iiint": "an integral",
    "oint": "an integral",
    "intop": "an integral",
    "smallint": "an integral",
    "sum": "a sum",
    "prod": "a product",
    "lim": "a limit",
    "limsup": "a limit",
    "liminf": "a limit",
}
_SUM = re.compile(r"\\(sum|prod)(?![A-Za-z])")
_BINOM = re.compile(r"\\[dt]?binom(?![A-Za-z])")
_CHOOSE = re.compile(r"\\choose(?![A-Za-z])")
_GAMMA = re.compile(r"\\Gamma(?![A-Za-z])")
_FUNCTION = re.compile(
    r"\\(Gamma|zeta|sinh|cosh|tanh|sin|cos|tan|cot|sec|csc|arcsin|arccos|arctan|log|ln|lg|exp"
    r"|psi|erf)(?![A-Za-z])|\\operatorname\s*\{\s*([A-Za-z]+)\s*\}"
)
_ENVIRONMENT = re.compile(r"\\begin\s*\{([A-Za-z*]+)\}(.*?)\\end\s*\{\1\}", re.DOTALL)
_COMMAND = re.compile(r"\\[A-Za-z]+")
_LIMITS = re.compile(r"\s*\\(?:no)?limits(?![A-Za-z])|\s+")


# ------------------------------------------------------------------------- reading groups


def _group(text: str, index: int) -> tuple[str, int] | None:
    """The argument that starts at `index` (spaces skipped): a brace group's content, a
    command, or one character; and the index after it. None at the end or on a brace that is
    never closed."""
    while index < len(text) and text[index].isspace():
        index += 1
    if index >= len(text):
        return None
    if text[index] == "{":
        end, closed = brace_end(text, index)
        return (text[index + 1 : end - 1], end) if closed else None
    command = _COMMAND.match(text, index)
    if command is not None:
        return command.group(), command.end()
    return text[index], index + 1


def _bracketed(text: str, index: int) -> tuple[str, int] | None:
    """The argument in ``(...)``, ``\\left(...\\right)``, ``[...]`` or ``{...}`` at `index`."""
    while index < len(text) and text[index].isspace():
        index += 1
    if text.startswith("\\left", index):
        index += len("\\left")
    if index >= len(text) or text[index] not in "([":
        return _group(text, index) if index < len(text) and text[index] == "{" else None
    depth = 0
    for position in range(index, len(text)):
        if text[position] in "([{":
            depth += 1
        elif text[position] in ")]}":
            depth -= 1
            if depth == 0:
                inner = text[index + 1 : position]
                return inner.removesuffix("\\right").rstrip(), position + 1
    return None


def _scripts(text: str, index: int) -> tuple[dict[str, str], int]:
    """The sub- and superscript (``_``, ``^``) after a big operator, in either order."""
    found: dict[str, str] = {}
    while index < len(text):
        skipped = _LIMITS.match(text, index)
        if skipped is not None and skipped.end() > index:
            index = skipped.end()
            continue
        if text[index] not in "_^" or text[index] in found:
            break
        argument = _group(text, index + 1)
        if argument is None:
            break
        found[text[index]], index = argument
    return found, index


def _has_variable(text: str) -> bool:
    """Whether `text` holds a letter outside a command name, other than ``e``."""
    return re.search(r"[A-DF-Za-df-z]", _COMMAND.sub(" ", text)) is not None


def variable_exponent_depth(text: str, level: int = 0) -> int:
    """How many exponents with a variable are nested in `text`: 1 for ``x^{x}`` and
    ``e^{x^2}``, 2 for ``x^{x^{x}}`` and ``e^{e^{x}}``, 3 for ``e^{x^{x^{x}}}``; 0 for constant
    exponents (``x^2``, ``2^{2^{10}}``).

    Examples:
        >>> variable_exponent_depth("\\\\int x^{x^{x^{x}}} dx")
        3
        >>> variable_exponent_depth("\\\\frac{d}{dx} e^{x^2}")
        1
    """
    if level > _MAX_DEPTH:
        return 0
    deepest, index = 0, 0
    while index < len(text):
        char = text[index]
        if char == "\\":
            index += 2
            continue
        if char == "^":
            argument = _group(text, index + 1)
            if argument is None:
                return deepest
            exponent, index = argument
            own = 1 if _has_variable(exponent) else 0
            deepest = max(deepest, own + variable_exponent_depth(exponent, level + 1))
            continue
        if char == "{":
            argument = _group(text, index)
            if argument is None:
                return deepest
            inner, index = argument
            deepest = max(deepest, variable_exponent_depth(inner, level + 1))
            continue
        index += 1
    return deepest


# ------------------------------------------------------------------------- magnitudes


def _constant(text: str) -> Node | None:
    """`text` as a tree without variables (``e`` read as Euler's number), or None."""
    for euler in (False, True):
        try:
            tree = parse_expression(text, euler=euler)
        except RecursionError:
            return None
        if tree is not None:
            return None if _has_variable_node(tree) else tree
    return None


def _has_variable_node(node: Node) -> bool:
    if node[0] == "var":
        return True
    if node[0] in ("num", "pi", "e"):
        return False
    return any(_has_variable_node(child) for child in node[1:])


def _log10_at_least(tree: Node) -> float | None:
    """A lower bound on ``log10 |value|`` of a constant tree (exact where it can be), or None."""
    value = exact_value(tree)
    if value is not None:
        return -math.inf if value == 0 else _log10(abs(value))
    try:
        return log10_lower(tree)
    except RecursionError:
        return None


def _log10(value: Fraction) -> float:
    return math.log10(value.numerator) - math.log10(value.denominator)


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 40 else text[:37] + "..."


def _log_text(digits: float) -> str:
    return "300" if digits == math.inf or digits > 1e300 else f"{math.log10(digits):.1f}"


def _digits(log10: float) -> str:
    return "over 10^300" if log10 == math.inf else f"about 10^{math.log10(log10):.1f}"


# ------------------------------------------------------------------------- the rules


def _binomial(top: str, bottom: str) -> str | None:
    n_tree, k_tree = _constant(top), _constant(bottom)
    if n_tree is None or k_tree is None:
        return None
    n, k = exact_value(n_tree), exact_value(k_tree)
    if n is None and k is not None and k.denominator == 1 and k >= 1:
        size = _log10_at_least(n_tree)  # C(n, k) >= (n / k)^k when n >= 2k
        if size is not None and size > math.log10(2 * k):
            digits = float(k) * (size - math.log10(k))
            if digits > MAX_BINOMIAL_DIGITS:
                return (
                    f"a binomial coefficient of over 10^{_log_text(digits)} digits, "
                    f"\\binom{{{_short(top)}}}{{{_short(bottom)}}}"
                )
    if n is None or k is None:
        for tree in (n_tree, k_tree):
            size = _log10_at_least(tree)
            if size is not None and size > MAX_BINOMIAL_DIGITS:
                return (
                    f"a binomial coefficient of a number of {_digits(size)} digits, "
                    f"\\binom{{{_short(top)}}}{{{_short(bottom)}}}"
                )
        return None
    if n.denominator != 1 or k.denominator != 1:
        return None
    whole, pick = int(n), int(k)
    smaller = min(pick, whole - pick)
    if whole <= 0 or smaller <= 0:
        return None
    digits = smaller * (math.log10(whole) - math.log10(smaller))  # C(n, m) >= (n / m)^m
    if digits <= MAX_BINOMIAL_DIGITS:
        return None
    return (
        f"a binomial coefficient of over 10^{_log_text(digits)} digits, "
        f"\\binom{{{_short(top)}}}{{{_short(bottom)}}}"
    )


def _binomials(text: str) -> str | None:
    for found in _BINOM.finditer(text):
        top = _group(text, found.end())
        bottom = top and _group(text, top[1])
        if top and bottom:
            reason = _binomial(top[0], bottom[0])
            if reason:
                return reason
    for found in _CHOOSE.finditer(text):
        opening = _enclosing_brace(text, found.start())
        group = (text, 0) if opening is None else _group(text, opening)  # {n \choose k}, peeled
        if group is None:
            continue
        inner = group[0]
        split = found.start() if opening is None else found.start() - opening - 1
        reason = _binomial(inner[:split], inner[split + len("\\choose") :])
        if reason:
            return reason
    return None


def _enclosing_brace(text: str, index: int) -> int | None:
    """The index of the innermost unclosed ``{`` before `index`."""
    depth = 0
    for position in range(index - 1, -1, -1):
        char = text[position]
        if position and text[position - 1] == "\\":
            continue
        if char == "}":
            depth += 1
        elif char == "{":
            if depth == 0:
                return position
            depth -= 1
    return None


def _bounds(text: str) -> str | None:
    for found in _SUM.finditer(text):
        scripts, _ = _scripts(text, found.end())
        for script in ("_", "^"):
            bound = scripts.get(script)
            if bound is None:
                continue
            value = bound.rsplit("=", 1)[-1]
            tree = _constant(value)
            size = None if tree is None else _log10_at_least(tree)
            if size is not None and size > math.log10(MAX_BOUND):
                kind = "a sum" if found.group(1) == "sum" else "a product"
                return f"{kind} with a bound of {_short(value)}, over {MAX_BOUND}"
    return None


def _calculus_tower(text: str) -> str | None:
    found = _CALCULUS.search(text)
    if found is None:
        return None
    depth = variable_exponent_depth(text)
    if depth <= MAX_CALCULUS_TOWER:
        return None
    name = found.group()[1:]
    kind = _OPERATOR_NAMES.get(name, "a derivative")
    return f"{kind} of a tower of powers, {depth} variable exponents deep"


def _gamma_tree(text: str, level: int = 0) -> Node | None:
    """`text` as a constant tree, ``\\Gamma(n)`` of a whole ``n >= 2`` read as ``(n - 1)!``."""
    text = text.strip()
    tree = _constant(text)
    if tree is not None or level > 8:
        return tree
    found = _GAMMA.match(text)
    argument = None if found is None else _bracketed(text, found.end())
    if argument is None or text[argument[1] :].strip():
        return None
    inner = _gamma_tree(argument[0], level + 1)
    value = None if inner is None else exact_value(inner)
    if value is None or value.denominator != 1 or value < 2:
        return None
    return ("fact", ("num", value - 1, str(value - 1)))


def _functions(text: str) -> str | None:
    """``\\Gamma`` of a number over `MAX_GAMMA_ARGUMENT`, or any other function (``\\zeta``,
    ``\\sin``, ``\\log``, ...) of a number of over `MAX_CONSTANT_DIGITS` digits."""
    for found in _FUNCTION.finditer(text):
        argument = _bracketed(text, found.end())
        if argument is None:
            continue
        gamma = found.group(1) == "Gamma"
        tree = _gamma_tree(argument[0]) if gamma else _constant(argument[0])
        size = None if tree is None else _log10_at_least(tree)
        if size is None:
            continue
        if gamma and size > math.log10(MAX_GAMMA_ARGUMENT):
            return f"\\Gamma of {_short(argument[0])}, over {MAX_GAMMA_ARGUMENT}"
        if size > MAX_CONSTANT_DIGITS:
            name = found.group(1) or found.group(2)
            return f"\\{name} of a number of {_digits(size)} digits, {_short(argument[0])}"
    return None


def _parts(text: str) -> list[str]:
    """The entries of every matrix environment, and the top-level parts of a tuple, set or
    interval (two or more), of `text`."""
    parts: list[str] = []
    for environment in _ENVIRONMENT.finditer(text):
        for row in environment.group(2).split("\\\\"):
            parts += row.split("&")
    inner = text.strip()
    for opening, closing in (("\\{", "\\}"), ("(", ")"), ("[", "]"), ("(", "]"), ("[", ")")):
        if inner.startswith(opening) and inner.endswith(closing):
            inner = inner[len(opening) : len(inner) - len(closing)]
            break
    pieces = top_level_parts(inner)
    if len(pieces) > 1:
        parts += pieces
    return parts


def _huge_constant(text: str) -> str | None:
    whole = text.strip()
    # A whole answer in the plain grammar is rule 3's (rewards.structure), which gives a sound
    # verdict where there is one; here only what it cannot read: e and \exp, entries, parts.
    plain = parse_expression(whole) is not None
    for part in [whole, *_parts(text)]:
        part = part.strip()
        if not part or (plain and part == whole):
            continue
        tree = _constant(part)
        size = None if tree is None else _log10_at_least(tree)
        if size is not None and size > MAX_CONSTANT_DIGITS:
            where = "a number" if part == whole else "an entry"
            return f"{where} of {_digits(size)} digits, {_short(part)}"
    return None


def costly_reason(text: str) -> str | None:
    """Why checking `text` symbolically would run out of any budget (the reason of the zero
    verdict, starting with `REFUSED`), or None. Reads only `text`: `rewards.structure` decides
    whether to refuse (not when the reference is costly too).

    Examples:
        >>> costly_reason("\\\\sum_{k=1}^{10^{12}} k^2")
        'refused: too costly for a symbolic check: a sum with a bound of 10^{12}, over 10000'
        >>> costly_reason("\\\\binom{10}{3}") is None
        True
    """
    if len(text) > MAX_CHARS or ("\\" not in text and "^" not in text):
        return None
    for rule in (_binomials, _bounds, _calculus_tower, _functions, _huge_constant):
        try:
            why = rule(text)
        except (RecursionError, ValueError, OverflowError, ZeroDivisionError):
            why = None
        if why:
            return f"{REFUSED}: {why}"
    return None
