"""Multiple choice (GPQA / MMLU-Pro style): extract the answer letter from the final answer and compare.

Label: `{"answer": "C", "num_choices": 4}` (`num_choices` optional, default 10 as in MMLU-Pro).
The answer is read from the text after `</think>`: the last explicit statement wins ("Answer: C",
"the answer is (C)", "\\boxed{C}"); failing that, a reply that is only a letter ("C", "(C)", "C."); failing
that, the last parenthesised letter "(C)". No letter found scores 0 with `details["extracted"] = None`.
"""

from __future__ import annotations

import re
from typing import Any

from cascade_cli.chat import answer_text
from cascade_cli.verifiers.base import RecordError, Score, Verifier, parse_label, require_response

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

_EXPLICIT = [
    r"\\boxed\{\s*(?:\\text(?:bf)?\{)?\s*\(?([A-Z])\)?\s*\}?\s*\}",
    r"answer\s*(?:is|:)?\s*(?:is|:)?\s*[\*_]*\s*[\(\[]?\s*([A-Z])\s*[\)\]]?(?![A-Za-z])",
    r"(?:correct|best)\s+(?:answer|option|choice)\s*(?:is|:)\s*[\*_]*\s*[\(\[]?([A-Z])[\)\]]?(?![A-Za-z])",
    r"(?:option|choice)\s+[\(\[]?([A-Z])[\)\]]?\s+is\s+(?:correct|right)",
]
_ONLY_LETTER = re.compile(r"^[\s\*_]*[\(\[]?([A-Z])[\)\]\.:]?[\s\*_]*$")
_PARENTHESISED = re.compile(r"\(([A-Z])\)")


def extract_letter(text: str, num_choices: int = 10) -> str | None:
    """The chosen option letter in `text` (already past any think block), or None."""
    valid = LETTERS[:num_choices]
    best: tuple[int, str] | None = None
    for pattern in _EXPLICIT:
        for match in re.finditer(pattern, text, flags=re.IGNORECASE):
            letter = match.group(1).upper()
            # "answer is a ..." in lower case is prose, not a choice; accept lower case only when boxed
            if match.group(1).islower() and "boxed" not in match.group(0):
                continue
            if letter in valid and (best is None or match.start(1) > best[0]):
                best = (match.start(1), letter)
    if best is not None:
        return best[1]
    only = _ONLY_LETTER.match(text)
    if only and only.group(1) in valid:
        return only.group(1)
    letters = [letter for letter in _PARENTHESISED.findall(text) if letter in valid]
    return letters[-1] if letters else None


class MCQVerifier(Verifier):
    domain = "mcq"

    def check_label(self, label: Any) -> str | None:
        if not isinstance(label, dict) or not isinstance(label.get("answer"), str):
            return f"expected a label {{'answer': 'A'..'Z', 'num_choices': N}}; found {label!r}"
        if label["answer"].strip().upper() not in LETTERS:
            return f"label 'answer' must be one letter A-Z; found {label['answer']!r}"
        num_choices = label.get("num_choices", 10)
        if not isinstance(num_choices, int) or not 2 <= num_choices <= len(LETTERS):
            return f"label 'num_choices' must be an integer 2-26; found {num_choices!r}"
        return None

    def verify_one(self, record: dict[str, Any]) -> Score:
        label = parse_label(record)
        problem = self.check_label(label)
        if problem:
            raise RecordError(problem)
        expected = label["answer"].strip().upper()
        num_choices = max(label.get("num_choices", 10), LETTERS.index(expected) + 1)
        extracted = extract_letter(answer_text(require_response(record)), num_choices)
        passed = extracted == expected
        return Score(
            reward=1.0 if passed else 0.0,
            passed=passed,
            details={"extracted": extracted, "expected": expected},
        )
