"""The three test kinds of a code label, read into one shape, and how outputs are judged.

    {"kind": "stdio", "inputs": ["1 2\\n", ...], "outputs": ["3\\n", ...]}
    {"kind": "call", "fn_name": "add", "inputs": [[1, 2], ...], "outputs": [3, ...]}
    {"kind": "assert", "test": "def check(candidate): ...", "entry_point": "add", "prelude": "def helper(): ..."}

An assert label's optional "prelude" is trusted code the test reads names from (HumanEval's prompt: `poly` for
find_zero, `encode_cyclic` for decode_cyclic): run beside the test, so a program cannot redefine what the test
relies on. Optional keys: "time_limit_s" (per test), "memory_mb", "float_tolerance" (stdio and call: numbers match when
within this absolute or relative tolerance). Only the inputs travel into the sandbox; the expected outputs
stay with the host, so a program cannot find them in its own memory.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from cascade_cli.verifiers.base import RecordError

KINDS = ("stdio", "call", "assert")


@dataclass
class TestSuite:
    kind: str
    tests: list[Any]  # what the harness receives per test: stdin text, argument list, or check source
    expected: list[Any] = field(default_factory=list)  # host side only
    fn_name: str | None = None
    entry_point: str | None = None
    prelude: str | None = None  # assert: trusted code the test reads names from
    time_limit_s: float | None = None
    memory_mb: int | None = None
    float_tolerance: float | None = None

    def judge(self, index: int, output: str) -> bool:
        """Whether a test whose program ended normally produced the right output."""
        if self.kind == "assert":
            return True
        if self.kind == "stdio":
            return stdio_matches(output, self.expected[index], self.float_tolerance)
        return call_matches(output, self.expected[index], self.float_tolerance)


def parse_suite(label: Any) -> TestSuite:
    """Read a code label; RecordError says which key is wrong, what was expected and what was found."""
    if not isinstance(label, dict):
        raise RecordError(f"code label must be an object with a 'kind'; found {type(label).__name__}")
    kind = label.get("kind")
    if kind is None:
        kind = "assert" if "test" in label else "call" if "fn_name" in label else "stdio"
    if kind not in KINDS:
        raise RecordError(f"label 'kind' must be one of {', '.join(KINDS)}; found {kind!r}")
    limits = {
        "time_limit_s": _positive(label, "time_limit_s", float),
        "memory_mb": _positive(label, "memory_mb", int),
        "float_tolerance": _positive(label, "float_tolerance", float),
    }
    if kind == "assert":
        test, entry_point = label.get("test"), label.get("entry_point")
        if not isinstance(test, str) or not test.strip():
            raise RecordError("assert label needs 'test' (source defining check(candidate)); found none")
        if not isinstance(entry_point, str) or not entry_point.isidentifier():
            raise RecordError(f"assert label needs 'entry_point' (a function name); found {entry_point!r}")
        prelude = label.get("prelude")
        if prelude is not None and not isinstance(prelude, str):
            raise RecordError(
                f"assert label 'prelude' must be source code (a string); found {_type(prelude)}"
            )
        return TestSuite(kind, [test], [None], entry_point=entry_point, prelude=prelude, **limits)
    inputs, outputs = label.get("inputs"), label.get("outputs")
    if not isinstance(inputs, list) or not isinstance(outputs, list):
        raise RecordError(
            f"{kind} label needs lists 'inputs' and 'outputs'; found {_type(inputs)}, {_type(outputs)}"
        )
    if len(inputs) != len(outputs):
        raise RecordError(f"{kind} label: {len(inputs)} inputs but {len(outputs)} outputs")
    if not inputs:
        raise RecordError(f"{kind} label has no tests (empty 'inputs')")
    if kind == "stdio":
        for name, values in (("inputs", inputs), ("outputs", outputs)):
            bad = next((i for i, value in enumerate(values) if not isinstance(value, str)), None)
            if bad is not None:
                raise RecordError(f"stdio label '{name}'[{bad}] must be a string; found {_type(values[bad])}")
        return TestSuite(kind, list(inputs), list(outputs), **limits)
    fn_name = label.get("fn_name")
    if not isinstance(fn_name, str) or not fn_name.isidentifier():
        raise RecordError(
            f"call label needs 'fn_name' (a function or Solution method name); found {fn_name!r}"
        )
    args = [_call_args(value, i) for i, value in enumerate(inputs)]
    expected = [_json_value(value) for value in outputs]
    return TestSuite(kind, args, expected, fn_name=fn_name, **limits)


def _type(value: Any) -> str:
    return type(value).__name__


def _positive(label: dict[str, Any], key: str, cast: type) -> Any:
    if label.get(key) is None:
        return None
    try:
        value = cast(label[key])
    except (TypeError, ValueError):
        raise RecordError(f"label '{key}' must be a positive number; found {label[key]!r}") from None
    if value <= 0:
        raise RecordError(f"label '{key}' must be a positive number; found {label[key]!r}")
    return value


def _call_args(value: Any, index: int) -> list[Any]:
    if isinstance(value, list):
        return value
    if isinstance(value, str):  # LiveCodeBench functional format: one JSON value per line
        try:
            return [json.loads(line) for line in value.splitlines() if line.strip()]
        except json.JSONDecodeError as error:
            raise RecordError(f"call label 'inputs'[{index}]: a line is not JSON ({error.msg})") from None
    raise RecordError(f"call label 'inputs'[{index}] must be a list of arguments; found {_type(value)}")


def _json_value(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


# -- judging ---------------------------------------------------------------------------------------------


def _number(token: str) -> float | None:
    try:
        return float(token)
    except ValueError:
        return None


def _tokens_match(actual: str, expected: str, tolerance: float | None) -> bool:
    if actual == expected:
        return True
    if tolerance is None:
        return False
    a, b = _number(actual), _number(expected)
    return a is not None and b is not None and math.isclose(a, b, rel_tol=tolerance, abs_tol=tolerance)


def stdio_matches(actual: str, expected: str, tolerance: float | None = None) -> bool:
    """Token-wise comparison: any run of whitespace separates tokens, trailing whitespace is ignored
    (the Codeforces default checker's rule)."""
    got, want = actual.split(), expected.split()
    return len(got) == len(want) and all(
        _tokens_match(a, b, tolerance) for a, b in zip(got, want, strict=True)
    )


def _values_match(actual: Any, expected: Any, tolerance: float | None) -> bool:
    if isinstance(expected, bool) or isinstance(actual, bool):
        return actual == expected and type(actual) is type(expected)
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        if tolerance is None or (isinstance(expected, int) and isinstance(actual, int)):
            return actual == expected
        return math.isclose(actual, expected, rel_tol=tolerance, abs_tol=tolerance)
    if isinstance(expected, list) and isinstance(actual, list):
        return len(actual) == len(expected) and all(
            _values_match(a, e, tolerance) for a, e in zip(actual, expected, strict=True)
        )
    if isinstance(expected, dict) and isinstance(actual, dict):
        return actual.keys() == expected.keys() and all(
            _values_match(actual[k], expected[k], tolerance) for k in expected
        )
    return actual == expected


def call_matches(actual_json: str, expected: Any, tolerance: float | None = None) -> bool:
    """The returned value (JSON from the harness; tuples arrive as lists) equals the expected one. As in APPS'
    checker, an expected `[x]` also accepts a returned `x` (APPS/TACO wrap each output in a list)."""
    try:
        actual = json.loads(actual_json)
    except (json.JSONDecodeError, RecursionError):
        return False
    if _values_match(actual, expected, tolerance):
        return True
    return isinstance(expected, list) and len(expected) == 1 and _values_match(actual, expected[0], tolerance)
