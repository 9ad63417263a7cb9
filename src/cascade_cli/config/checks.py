"""The bounds of config keys and the pass that checks a config against them.

Each config class lists its keys' bounds in `BOUNDS` (key -> `Range`, `OneOf` or `TEXT`); a subclass adds to
or replaces its parents' entries. `validate(config)` walks the config and the configs nested in it
(`lora.*`, `rollout.*`, `cluster.*`, `phases[i].*`), checks every key against its bound, then runs each
class's `check()` for keys that depend on each other. The CLI and the recipe loader build every config
through `config/structure.py`, which calls `validate`, and every stage run calls it again, so a command,
`recipe validate` and `recipe run` reject the same values before any work. Every failure is one line: the
dotted key, what was expected, what was found.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import typing
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from cascade_cli.config.docs import type_hints
from cascade_cli.errors import CascadeUsageError

MISSING_VALUE = "???"  # OmegaConf's MISSING: a required key not given (structure() reports it)


@dataclass(frozen=True)
class Range:
    """A number within [low, high] (either end may be open or absent); `text` overrides the description."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    text: str = ""

    def contains(self, value: float) -> bool:
        if isinstance(value, float) and math.isnan(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return not (self.high is not None and (value >= self.high if self.high_open else value > self.high))

    def describe(self, integer: bool) -> str:
        if self.text:
            return self.text
        kind = "an integer" if integer else "a number"
        if self.low is not None and self.high is not None:
            left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
            return f"{kind} in {left}{self.low:g}, {self.high:g}{right}"
        if self.low is not None:
            return f"{kind} {'>' if self.low_open else '>='} {self.low:g}"
        if self.high is not None:
            return f"{kind} {'<' if self.high_open else '<='} {self.high:g}"
        return kind

    def outside(self, integer: bool) -> list[float]:
        """Values just outside the range (what the tests feed in)."""
        step = 1 if integer else 0.5
        values = []
        if self.low is not None:
            values.append(self.low if self.low_open else self.low - step)
        if self.high is not None:
            values.append(self.high if self.high_open else self.high + step)
        return [int(v) if integer else float(v) for v in values]


@dataclass(frozen=True)
class OneOf:
    """One of a fixed set of words."""

    choices: tuple[str, ...]

    def describe(self) -> str:
        return "one of " + ", ".join(self.choices)


@dataclass(frozen=True)
class Text:
    """Any string (a path, a name, a spec checked where it is resolved): declared so that every key is."""


TEXT = Text()
Bound = Range | OneOf | Text


def at_least(low: float, text: str = "") -> Range:
    return Range(low=low, text=text)


def above(low: float) -> Range:
    return Range(low=low, low_open=True)


def fraction(high_open: bool = False) -> Range:
    """A share: [0, 1], or [0, 1) with `high_open`."""
    return Range(0, 1, high_open=high_open)


def one_of(*choices: str) -> OneOf:
    return OneOf(tuple(choices))


ANY_NUMBER = Range()


def bounds_of(cls: type) -> dict[str, Bound]:
    """The bounds of `cls`'s keys: its own `BOUNDS` over its parents' (the nearest class wins)."""
    merged: dict[str, Bound] = {}
    for klass in reversed(cls.__mro__):
        merged.update(klass.__dict__.get("BOUNDS", {}))
    return merged


def scalar_type(hint: Any) -> type | None:
    """int, float, str or bool for a scalar field (optional or not); None for lists, dicts and configs."""
    args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    scalar = args[0] if type(None) in typing.get_args(hint) and len(args) == 1 else hint
    return scalar if scalar in (int, float, str, bool) else None


def nested_config(hint: Any) -> tuple[type | None, bool]:
    """(the dataclass a field holds, whether as a list of them)."""
    if dataclasses.is_dataclass(hint):
        return hint, False  # type: ignore[return-value]
    if typing.get_origin(hint) is list:
        (item,) = typing.get_args(hint)
        if dataclasses.is_dataclass(item):
            return item, True  # type: ignore[return-value]
    return None, False


def did_you_mean(word: Any, choices: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(str(word), choices, n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def problem(bound: Bound, value: Any, integer: bool) -> str | None:
    """What is wrong with `value` under `bound` (None: nothing)."""
    if value is None or value == MISSING_VALUE or isinstance(bound, Text):
        return None
    if isinstance(bound, OneOf) and isinstance(value, (list, tuple, ListConfig)):  # a list of words
        wrong = [item for item in value if item not in bound.choices]
        if not wrong:
            return None
        return f"expected a list of {', '.join(bound.choices)}; found {wrong[0]!r}{did_you_mean(wrong[0], bound.choices)}"
    if isinstance(bound, OneOf):
        return None if value in bound.choices else f"expected {bound.describe()}; found {value!r}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None  # the type check (OmegaConf) reports a wrong type
    return None if bound.contains(value) else f"expected {bound.describe(integer)}, found {value}"


def validate(config: Any, prefix: str = "") -> None:
    """Check every key of `config` (and of the configs nested in it) against its bound, then each class's
    `check()`; raises CascadeUsageError(`prefix.key: expected ..., found ...`) on the first failure. A
    structured DictConfig is checked as the dataclass it stands for."""
    if isinstance(config, DictConfig):
        config = OmegaConf.to_object(config)
    cls = type(config)
    hints = type_hints(cls)
    bounds = bounds_of(cls)
    for field in dataclasses.fields(cls):
        value, hint = getattr(config, field.name), hints[field.name]
        nested, many = nested_config(hint)
        if nested is not None and value is not None:
            for index, item in enumerate(value if many else [value]):
                if dataclasses.is_dataclass(item):
                    validate(item, f"{prefix}{field.name}[{index}]." if many else f"{prefix}{field.name}.")
            continue
        bound = bounds.get(field.name)
        if bound is not None:
            wrong = problem(bound, value, scalar_type(hint) is int)
            if wrong:
                raise CascadeUsageError(f"{prefix}{field.name}: {wrong}")
    check = getattr(config, "check", None)
    if callable(check):
        try:
            check()
        except CascadeUsageError as error:
            raise CascadeUsageError(f"{prefix}{error}") from None
