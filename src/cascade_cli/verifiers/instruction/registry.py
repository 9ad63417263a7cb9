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
    if spec.validate is not None:
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
