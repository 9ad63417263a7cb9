"""Evaluate simple scalar LaTeX (numbers, + - * / ^, \\frac, \\sqrt, \\pi, one-letter variables) without sympy.

The math verifier's fast path: most final answers are such expressions, and comparing their values at a
few points takes microseconds where parsing them with sympy takes tens of milliseconds. Anything outside
this small grammar (commas, intervals, `=`, functions, `e`, `i`, subscripts, text) raises `Unsupported`
and goes to math-verify. Rational arithmetic stays exact (`Fraction`); irrational parts become floats.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

Value = Fraction | float

_TOKEN = re.compile(r"\s*(?:(\d+\.?\d*|\.\d+)|(\\[A-Za-z]+|\\[,;:! ])|([A-Za-z])|(\S))")
_SPACING = frozenset({"\\,", "\\;", "\\:", "\\!", "\\ ", "\\quad", "\\qquad"})
_MULTIPLY = frozenset({"*", "\\cdot", "\\times"})
_COMMANDS = frozenset({"\\frac", "\\dfrac", "\\tfrac", "\\sqrt", "\\pi", "\\cdot", "\\times"})
# Letters with a fixed meaning that math-verify may read differently from a variable.
_RESERVED_LETTERS = frozenset("eiEI")
# Points at which expressions with variables are compared (fixed, so results are deterministic).
_POINTS = (Fraction(7, 13), Fraction(-17, 11), Fraction(29, 10))
_MAX_EXPONENT = 256


class Unsupported(ValueError):
    """The text is outside the grammar this evaluator handles."""


_COMMAND = re.compile(r"\\[A-Za-z]+")
_WORD = re.compile(r"[A-Za-z]{3,}")
_MAX_BITS = 1 << 16
_MIXED_NUMBER = re.compile(r"\d\s*\\[dt]?frac")


def tokenize(text: str) -> list[str]:
    if _WORD.search(_COMMAND.sub(" ", text)):
        raise Unsupported("a word, not a product of variables")
    if _MIXED_NUMBER.search(text):
        raise Unsupported("2\\frac{1}{2} is a mixed number to some readers and a product to others")
    tokens: list[str] = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if not match:
            break  # trailing whitespace
        token = next(group for group in match.groups() if group is not None)
        position = match.end()
        if token in _SPACING or token in ("\\left", "\\right", "\\displaystyle"):
            continue
        if token.startswith("\\") and token not in _COMMANDS:
            raise Unsupported(f"command {token}")
        if len(token) == 1 and token.isalpha() and token in _RESERVED_LETTERS:
            raise Unsupported(f"letter {token}")
        if len(token) == 1 and not token.isalnum() and token not in "+-*/^(){}[]":
            raise Unsupported(f"symbol {token}")
        tokens.append(token)
    return tokens


def _power(base: Value, exponent: Value) -> Value:
    if isinstance(exponent, Fraction) and exponent.denominator == 1 and isinstance(base, Fraction):
        size = max(base.numerator.bit_length(), base.denominator.bit_length())
        if abs(exponent) > _MAX_EXPONENT or (base == 0 and exponent < 0) or size * abs(exponent) > _MAX_BITS:
            raise Unsupported("exponent out of range")
        return base ** int(exponent)
    result = float(base) ** float(exponent)
    if isinstance(result, complex):
        raise Unsupported("complex value")
    return result


def _sqrt(value: Value, index: int = 2) -> Value:
    if value < 0 and index % 2 == 0:
        raise Unsupported("root of a negative number")
    if isinstance(value, Fraction):
        numerator = round(abs(value.numerator) ** (1 / index))
        denominator = round(value.denominator ** (1 / index))
        if numerator**index == abs(value.numerator) and denominator**index == value.denominator:
            return Fraction(numerator if value >= 0 else -numerator, denominator)
    return math.copysign(abs(float(value)) ** (1 / index), float(value))


class _Parser:
    """Recursive descent over the tokens, evaluating as it goes for one assignment of the variables."""

    def __init__(self, tokens: list[str], variables: dict[str, Value]) -> None:
        self.tokens = tokens
        self.index = 0
        self.variables = variables

    def peek(self) -> str | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise Unsupported(f"expected {expected or 'more'}, found {token}")
        self.index += 1
        return token

    def parse(self) -> Value:
        value = self.expression()
        if self.peek() is not None:
            raise Unsupported(f"unexpected {self.peek()}")
        return value

    def expression(self) -> Value:
        value = self.term()
        while self.peek() in ("+", "-"):
            value = value + self.term() if self.take() == "+" else value - self.term()
        return value

    def term(self) -> Value:
        value = self.unary()
        while True:
            token = self.peek()
            if token in _MULTIPLY:
                self.take()
                value = value * self.unary()
            elif token == "/":
                self.take()
                divisor = self.unary()
                if divisor == 0:
                    raise Unsupported("division by zero")
                value = value / divisor
            elif token is not None and self._starts_primary(token):
                if token[0].isdigit() or token[0] == ".":
                    raise Unsupported("two numbers side by side")
                value = value * self.power()  # implicit multiplication: 2x, 3\sqrt{2}, (a)(b)
            else:
                return value

    @staticmethod
    def _starts_primary(token: str) -> bool:
        return token in ("(", "{", "\\frac", "\\dfrac", "\\tfrac", "\\sqrt", "\\pi") or token.isalnum()

    def unary(self) -> Value:
        if self.peek() == "-":
            self.take()
            return -self.unary()
        if self.peek() == "+":
            self.take()
            return self.unary()
        return self.power()

    def power(self) -> Value:
        base = self.primary()
        if self.peek() == "^":
            self.take()
            exponent = self.unary() if self.peek() == "-" else self.primary(single_digit=True)
            return _power(base, exponent)
        return base

    def group(self) -> Value:
        """A `{...}` argument, or a single token (`\\frac12`)."""
        if self.peek() == "{":
            self.take()
            value = self.expression()
            self.take("}")
            return value
        return self.primary(single_digit=True)

    def primary(self, single_digit: bool = False) -> Value:
        token = self.take()
        if token[0].isdigit() or token[0] == ".":
            if single_digit and len(token) > 1 and token.isdigit():
                # `\frac12`, `x^23`: only the first digit is the argument; put the rest back
                self.tokens[self.index - 1 : self.index] = [token[0], token[1:]]
                return Fraction(token[0])
            return Fraction(token)
        if token.isalpha() and len(token) == 1:
            if token not in self.variables:
                raise Unsupported(f"unbound variable {token}")
            return self.variables[token]
        if token in ("(", "{"):
            value = self.expression()
            self.take(")" if token == "(" else "}")
            return value
        if token == "\\pi":
            return math.pi
        if token in ("\\frac", "\\dfrac", "\\tfrac"):
            numerator, denominator = self.group(), self.group()
            if denominator == 0:
                raise Unsupported("division by zero")
            return numerator / denominator
        if token == "\\sqrt":
            index = 2
            if self.peek() == "[":
                self.take()
                root = self.expression()
                self.take("]")
                if not (isinstance(root, Fraction) and root.denominator == 1 and 2 <= root <= 16):
                    raise Unsupported("root index")
                index = int(root)
            return _sqrt(self.group(), index)
        raise Unsupported(f"unexpected {token}")


def variables_of(tokens: list[str]) -> frozenset[str]:
    return frozenset(token for token in tokens if len(token) == 1 and token.isalpha())


def evaluate(text: str, point: int = 0, names: frozenset[str] | None = None) -> Value:
    """The value of `text`, its variables (sorted) set to the `point`-th fixed assignment."""
    tokens = tokenize(text)
    if not tokens:
        raise Unsupported("empty")
    names = variables_of(tokens) if names is None else names
    assignment = {
        name: _POINTS[(point + offset) % len(_POINTS)] + offset for offset, name in enumerate(sorted(names))
    }
    return _Parser(tokens, assignment).parse()


def _close(a: Value, b: Value, tolerance: float) -> bool:
    return abs(float(a) - float(b)) <= tolerance * max(1.0, abs(float(a)), abs(float(b)))


def numeric_verdict(gold: str, predicted: str) -> bool | None:
    """True/False when both sides are simple scalars whose values decide it, else None (ask math-verify).

    Exact rationals decide exactly. With floats (roots, pi) equal means within 1e-12 and magnitude below
    1e6 (no cancellation surprises); unequal means more than 1e-6 apart somewhere; in between is math-verify's.
    """
    try:
        gold_tokens, predicted_tokens = tokenize(gold), tokenize(predicted)
        names = variables_of(gold_tokens) | variables_of(predicted_tokens)
        same_variables = variables_of(gold_tokens) == variables_of(predicted_tokens)
        if not same_variables and {n.lower() for n in variables_of(gold_tokens)} == {
            n.lower() for n in variables_of(predicted_tokens)
        }:
            return None  # R against r: math-verify's parser folds case here and there; its call
        verdicts = []
        for point in range(len(_POINTS) if names else 1):
            gold_value = evaluate(gold, point, names)
            predicted_value = evaluate(predicted, point, names)
            if isinstance(gold_value, Fraction) and isinstance(predicted_value, Fraction):
                verdicts.append(gold_value == predicted_value)
            elif _close(gold_value, predicted_value, 1e-12) and abs(float(gold_value)) < 1e6:
                verdicts.append(True)
            elif not _close(gold_value, predicted_value, 1e-6):
                verdicts.append(False)
            else:
                return None
    except (Unsupported, OverflowError, ZeroDivisionError, ValueError, RecursionError):
        return None
    if not same_variables:
        # x + 1 against y + 1: different values somewhere means wrong; the same values is math-verify's call
        return False if not all(verdicts) else None
    return all(verdicts)


_BRACKETS = {"(": ")", "[": "]", "\\{": "\\}"}


def _closes_at_end(text: str, open_at: int) -> bool:
    """Whether the bracket at `open_at` closes at the last character: `(1, 2)` yes, `(1, 2), (3, 4)` no."""
    depth = 0
    for index in range(open_at, len(text)):
        depth += 1 if text[index] in "({[" else -1 if text[index] in ")}]" else 0
        if depth == 0:
            return index == len(text) - 1
    return False


def split_top_level(text: str) -> tuple[str, list[str], str] | None:
    """(opening, items, closing) for `(a, b)`, `[a, b)`, `\\{a, b\\}` or a bare `a, b`; None without a comma."""
    text = text.replace("\\left", "").replace("\\right", "").strip()
    opening = closing = ""
    for left, right in _BRACKETS.items():
        if text.startswith(left) and text.endswith((")", "]", right)) and _closes_at_end(text, len(left) - 1):
            opening = left
            closing = next(end for end in (right, ")", "]") if text.endswith(end))
            text = text[len(opening) : len(text) - len(closing)]
            break
    items, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char in "({[":
            depth += 1
        elif char in ")}]":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(text[start:index].strip())
            start = index + 1
    items.append(text[start:].strip())
    if len(items) < 2 or depth != 0 or not all(items):
        return None
    return opening, items, closing


def _scalar(text: str) -> Value | None:
    try:
        tokens = tokenize(text)
        if not tokens or variables_of(tokens):
            return None
        return evaluate(text)
    except (Unsupported, OverflowError, ZeroDivisionError, ValueError, RecursionError):
        return None


def _same(a: Value, b: Value) -> bool | None:
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return a == b
    if _close(a, b, 1e-12) and abs(float(a)) < 1e6:
        return True
    if not _close(a, b, 1e-6):
        return False
    return None


def structured_verdict(gold: str, predicted: str) -> bool | None:
    """Tuples, intervals and lists of plain numbers compared item by item; a number against a list of other
    numbers is wrong.

    Decides only what every reading agrees on: the same items in the same places with the same brackets
    is right; items that are not even a permutation of each other are wrong; a permutation or a different
    item count is left to math-verify (set versus tuple semantics).
    """
    gold_parts, predicted_parts = split_top_level(gold), split_top_level(predicted)
    if gold_parts is None and predicted_parts is None:
        return None
    if gold_parts is None or predicted_parts is None:
        # a number is no list, unless every reading folds the list to it (`\{5, 5\}` is the set {5})
        scalar = _scalar(gold if gold_parts is None else predicted)
        items = [_scalar(item) for item in (predicted_parts or gold_parts or ("", [], ""))[1]]
        if scalar is None or any(item is None or _same(scalar, item) is not False for item in items):
            return None
        return False
    (gold_open, gold_items, gold_close), (predicted_open, predicted_items, predicted_close) = (
        gold_parts,
        predicted_parts,
    )
    if len(gold_items) != len(predicted_items):
        return None
    gold_values = [_scalar(item) for item in gold_items]
    predicted_values = [_scalar(item) for item in predicted_items]
    if any(value is None for value in gold_values + predicted_values):
        return None
    pairwise = [_same(g, p) for g, p in zip(gold_values, predicted_values, strict=True)]
    if all(pairwise) and (gold_open, gold_close) == (predicted_open, predicted_close):
        return True
    remaining = list(predicted_values)
    for value in gold_values:
        match = next((index for index, other in enumerate(remaining) if _same(value, other)), None)
        if match is None:
            # not a permutation; only sure when no comparison was borderline
            return False if all(_same(value, other) is False for other in remaining) else None
        remaining.pop(match)
    return None
