"""Instruction registry: id -> checker with a declared kwargs schema.

A checker is a plain function `check(text, **kwargs) -> bool`. Its kwargs are declared once (name -> kind) so
that a label is validated before any text is looked at, and a bad label gets one message naming the
instruction id and the kwargs it expects. None-valued kwargs count as absent (IFEval's raw data and the
HuggingFace copy pad every kwargs dict with None).
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cascade_cli.verifiers.base import RecordError

RELATIONS = ("less than", "at least")


def _to_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError("a boolean is not a count")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        return int(value)
    raise ValueError(f"expected an integer, found {value!r}")


def _to_str(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"expected a non-empty string, found {value!r}")
    return value


def _to_str_list(value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(v, str) for v in value):
        raise ValueError(f"expected a non-empty list of strings, found {value!r}")
    return list(value)


def _to_first_str(value: Any) -> str:
    """A string, or the first string of a list (IFEvalG accepts `first_word: ["word"]`)."""
    if isinstance(value, (list, tuple)) and value:
        value = value[0]
    return _to_str(value)


def _to_relation(value: Any) -> str:
    if value not in RELATIONS:
        raise ValueError(f"expected one of {RELATIONS}, found {value!r}")
    return value


def _to_float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"expected a number, found {value!r}")
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"expected a number, found {value!r}") from None


def _to_any(value: Any) -> Any:
    return value


KINDS: dict[str, Callable[[Any], Any]] = {
    "int": _to_int,
    "str": _to_str,
    "str_list": _to_str_list,
    "first_str": _to_first_str,
    "relation": _to_relation,
    "float": _to_float,
    "any": _to_any,
}


@dataclass(frozen=True)
class Bound:
    """The values a numeric kwarg can take for its instruction to be satisfiable (and not vacuous)."""

    low: float
    high: float | None = None
    means: str = "a count"

    def problem(self, name: str, value: float) -> str | None:
        if value >= self.low and (self.high is None or value <= self.high):
            return None
        wanted = f"at least {self.low:g}" if self.high is None else f"between {self.low:g} and {self.high:g}"
        return f"kwarg {name!r} ({self.means}) must be {wanted}, found {value!r}"


POSITIVE = Bound(1)
# Numeric kwargs by name, for every instruction that declares one (IFEval's and IFBench's names mean the same
# thing wherever they occur); KWARG_BOUNDS_BY_ID overrides a name for one instruction. A name not listed
# here only has to convert to its kind. "less than 0" can never hold, and a count of 0 or a 0th position makes
# the other instructions vacuous or impossible, so counts and positions are positive unless listed otherwise.
KWARG_BOUNDS: dict[str, Bound] = {
    **dict.fromkeys(
        ("frequency", "let_frequency", "capital_frequency", "num_sentences", "num_words", "num_paragraphs",
         "num_sections", "num_highlights", "num_placeholders", "N", "small_n", "n_sent", "n_words",
         "max_words"),
        POSITIVE,
    ),
    **dict.fromkeys(("nth_paragraph", "n", "m"), Bound(1, means="a 1-based position")),
    "num_bullets": Bound(0),  # exactly 0 bullet points is a real instruction
    "min_words": Bound(0),
    **dict.fromkeys(("n_start", "n_end"), Bound(0, means="a 0-based character index")),
    "percentage": Bound(0, 100, means="a percentage"),
}  # fmt: skip
KWARG_BOUNDS_BY_ID: dict[tuple[str, str], Bound] = {
    ("count:lowercase_counting", "N"): Bound(0),  # "at most N lowercase words": 0 is all caps
    ("count:numbers", "N"): Bound(0),  # "exactly N numbers": 0 is none
}

# Pairs of kwargs that, where an instruction has both, must not be in reverse order (a span, a range).
ORDERED_KWARGS = (("n_start", "n_end"), ("min_words", "max_words"), ("nth_paragraph", "num_paragraphs"))


def kwarg_problem(instruction_id: str, values: dict[str, Any]) -> str | None:
    """The first numeric kwarg outside its bound (KWARG_BOUNDS) or pair out of order, as a message; None
    when all are in range."""
    for name, value in values.items():
        bound = KWARG_BOUNDS_BY_ID.get((instruction_id, name)) or KWARG_BOUNDS.get(name)
        if bound is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
            problem = bound.problem(name, value)
            if problem:
                return problem
    for first, second in ORDERED_KWARGS:
        if first in values and second in values and values[first] > values[second]:
            return f"{first} must not exceed {second} (found {values[first]!r} > {values[second]!r})"
    return None


@dataclass(frozen=True)
class Instruction:
    id: str
    check: Callable[..., bool]
    params: dict[str, str]  # name -> kind; a trailing "?" on the kind marks an optional kwarg
    validate: Callable[[dict[str, Any]], str | None] | None = None  # cross-field rule -> message or None

    def signature(self) -> str:
        if not self.params:
            return "no kwargs"
        return "{" + ", ".join(f"{name}: {kind}" for name, kind in self.params.items()) + "}"


REGISTRY: dict[str, Instruction] = {}


def instruction(
    instruction_id: str, validate: Callable[[dict[str, Any]], str | None] | None = None, **params: str
) -> Callable[[Callable[..., bool]], Callable[..., bool]]:
    """Register `check(text, **kwargs) -> bool` under `instruction_id` with kwargs `name=kind`."""

    def register(check: Callable[..., bool]) -> Callable[..., bool]:
        if instruction_id in REGISTRY:
            raise ValueError(f"instruction {instruction_id!r} registered twice")
        REGISTRY[instruction_id] = Instruction(instruction_id, check, params, validate)
        return check

    return register


def known_ids() -> list[str]:
    return sorted(REGISTRY)


def _bad(spec: Instruction, kwargs: Any, why: str) -> RecordError:
    return RecordError(
        f"instruction {spec.id!r}: {why}; expected kwargs {spec.signature()}, found {json.dumps(kwargs, default=str)}"
    )


def bind(instruction_id: Any, kwargs: Any) -> Callable[[str], bool]:
    """A one-argument checker for this id and kwargs; RecordError naming the id when either is wrong."""
    if not isinstance(instruction_id, str) or instruction_id not in REGISTRY:
        close = difflib.get_close_matches(str(instruction_id), REGISTRY, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise RecordError(
            f"unknown instruction id {instruction_id!r}; expected one of the {len(REGISTRY)} registered ids "
            f"(IFEval's, e.g. 'punctuation:no_comma', or IFBench's){hint}"
        )
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, dict):
        raise _bad(REGISTRY[instruction_id], kwargs, "kwargs must be an object")
    try:
        key = json.dumps(kwargs, sort_keys=True)
    except (TypeError, ValueError):
        raise _bad(REGISTRY[instruction_id], kwargs, "kwargs are not JSON values") from None
    return _bind_cached(instruction_id, key)


@functools.lru_cache(maxsize=8192)
def _bind_cached(instruction_id: str, kwargs_json: str) -> Callable[[str], bool]:
    spec = REGISTRY[instruction_id]
    raw = {name: value for name, value in json.loads(kwargs_json).items() if value is not None}
    unexpected = sorted(set(raw) - set(spec.params))
    if unexpected:
        raise _bad(spec, raw, f"unexpected kwarg(s) {', '.join(unexpected)}")
    values: dict[str, Any] = {}
    for name, kind in spec.params.items():
        optional = kind.endswith("?")
        if name not in raw:
            if optional:
                continue
            raise _bad(spec, raw, f"missing kwarg {name!r}")
        try:
            values[name] = KINDS[kind.rstrip("?")](raw[name])
        except ValueError as error:
            raise _bad(spec, raw, f"kwarg {name!r}: {error}") from None
    problem = kwarg_problem(spec.id, values)
    if problem is None and spec.validate is not None:
        problem = spec.validate(values)
    if problem:
        raise _bad(spec, raw, problem)
    check = spec.check
    return functools.partial(check, **values)


def compile_pattern(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """IFEval treats keywords as regular expressions; one that does not compile is matched literally."""
    try:
        return re.compile(pattern, flags)
    except re.error:
        return re.compile(re.escape(pattern), flags)
