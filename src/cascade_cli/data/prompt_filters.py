"""Drop math and competitive-programming prompts from RLHF data (Nemotron-Cascade §2.2: keeping them cost
about 2% on AIME25; the verifiable-reward stages own those domains).

A small keyword / answer-format classifier over the prompt text. Strong signals decide alone (a `\\boxed`
answer request, LaTeX math, a bare arithmetic expression to evaluate, a judge-style statement with input /
output sections and constraints); weaker ones (math or programming vocabulary) need two hits, so a general
question that mentions one number or the word "code" stays.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

_MATH_STRONG = (
    re.compile(r"\\boxed|final answer", re.I),
    re.compile(r"\$[^$\n]*[\\^_=+\-*/][^$\n]*\$|\\\(|\\\[|\\frac|\\sqrt|\\sum|\\int|\\binom|\\cdot"),
    re.compile(r"(?:^|[\s(])-?\d+(?:\.\d+)?\s*[-+*/x×÷^]\s*-?\d+(?:\.\d+)?(?:\s*[-+*/^]\s*-?\d+)*\s*(?:[?=.]|$)"),
)
_MATH_WORDS = re.compile(
    r"\b(?:calculate|compute|evaluate|solve|simplify|equation|integer|integers|polynomial|prime|divisible|"
    r"remainder|probability|triangle|perimeter|area of|radius|sum of|product of|how many|find all|"
    r"find the value|prove that|real numbers|digits)\b",
    re.I,
)
_CODE_STRONG = (
    re.compile(r"\b(?:input format|output format|standard input|stdin|stdout|time limit|memory limit)\b", re.I),
    re.compile(r"^\s*(?:-{3,}\s*)?(?:input|output|constraints|examples?|sample input)\s*:?\s*$", re.I | re.M),
    re.compile(r"\b1\s*(?:≤|<=|\\le|\\leq)\s*[a-zA-Z_]+\s*(?:≤|<=|\\le|\\leq)\s*10"),
)
# A task whose answer is a program: decides alone.
_CODE_TASK = re.compile(
    r"\b(?:write|implement|complete)\s+an?\s+(?:python|c\+\+|java|rust|go|javascript)?\s*"
    r"(?:function|program|method|class|script)\b|\bdef \w+\(",
    re.I,
)
# A word problem: "how many ... in total" with at least two numbers.
_WORD_PROBLEM = re.compile(r"\b(?:how many|how much|in total|altogether|left over|remain)\b", re.I)
_NUMBER = re.compile(r"\b\d+(?:\.\d+)?\b")
_CODE_WORDS = re.compile(
    r"\b(?:write a (?:python |c\+\+ |java )?(?:function|program|script)|implement|algorithm|test cases?|"
    r"complexity|array|integers? n|queries|def \w+\(|return the|python|c\+\+)\b",
    re.I,
)


def prompt_text(row: dict[str, Any]) -> str:
    prompt = row.get("prompt")
    if prompt is None:
        prompt = [m for m in row.get("messages") or [] if isinstance(m, dict) and m.get("role") != "assistant"]
    if isinstance(prompt, str):
        return prompt
    return "\n".join(str(m.get("content", "")) for m in prompt if isinstance(m, dict))


def classify_prompt(text: str) -> str | None:
    """"math", "code" or None (keep)."""
    code_strong = sum(bool(p.search(text)) for p in _CODE_STRONG)
    code_words = len(set(m.group(0).lower() for m in _CODE_WORDS.finditer(text)))
    if _CODE_TASK.search(text) or (code_strong >= 1 and code_words + code_strong >= 2):
        return "code"
    if any(p.search(text) for p in _MATH_STRONG):
        return "math"
    if _WORD_PROBLEM.search(text) and len(_NUMBER.findall(text)) >= 2:
        return "math"
    if len(set(m.group(0).lower() for m in _MATH_WORDS.finditer(text))) >= 2:
        return "math"
    if code_words >= 2:
        return "code"
    return None


def drop_math_and_code(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(kept rows, report): the report counts what was dropped per class and names a few dropped ids."""
    kept: list[dict[str, Any]] = []
    dropped: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    for index, row in enumerate(rows):
        label = classify_prompt(prompt_text(row))
        if label is None:
            kept.append(row)
            continue
        dropped[label] += 1
        examples.setdefault(label, [])
        if len(examples[label]) < 5:
            examples[label].append(str(row.get("id", index)))
    return kept, {"kept": len(kept), "dropped": dict(dropped), "dropped_examples": examples}
