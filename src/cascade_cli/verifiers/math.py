"""Math verifier: the final answer of a response against `label["answer"]`, reward 1 or 0.

The extraction rule. Cascade reads what math-verify reads (`parse(text, [LatexExtractionConfig(),
ExprExtractionConfig()])`, compared by `verify(parse(f"${gold}$"), ...)`), in math-verify's priority order:
"final answer is X" and `\\boxed{}` first, then "Answer: X", then "answer ... X", then the last LaTeX span
(`$...$`, `\\(...\\)`, `\\[...\\]`, `$$...$$`) or the last number (`18`, `$18`, `**70**`, `1,234`, `1 234`,
the decimal commas `1,22` and `1000,99`, `25%`, `x = 5`); nearby boxes read together as a set
(`\\boxed{1}, \\boxed{2}, \\boxed{3}` answers {1, 2, 3}); a comma and a space inside math make a list
(`\\boxed{32, 349}` is two numbers). It reads only the answer region, which differs from the whole response
in these documented classes:

1. Thinking is not answering: only the text after `</think>` is read, and a response that opened `<think>`
   and never closed it has no answer (math-verify would read a guess inside the thinking).
2. Several boxes are never one number (a false positive of math-verify, which joins nearby boxes with a
   comma and then reads `\\boxed{32} and \\boxed{349}` as 32,349): when the label is one value, only the
   last box is read. When the label lists several parts, math-verify's joined reading stands.
3. An explicit final-answer line after the last box is the answer: "Final Answer: ...", a line opening
   with "Answer:", GSM8K's "#### N" (math-verify ranks an earlier box above "Answer:" and "#### N" as a
   plain number, so a check written after it would win).
4. Readings math-verify misses are rewritten first (`verifiers/math_extraction.py`): `\\fbox`, `°`,
   `\\text{1.25}`, `9 i` (math-verify reads its `i` unlike the label's `9i`).

`extraction="flexible"` / `"strict"` read GSM8K the way lm-eval's gsm8k task does (the last number; the
first `#### N`); `evaluation/benchmarks*.py` names the extraction of each benchmark.

The fast path decides only where it provably reads what math-verify reads: it finds the match math-verify
would try first with math-verify's own regexes and normalisation (`verifiers/math_reference.py`) and
decides when that text and the label are plain values of `verifiers/math_numeric.py`'s small grammar (or
equal strings of a label math-verify parses). Everything else goes through math-verify, its signal timeouts
off and our thread-safe deadline around it (`verifiers/deadline.py`).
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

from cascade_cli.records import last_boxed  # noqa: F401  (re-exported)
from cascade_cli.verifiers.base import RecordError, Score, Verifier, parse_label, require_response
from cascade_cli.verifiers.deadline import DeadlineExceeded, run_with_deadline
from cascade_cli.verifiers.math_extraction import EXTRACTIONS, answer_region, rewrite
from cascade_cli.verifiers.math_numeric import numeric_verdict, structured_verdict
from cascade_cli.verifiers.math_reference import (
    Candidate,
    candidate_text,
    first_candidate,
    gold_text,
    parse_gold,
    reference_verdict,
)

# Regions past this size are not read (a runaway response); below it math-verify's regexes stay fast.
MAX_REGION_CHARS = 100_000
# math-verify's expression regex backtracks quadratically over a long run of digits, spaces and operators
# (`1 1 1 ...`, `1+1+...`: a degenerate response; each digit starts a scan to the run's end), inside C
# code where no deadline can stop it.
_EXPRESSION_RUN = re.compile(r"[\d.\s+\-*×/^()÷]+")
MAX_EXPRESSION_RUN = 1_000
# Exponents (and factorials) this large would make sympy build huge integers in C, where no deadline can interrupt it.
_HUGE_NUMBER = re.compile(r"\^\s*\{?\s*[-+]?\s*\(?\s*\d{6,}|\^\s*\{[^{}]*\^|\*\*\s*\(?\d{6,}|\d{5,}\s*!")

__all__ = ["EXTRACTIONS", "MathVerifier", "answer_region", "fast_verdict", "gold_answer", "parse_gold"]


# ---- fast path --------------------------------------------------------------------------------------

_PLAIN_NUMBER = re.compile(r"^-?(?:\d+\.?\d*|\.\d+)$")
_ASSIGNMENT = re.compile(r"^[A-Za-z]\s*=\s*([^=]+)$")
_THOUSANDS = re.compile(r"^-?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")


def fast_verdict(gold: str, answer: str) -> bool | None:
    """True/False when math-verify's texts for the label and the answer decide it without sympy, else None.

    Decimals: math-verify rounds to 6 places when a float is involved, so equal values are equal and values
    1e-4 (relative) apart differ; closer ones are its call. `x = 3` answers 3 (math-verify takes the right
    side of an assignment when the label is no equation). The rest: `math_numeric.numeric_verdict`.
    """
    gold, answer = _digit_groups(gold), _digit_groups(answer)
    assignment = _ASSIGNMENT.match(answer)
    if assignment and "=" not in gold and "," not in answer:  # `x = 71,331` is no assignment to latex2sympy
        answer = assignment.group(1).strip()
    if "." in gold or "." in answer:
        if not (_PLAIN_NUMBER.match(gold) and _PLAIN_NUMBER.match(answer)):
            return None
        gold_value, answer_value = Fraction(gold), Fraction(answer)
        scale = max(abs(gold_value), abs(answer_value), Fraction(1))
        if gold_value == answer_value:
            return True
        return False if abs(gold_value - answer_value) / scale > Fraction(1, 10**4) and scale < 10**9 else None
    verdict = numeric_verdict(gold, answer)
    return verdict if verdict is not None else structured_verdict(gold, answer)


def _digit_groups(text: str) -> str:
    """`10,080` -> `10080`: latex2sympy reads digit groups of three after a comma as one number."""
    return text.replace(",", "") if _THOUSANDS.match(text) else text


def _fast(gold: str, candidate: Candidate) -> tuple[bool | None, str | None]:
    """(verdict or None, the text math-verify parses) for the match math-verify would try first."""
    answer, gold_read = candidate_text(candidate), gold_text(gold)
    if answer is None or gold_read is None:
        return None, answer
    if answer == gold_read:
        # math-verify keeps the text of the first match it tries beside its value, for gold and answer alike,
        # and `verify` accepts two equal texts: the same text is right whether or not sympy parses it.
        return True, answer
    return fast_verdict(gold_read, answer), answer


def _degenerate(region: str) -> bool:
    if len(region) > MAX_REGION_CHARS:
        return True
    return any(
        run.end() - run.start() > MAX_EXPRESSION_RUN and sum(char.isdigit() for char in run.group(0)) > 200
        for run in _EXPRESSION_RUN.finditer(region)
    )


# ---- the verifier -----------------------------------------------------------------------------------


def gold_answer(label: Any) -> str:
    """`{"answer": ...}` or a bare string / number; anything else is a RecordError."""
    if isinstance(label, dict):
        if "answer" not in label:
            raise RecordError(f"label must have key 'answer'; found keys {sorted(label)}")
        label = label["answer"]
    if isinstance(label, bool) or not isinstance(label, (str, int, float)):
        raise RecordError(f"label answer must be a string or number; found {type(label).__name__}")
    answer = str(label).strip()
    if not answer:
        raise RecordError("label answer is empty")
    return answer


class MathVerifier(Verifier):
    """Reward 1 when the answer region reads as the label's answer, else 0 (`extraction`: EXTRACTIONS)."""

    domain = "math"

    def __init__(
        self, timeout_s: float | None = 5.0, code_switch_reward: float | None = -1.0, extraction: str = "boxed_first"
    ) -> None:
        if extraction not in EXTRACTIONS:
            raise ValueError(f"extraction must be one of {', '.join(EXTRACTIONS)}; found {extraction!r}")
        self.timeout_s = timeout_s
        self.code_switch_reward = code_switch_reward
        self.extraction = extraction

    def check_label(self, label: Any) -> str | None:
        try:
            gold_answer(parse_label({"label": label}))
        except RecordError as error:
            return str(error)
        return None

    def verify_one(self, record: dict[str, Any]) -> Score:
        response = require_response(record)
        gold = rewrite(gold_answer(parse_label(record)))
        region = answer_region(response, gold, self.extraction)
        details: dict[str, Any] = {"gold": gold, "extraction": region.how, "extracted": None}
        if region.text is not None and _degenerate(region.text):
            return Score(0.0, False, {**details, "verdict": "too_complex", "path": "guard"})
        candidate = first_candidate(region.text) if region.text is not None else None
        if candidate is None:  # no region, or nothing in it math-verify would read
            return Score(0.0, False, {**details, "verdict": "no_answer", "path": "extract"})
        if _HUGE_NUMBER.search(candidate.match.group(0)) and not _HUGE_NUMBER.search(gold):
            return Score(0.0, False, {**details, "verdict": "too_complex", "path": "guard"})
        verdict, read = _fast(gold, candidate)
        if verdict is not None:
            return _verdict(verdict, {**details, "extracted": read}, "fast")
        text = region.text
        assert text is not None
        try:
            equal, read = run_with_deadline(lambda: reference_verdict(gold, text), self.timeout_s)
        except DeadlineExceeded:
            return Score(0.0, False, {**details, "extracted": read, "verdict": "timeout", "path": "math_verify"})
        if read is None:
            return Score(0.0, False, {**details, "verdict": "no_answer", "path": "math_verify"})
        return _verdict(equal, {**details, "extracted": read}, "math_verify")


def _verdict(correct: bool, details: dict[str, Any], path: str) -> Score:
    verdict = "correct" if correct else "wrong"
    return Score(1.0 if correct else 0.0, correct, {**details, "verdict": verdict, "path": path})
