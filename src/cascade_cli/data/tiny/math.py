"""tiny:math: small arithmetic with column-arithmetic thinking, answers in \\boxed{}."""

from __future__ import annotations

import random

from cascade_cli.data.tiny.pools import Task

_MATH_TEMPLATES = (
    "What is {a}{op}{b}?",
    "Compute {a}{op}{b}.",
    "Calculate {a} {op} {b}.",
)
_WORD_TEMPLATES = {
    "+": "Tom has {a} apples and gets {b} more. How many apples does he have?",
    "-": "Tom has {a} apples and eats {b}. How many apples are left?",
    "*": "There are {a} bags with {b} apples each. How many apples in total?",
}
MAX_OPERAND = 99  # two-digit numbers; the multiplier of `*` is one digit


# The thinking is column arithmetic: a ones step and a tens step, each a one-digit fact (with the carry or
# borrow written out). A held-out problem is then new only as a combination: its one-digit facts recur across
# the SFT problems, which is what lets a tiny model generalise to prompts it never saw. A wrong answer makes
# the typical slip (a dropped carry or borrow, or a ones step off by one), which RL can learn to fix.
def _add_steps(a: int, b: int, slip: str = "") -> tuple[str, int]:
    ones = a % 10 + b % 10 + (1 if slip == "ones" else 0)
    carry = 0 if slip == "carry" else ones // 10
    tens = a // 10 + b // 10 + carry
    return f"{a % 10}+{b % 10}={ones}, {a // 10}+{b // 10}+{carry}={tens}", tens * 10 + ones % 10


def _sub_steps(a: int, b: int, slip: str = "") -> tuple[str, int]:
    borrow = 1 if a % 10 < b % 10 else 0
    ones = borrow * 10 + a % 10 - b % 10 + (1 if slip == "ones" else 0)
    written_borrow = 0 if slip == "carry" else borrow
    tens = a // 10 - b // 10 - written_borrow
    first = f"{'1' if borrow else ''}{a % 10}-{b % 10}={ones}"
    return f"{first}, {a // 10}-{b // 10}-{written_borrow}={tens}", tens * 10 + ones % 10


def _mul_steps(a: int, b: int, slip: str = "") -> tuple[str, int]:
    ones = (a % 10) * b + (1 if slip == "ones" else 0)
    carry = 0 if slip == "carry" else ones // 10
    tens = (a // 10) * b + carry
    return f"{a % 10}*{b}={ones}, {a // 10}*{b}+{carry}={tens}", tens * 10 + ones % 10


_STEPS = {"+": _add_steps, "-": _sub_steps, "*": _mul_steps}


def math_task(rng: random.Random) -> Task:
    op = rng.choice("++-*")
    a = rng.randint(0, MAX_OPERAND)
    b = rng.randint(0, 9) if op == "*" else rng.randint(0, a if op == "-" else MAX_OPERAND)
    steps, c = _STEPS[op](a, b)
    template = _WORD_TEMPLATES[op] if rng.random() < 0.2 else rng.choice(_MATH_TEMPLATES)
    for slip in rng.sample(("carry", "ones"), 2):
        wrong_steps, wrong = _STEPS[op](a, b, slip)
        if wrong != c and wrong >= 0:
            break
    return Task(
        task="math",
        key=f"math:{a}{op}{b}",
        prompt=template.format(a=a, b=b, op=op),
        label={"answer": str(c)},
        answer=f"\\boxed{{{c}}}",
        thinking=f"{a}{op}{b}: {steps}",  # restating the operands first is a plain copy, then digits are near
        wrong_answer=f"\\boxed{{{wrong}}}",
        wrong_thinking=f"{a}{op}{b}: {wrong_steps}",
    )

