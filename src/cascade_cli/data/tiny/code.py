"""tiny:code: one-line Python functions with HumanEval-style assert tests."""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cascade_cli.data.tiny.pools import Task, stratified_pools


@dataclass(frozen=True)
class _CodeTemplate:
    name: str
    args: str  # x | a, b | xs | s
    phrase: str  # what the function returns; may use {k}
    body: str  # the return expression; may use {k}
    k_range: tuple[int, int] = (1, 9)


_CODE_TEMPLATES: tuple[_CodeTemplate, ...] = (
    _CodeTemplate("add", "x", "returns x plus {k}", "x + {k}"),
    _CodeTemplate("sub", "x", "returns x minus {k}", "x - {k}"),
    _CodeTemplate("mul", "x", "returns x times {k}", "x * {k}", (2, 9)),
    _CodeTemplate("mod", "x", "returns x modulo {k}", "x % {k}", (2, 9)),
    _CodeTemplate("div", "x", "returns x divided by {k}, rounded down", "x // {k}", (2, 9)),
    _CodeTemplate("max", "x", "returns the larger of x and {k}", "max(x, {k})"),
    _CodeTemplate("min", "x", "returns the smaller of x and {k}", "min(x, {k})"),
    _CodeTemplate("gt", "x", "returns True if x is greater than {k}", "x > {k}"),
    _CodeTemplate("divisible", "x", "returns True if x is divisible by {k}", "x % {k} == 0", (2, 9)),
    _CodeTemplate("square_add", "x", "returns x squared plus {k}", "x * x + {k}"),
    _CodeTemplate("twice_add", "x", "returns twice x plus {k}", "2 * x + {k}"),
    _CodeTemplate("add3", "a, b", "returns a plus b plus {k}", "a + b + {k}"),
    _CodeTemplate("mul_add", "a, b", "returns a times b plus {k}", "a * b + {k}"),
    _CodeTemplate("sum_add", "xs", "returns the sum of the list xs plus {k}", "sum(xs) + {k}"),
    _CodeTemplate("len_add", "xs", "returns the length of the list xs plus {k}", "len(xs) + {k}"),
    _CodeTemplate("count", "xs", "returns how many items of the list xs equal {k}", "xs.count({k})"),
    _CodeTemplate("repeat", "s", "returns the string s repeated {k} times", "s * {k}", (2, 5)),
    _CodeTemplate("prefix", "s", "returns the first {k} characters of the string s", "s[:{k}]", (1, 4)),
    _CodeTemplate("drop", "s", "returns the string s without its first {k} characters", "s[{k}:]", (1, 4)),
    _CodeTemplate(
        "bang", "s", "returns the string s followed by {k} exclamation marks", "s + '!' * {k}", (1, 4)
    ),
    _CodeTemplate("upper", "s", "returns the string s in upper case", "s.upper()", (0, 0)),
    _CodeTemplate("reverse", "s", "returns the string s reversed", "s[::-1]", (0, 0)),
)
# Shares of each template's constants: held-out gets two of eight or nine, so the held-out prompts are ~36
# distinct problems, every one of an operation that SFT taught with other constants and RL trains.
_CODE_HELDOUT_SHARE, _CODE_RL_SHARE = 0.25, 0.3


def _code_key(template: _CodeTemplate, k: int) -> str:
    return f"code:{template.name}:{k}"


def _code_pools(template: _CodeTemplate) -> dict[str, str]:
    keys = tuple(_code_key(template, k) for k in range(template.k_range[0], template.k_range[1] + 1))
    return stratified_pools(keys, _CODE_HELDOUT_SHARE, _CODE_RL_SHARE)


_FUNCTION_NAMES = ("f", "g", "h", "solve")
WORDS = ("cat", "dog", "sun", "tree", "bird", "hello", "code", "moon", "fish", "star")


def _code_inputs(args: str, k: int, rng: random.Random) -> list[tuple[Any, ...]]:
    if args == "x":
        values = rng.sample(range(0, 20), 3) + [k, k + 1]
        return [(value,) for value in dict.fromkeys(values)]
    if args == "a, b":
        return [(rng.randint(0, 9), rng.randint(0, 9)) for _ in range(3)]
    if args == "xs":
        lists = [[rng.randint(0, 9) for _ in range(rng.randint(1, 4))] for _ in range(3)]
        lists.append([k, 1, k])
        return [(xs,) for xs in lists]
    return [(word,) for word in rng.sample(WORDS, 3)]


@functools.lru_cache(maxsize=1024)
def _compiled(args: str, body: str) -> Callable[..., Any]:
    # Our own generated one-liners, evaluated to compute the expected outputs of the tests.
    return eval(f"lambda {args}: {body}")  # noqa: S307


def _call(args: str, body: str, inputs: tuple[Any, ...]) -> Any:
    function = _compiled(args, body)
    return function(*[list(value) if isinstance(value, list) else value for value in inputs])


def _assert_test(cases: list[tuple[tuple[Any, ...], Any]]) -> str:
    lines = ["def check(candidate):"]
    for inputs, output in cases:
        lines.append(f"    assert candidate({', '.join(repr(value) for value in inputs)}) == {output!r}")
    return "\n".join(lines) + "\n"


def code_block(name: str, args: str, body: str) -> str:
    return f"```python\ndef {name}({args}):\n    return {body}\n```"


def code_task(rng: random.Random) -> Task:
    template = rng.choice(_CODE_TEMPLATES)
    k = rng.randint(*template.k_range)
    name = rng.choice(_FUNCTION_NAMES)
    body = template.body.format(k=k)
    inputs = _code_inputs(template.args, k, rng)
    outputs = [_call(template.args, body, case) for case in inputs]
    # A wrong answer: another template's body with the same signature, or the constant off by one, that fails
    # at least one test.
    candidates = [
        t.body.format(k=k) for t in _CODE_TEMPLATES if t.args == template.args and t is not template
    ]
    candidates += [template.body.format(k=k + 1)] if "{k}" in template.body else []
    rng.shuffle(candidates)
    wrong_body = None
    for candidate in candidates:
        try:
            if any(
                _call(template.args, candidate, case) != out
                for case, out in zip(inputs, outputs, strict=True)
            ):
                wrong_body = candidate
                break
        except Exception:
            wrong_body = candidate
            break
    phrase = template.phrase.format(k=k)
    key = _code_key(template, k)
    return Task(
        task="code",
        key=key,
        pool=_code_pools(template)[key],
        prompt=f"Write a Python function {name}({template.args}) that {phrase}.",
        label={
            "kind": "assert",
            "test": _assert_test(list(zip(inputs, outputs, strict=True))),
            "entry_point": name,
        },
        answer=code_block(name, template.args, body),
        # Short on purpose: the tiny model's responses stay within ~70 tokens.
        thinking=f"{name} returns {body}.",
        wrong_answer=code_block(name, template.args, wrong_body) if wrong_body else None,
        wrong_thinking=f"{name} returns {wrong_body}." if wrong_body else None,
    )

