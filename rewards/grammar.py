"""The small expression grammar of `rewards.structure` and `rewards.expression`.

`parse_expression` reads numbers, single-letter variables other than ``e`` and ``i``, ``\\pi``,
``+ - * / ^ !``, ``\\cdot``, ``\\times``, ``\\frac``, ``\\sqrt`` and brackets into a tree of
tuples (`Node`); anything else gives None. With ``euler=True`` it also reads ``e`` (not right
after a digit: ``1e5``) and ``\\exp`` as Euler's number, for the magnitude bounds only. Parsing is
bounded in time by the text's length and in depth by `_MAX_PARSE_DEPTH`.
"""

from __future__ import annotations

import re
from fractions import Fraction

__all__ = ["Node", "count_variables", "parse_expression"]

_MAX_PARSE_DEPTH = 60  # bracket levels the recursive parser follows before giving up

_TOKEN = re.compile(
    r"\s+|\\[,;:! ]|\\(?:left|right)(?=[()\[\]])"
    r"|\\(?:cdot|times|frac|dfrac|tfrac|sqrt|pi|exp)(?![A-Za-z])"
    r"|\d+(?:\.\d+)?|\.\d+|[A-Za-z]|[-+*/^!()\[\]{}]"
)
_UPRIGHT_E = re.compile(r"\\(?:mathrm|operatorname|text|rm)\s*\{\s*e\s*\}")
_SKIP = re.compile(r"\s+|\\[,;:! ]|\\left|\\right")
_CONSTANT_LETTERS = frozenset("eEiI")  # math-verify may read these as e and the imaginary unit


def _tokenize(text: str, euler: bool = False) -> list[str] | None:
    """`text`'s tokens (``\\cdot`` read as ``*``, spacing dropped), or None where a character or
    constant is outside the grammar."""
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
    """A recursive-descent parser over tokens: expression, term, unary, postfix, primary."""

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
    """Whether `token` is a number."""
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


def count_variables(node: Node) -> int:
    """How many variable occurrences `node` holds."""
    if node[0] == "var":
        return 1
    if node[0] in ("num", "pi"):
        return 0
    return sum(count_variables(child) for child in node[1:])
