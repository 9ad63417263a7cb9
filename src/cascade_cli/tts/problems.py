"""Problems for `cascade tts code`: public (sample) vs hidden tests, subtasks, and the next round's prompt.

A problem is a canonical code row (`prompt`, `label` in one of the code label formats of
verifiers/code/tests_formats.py). The code formats keep one list of tests, so:
- hidden tests = the whole label (the official verdict, as the grader's tests include the samples);
- public tests = the row's (or label's) `public_tests` when given: an int k (the first k tests) or a full
  code label of its own; else the first `default_public` tests. For an `assert` label the "tests" are the
  top-level `assert` lines of `check(candidate)` when its body is nothing but such lines (HumanEval-style,
  tiny:code); any other assert label has no public part (only the no-code filter applies).
- subtasks: rows with the same `problem` value are sibling subtasks of one problem; accepted code of a solved
  sibling goes into the others' prompts. `points` (default 1) weighs a row in the score.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from cascade_cli.errors import CascadeUsageError
from cascade_cli.records import row_prompt

MAX_FAILED_SHOWN = 5


@dataclass
class Submission:
    code: str
    verdict: str  # the code verifier's verdict on the hidden tests: pass | wrong_answer | ...
    tests_passed: int
    tests_total: int

    def describe(self) -> str:
        return f"verdict: {self.verdict}, passed {self.tests_passed} of {self.tests_total} tests"


def _assert_lines(test: str) -> list[str] | None:
    lines = [line for line in test.splitlines() if line.strip()]
    if not lines or not lines[0].startswith("def check(candidate)"):
        return None
    body = lines[1:]
    if not body or not all(line.startswith("    assert ") for line in body):
        return None
    return body


def _first_tests(label: dict[str, Any], k: int) -> dict[str, Any] | None:
    kind = label.get("kind") or ("assert" if "test" in label else "call" if "fn_name" in label else "stdio")
    if k <= 0:
        return None
    if kind == "assert":
        body = _assert_lines(str(label.get("test", "")))
        if body is None:
            return None
        return {**label, "test": "def check(candidate):\n" + "\n".join(body[:k]) + "\n"}
    return {**label, "inputs": list(label["inputs"])[:k], "outputs": list(label["outputs"])[:k]}


def public_label(row: dict[str, Any], default_public: int) -> dict[str, Any] | None:
    """The public-test label of a row (see the module docstring), or None when it has none."""
    label = row["label"]
    given = row.get("public_tests", label.get("public_tests") if isinstance(label, dict) else None)
    if isinstance(given, dict):
        return given
    if given is not None and not isinstance(given, int):
        raise CascadeUsageError(
            f"row {row.get('id')!r}: 'public_tests' must be a number of tests or a code label; found {given!r}"
        )
    hidden = {key: value for key, value in label.items() if key != "public_tests"}
    return _first_tests(hidden, default_public if given is None else given)


def hidden_label(row: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in row["label"].items() if key != "public_tests"}


def feedback_text(failed: list[Submission], siblings: dict[str, str]) -> str:
    """What a round adds to the prompt: the last MAX_FAILED_SHOWN failed submissions with their verdicts,
    then the accepted code of solved sibling subtasks (name -> code)."""
    parts: list[str] = []
    shown = failed[-MAX_FAILED_SHOWN:]
    if shown:
        parts.append("Your earlier submissions failed:")
        for number, submission in enumerate(shown, start=1):
            parts.append(f"Submission {number} ({submission.describe()}):\n```python\n{submission.code}\n```")
    if siblings:
        parts.append("Accepted solutions of other subtasks of this problem:")
        for name, code in siblings.items():
            parts.append(f"Subtask {name}:\n```python\n{code}\n```")
    if not parts:
        return ""
    return "\n\n".join(parts) + "\n\nWrite a corrected solution."


def prompt_with_feedback(prompt: str | list[dict[str, Any]], feedback: str) -> str | list[dict[str, Any]]:
    """The prompt with `feedback` appended (to the last user turn when the prompt is messages)."""
    if not feedback:
        return prompt
    if isinstance(prompt, str):
        return f"{prompt}\n\n{feedback}"
    messages = copy.deepcopy(prompt)
    for message in reversed(messages):
        if message.get("role") == "user":
            message["content"] = f"{message['content']}\n\n{feedback}"
            return messages
    return [*messages, {"role": "user", "content": feedback}]


def round_prompt(
    row: dict[str, Any], failed: list[Submission], siblings: dict[str, str]
) -> str | list[dict[str, Any]]:
    return prompt_with_feedback(row_prompt(row), feedback_text(failed, siblings))
