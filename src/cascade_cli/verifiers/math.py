"""Math verifier: the final answer after `</think>` against `label["answer"]`, reward 1 or 0.

Extraction: the last `\\boxed{...}` / `\\fbox{...}` (nested braces), unless an explicit final-answer phrase
("Final Answer: ...", "The final answer is ...") comes after it; when the label lists several parts and the
last box holds one, the last boxes together (`x = \\boxed{3}`, `y = \\boxed{4}` for `(3, 4)`); else the answer
after "final answer is X" / "Answer: X" (the math of a sentence: `The largest $n$ is 34.` -> 34); else a last
`$...$` / `\\(...\\)` / `\\[...\\]` math span that ends a concluding sentence. Anything else is no answer
(a wrong guess would pay for a lucky span). A response that opened `<think>` and never closed it has no answer.
Comparison: a fast path (normalised string equality, exact numbers) decides most rows without sympy; the rest go through math-verify with its signal timeouts off and our own thread-safe
deadline around it (`verifiers/deadline.py`).
"""

from __future__ import annotations

import logging
import re
from fractions import Fraction
from functools import lru_cache
from typing import Any

from cascade_cli.chat import answer_text, split_response
from cascade_cli.records import boxed_spans, last_boxed  # noqa: F401  (last_boxed: re-exported)
from cascade_cli.verifiers.base import RecordError, Score, Verifier, parse_label, require_response
from cascade_cli.verifiers.deadline import DeadlineExceeded, run_with_deadline
from cascade_cli.verifiers.math_numeric import (
    numeric_verdict,
    split_top_level,
    strip_unit,
    structured_verdict,
)

# An answer longer than this is not a final answer; sympy on it could run for minutes inside C code.
MAX_ANSWER_CHARS = 400
# Exponents (and factorials) this large would make sympy build huge integers in C, where no deadline can interrupt it.
_HUGE_NUMBER = re.compile(r"\^\s*\{?\s*[-+]?\s*\(?\s*\d{6,}|\^\s*\{[^{}]*\^|\*\*\s*\(?\d{6,}|\d{5,}\s*!")


class _DropDisabledTimeoutWarning(logging.Filter):
    # math-verify warns once that its timeout is off; ours is on (verifiers/deadline.py).
    def filter(self, record: logging.LogRecord) -> bool:
        return "Timeout is disabled" not in record.getMessage()


for _name in ("math_verify.parser", "math_verify.grader"):
    logging.getLogger(_name).addFilter(_DropDisabledTimeoutWarning())


# ---- extraction -------------------------------------------------------------------------------------

# Markdown emphasis may sit around the phrase: "**Final Answer:** 5", "**Answer**: 5".
_ANSWER_PHRASE = re.compile(
    r"(?:final\s+answer[*_\s]*(?:is|:|=)|the\s+answer[*_\s]*(?:is|:|=)|\banswer[*_\s]*:|\bans\s*:)[*_\s]*",
    re.IGNORECASE,
)
# `\$` is an escaped dollar sign (a currency answer), never a delimiter.
_MATH_SPANS = re.compile(
    r"(?<!\\)\$\$((?:\\.|[^\\$])+?)\$\$|(?<!\\)\$((?:\\.|[^\\$])+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]",
    re.DOTALL,
)


def _strip_math_delimiters(text: str) -> str:
    text = text.strip()
    for opening, closing in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
        if text.startswith(opening) and text.endswith(closing) and len(text) > len(opening) + len(closing):
            return text[len(opening) : -len(closing)].strip()
    return text


# Only these phrases may overrule a box written before them ("the answer is correct", "check our answer: ..."
# must not): "final answer", or "Answer:" opening a line.
_FINAL_PHRASE = re.compile(r"(final\s+answer)|^[#*_ \t]*(answer[*_\s]*:)", re.IGNORECASE | re.MULTILINE)
_SENTENCE_END = re.compile(r"\.\s|\.$|;\s|,?\s+(?:since|because|as|which|where)\s")
_PROSE_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}")
_COPULA = re.compile(r"\s(?:is|are|was|were|equals|be|becomes)\s+|=\s*")
_LEADING_NUMBER = re.compile(r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:/\d+)?(?:\s*\\?%)?")
_LOOKS_LIKE_MATH = re.compile(r"[\d\\]|^\(?[A-Ea-e]\)?$")
# A bare math span counts only as the response's last words, in a sentence that concludes.
_CONCLUSION = re.compile(
    r"\b(?:so|thus|therefore|hence|equals?|is|are|get|gives?|obtain|yields?|total|result)\b|=", re.IGNORECASE
)


def _span_text(match: re.Match[str]) -> str:
    return next(group for group in match.groups() if group is not None).strip()


def _mask_math(line: str) -> str:
    """`line` with each math span blanked (same length), so words and `=` inside math are not prose."""
    return _MATH_SPANS.sub(lambda match: "#" * len(match.group(0)), line)


def _math_in_sentence(line: str) -> str | None:
    """The math a sentence states: `The largest $n$ is 34.` -> `34`; None when it states none."""
    masked = _mask_math(line)
    copulas = list(_COPULA.finditer(masked))
    tail = line[copulas[-1].end() :] if copulas else line
    math = _MATH_SPANS.match(tail)
    if math:
        return _span_text(math)
    number = _LEADING_NUMBER.match(tail)
    if number:
        return number.group(0).strip()
    if copulas and len(_PROSE_WORD.findall(_mask_math(tail))) <= 1 and tail.strip():
        return tail.strip()  # "The day is Tuesday"
    spans = list(_MATH_SPANS.finditer(line))
    return _span_text(spans[-1]) if spans else None


def _phrase_answer(rest: str) -> str | None:
    """The answer that follows an answer phrase: a math span, a short expression, or the math of a sentence."""
    math = _MATH_SPANS.match(rest)
    if math:
        return _span_text(math)
    line = rest.split("\n", 1)[0].strip()
    # "The answer is 12." / "Answer: 3, since ..." -> keep the answer, drop the sentence end.
    line = _SENTENCE_END.split(line, maxsplit=1)[0].strip().rstrip(".,;:").strip()
    if len(_PROSE_WORD.findall(_mask_math(line))) >= 2:
        return _math_in_sentence(line)
    return _strip_math_delimiters(line) or None


def _after_answer_phrase(text: str) -> str | None:
    matches = list(_ANSWER_PHRASE.finditer(text))
    return _phrase_answer(text[matches[-1].end() :]) if matches else None


def _final_phrase_answer(text: str, after: int) -> str | None:
    """The math after the last explicit final-answer phrase that starts at or after `after`, if any."""
    for final in reversed(list(_FINAL_PHRASE.finditer(text, after))):
        phrase = _ANSWER_PHRASE.match(text, final.start(final.lastindex or 0))
        if phrase:
            answer = _phrase_answer(text[phrase.end() :])
            return answer if answer and _LOOKS_LIKE_MATH.search(answer) else None
    return None


def _last_math_span(text: str) -> str | None:
    """The last math span, only when it ends the response and its sentence concludes (else no answer)."""
    spans = list(_MATH_SPANS.finditer(text))
    if not spans or text[spans[-1].end() :].strip(" \t\n.!") != "":
        return None
    sentence_start = max(text.rfind("\n", 0, spans[-1].start()), text.rfind(". ", 0, spans[-1].start()))
    if not _CONCLUSION.search(_mask_math(text[sentence_start + 1 : spans[-1].start()])):
        return None
    return _span_text(spans[-1]) or None


def _joined_boxes(gold: str, boxes: list[str]) -> str | None:
    """The last boxes written as the label's list or tuple, when the label has several parts and the last box
    alone has one: `x = \\boxed{3}`, `y = \\boxed{4}` against `(3, 4)` -> `(3, 4)`."""
    gold_parts = split_top_level(_light(gold))
    if gold_parts is None or len(boxes) < 2 or _GROUPED_DIGITS.search(_light(gold)):
        return None  # one part, or `58,500`: one number
    opening, items, closing = gold_parts
    if (opening, closing) not in (("", ""), ("(", ")"), ("\\{", "\\}")) or "\\infty" in gold:
        return None  # an interval's ends are not answered by boxing its endpoints apart
    last = split_top_level(boxes[-1])
    if last is not None and len(last[1]) == len(items) and _bracketed(last[1]) == _bracketed(items):
        return None  # the last box already holds every part
    parts = [_strip_assignment(box, gold) for box in boxes[-len(items) :]]
    return opening + ", ".join(parts) + closing


def _bracketed(items: list[str]) -> bool:
    return any(item.startswith(("(", "[", "\\{")) for item in items)


def extract_answer(response: str, gold: str | None = None) -> tuple[str | None, str]:
    """(answer, how) from a full response; how is boxed | boxes | answer_phrase | math_span | none | unfinished.

    An explicit final-answer phrase after the last box wins over it; with a label of several parts (`gold`),
    the last several boxes answer together; without a box or phrase, only a concluding last math span counts.
    """
    if not split_response(response).finished:
        return None, "unfinished"
    text = answer_text(response)
    boxes = boxed_spans(text)
    if boxes:
        final = _final_phrase_answer(text, boxes[-1][1])
        if final:
            return final, "answer_phrase"
        joined = _joined_boxes(gold, [box for _, _, box in boxes]) if gold else None
        return (joined, "boxes") if joined else (boxes[-1][2].strip(), "boxed")
    phrase = _after_answer_phrase(text)
    if phrase:
        return phrase, "answer_phrase"
    span = _last_math_span(text)
    if span:
        return span, "math_span"
    return None, "none"


# ---- fast path --------------------------------------------------------------------------------------

_TEXT_WRAPPER = re.compile(r"\\(?:text|textbf|mathrm|mbox|mathbf)\s*\{([^{}]*)\}")
_SPACING = re.compile(r"\\[,;:!> ]|\\q?quad|~")
_DEGREES = re.compile(r"\^\s*\{?\\circ\}?|°|\\degree")
_FRAC = re.compile(r"^(-?)\\[dt]?frac\{(-?\d+)\}\{(-?\d+)\}$|^(-?)\\[dt]?frac(\d)(\d)$")
_DECIMAL = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)$")
_THOUSANDS = re.compile(r"^[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_SLASH = re.compile(r"^(-?\d+)/(-?\d+)$")
# A comma then a space separates list items; only `1,234` (no space, groups of three) groups digits.
_LIST_COMMA = re.compile(r"(\d),\s+(?=\d)")


def normalize(answer: str) -> str:
    """A light canonical form for string equality: spacing, delimiters, `\\left`, `\\dfrac`, text wrappers."""
    text = answer.strip()
    text = _strip_math_delimiters(text)
    text = _TEXT_WRAPPER.sub(r"\1", text)
    text = text.replace("\\left", "").replace("\\right", "").replace("\\displaystyle", "")
    text = text.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    text = text.replace("{,}", "")
    text = _LIST_COMMA.sub(r"\1;", text)  # `32, 349` is a list of two numbers, never 32349
    text = _SPACING.sub("", text)
    text = _DEGREES.sub("", text)
    text = text.replace("\\%", "").replace("%", "").replace("\\$", "")
    text = re.sub(r"\s+", "", text)
    return text.rstrip(".")


def as_number(text: str) -> Fraction | None:
    """An exact number when `text` (normalised) is a plain integer, decimal, thousands-separated or a/b."""
    if _THOUSANDS.match(text):
        text = text.replace(",", "")
    if _DECIMAL.match(text):
        return Fraction(text)
    slash = _SLASH.match(text)
    if slash and int(slash.group(2)) != 0:
        return Fraction(int(slash.group(1)), int(slash.group(2)))
    frac = _FRAC.match(text)
    if frac:
        sign, numerator, denominator = (
            (frac.group(1), frac.group(2), frac.group(3))
            if frac.group(2) is not None
            else (frac.group(4), frac.group(5), frac.group(6))
        )
        if int(denominator) != 0:
            value = Fraction(int(numerator), int(denominator))
            return -value if sign else value
    return None


_ASSIGNMENT = re.compile(r"^\s*[A-Za-z]\s*=\s*([^=]+)$")


def _strip_assignment(answer: str, gold: str) -> str:
    """`x = 3` answers `3` (math-verify reads it the same way), unless the label itself is an equation."""
    assignment = _ASSIGNMENT.match(answer)
    return assignment.group(1).strip() if assignment and "=" not in gold else answer


_GROUPED_DIGITS = re.compile(r"\d,\d{3}(?!\d)")


def _light(answer: str) -> str:
    """Delimiters, final period, trailing unit and LaTeX thin spaces in digit groups (`10,\\!080`) removed."""
    text = strip_unit(_strip_math_delimiters(answer).rstrip("."))
    return re.sub(r",\s*(?:\\!|\{\})\s*", ",", text).replace("{,}", ",")


_BASE_NUMBER = re.compile(r"^([0-9A-Za-z]+)_\{?(\d+)\}?$")


def as_base_number(text: str) -> tuple[int, int] | None:
    """`4210_{5}` -> (value, base) for a numeral written in base 2..36, else None."""
    match = _BASE_NUMBER.match(text)
    if not match or not 2 <= int(match.group(2)) <= 36:
        return None
    try:
        return int(match.group(1), int(match.group(2))), int(match.group(2))
    except ValueError:
        return None


def fast_verdict(gold: str, predicted: str) -> bool | None:
    """True/False when decidable without sympy, else None."""
    verdict = _fast_verdict(gold, predicted)
    if verdict is False and ("%" in gold or "%" in predicted):
        return None  # 50% against 0.5: math-verify reads them as equal; so do we, through it
    return verdict


def _fast_verdict(gold: str, predicted: str) -> bool | None:
    predicted = _strip_assignment(predicted, gold)
    gold_norm, predicted_norm = normalize(gold), normalize(predicted)
    if gold_norm == predicted_norm and gold_norm:
        return True
    gold_number, predicted_number = as_number(gold_norm), as_number(predicted_norm)
    if gold_number is not None and predicted_number is not None:
        if gold_number == predicted_number:
            return True
        # A rounded decimal of a repeating fraction (1/3 vs 0.333333) is math-verify's call, not ours.
        scale = max(abs(gold_number), Fraction(1))
        rounded = "." in gold_norm or "." in predicted_norm
        if rounded and abs(gold_number - predicted_number) / scale < Fraction(1, 10**4):
            return None
        return False
    gold_base, predicted_base = as_base_number(gold_norm), as_base_number(predicted_norm)
    if gold_base is not None and predicted_base is not None:
        return gold_base == predicted_base
    gold_light, predicted_light = _light(gold), _light(predicted)
    if _GROUPED_DIGITS.search(gold_light) or _GROUPED_DIGITS.search(predicted_light):
        return None  # "10,080": a thousands separator or a list? math-verify's call
    verdict = numeric_verdict(gold_light, predicted_light)
    return verdict if verdict is not None else structured_verdict(gold_light, predicted_light)


# ---- math-verify ------------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _parse_gold(gold: str) -> tuple[Any, ...]:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    return tuple(
        parse(f"${gold}$", [LatexExtractionConfig(), ExprExtractionConfig()], parsing_timeout=None)  # type: ignore[arg-type]
    )


def _parse_prediction(predicted: str) -> list[Any]:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    return parse(
        f"\\boxed{{{predicted}}}",
        [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()],
        parsing_timeout=None,  # type: ignore[arg-type]
    )


# math-verify treats `i` as the imaginary unit only when it stands alone ("9 i"), not in "9i": the same
# number parsed twice with different assumptions compares unequal. A space between a coefficient and a
# single letter means nothing in LaTeX, so drop it on both sides.
_COEFFICIENT_SPACE = re.compile(r"(\d)\s+([A-Za-z])(?![A-Za-z])")


def math_verify_equal(gold: str, predicted: str) -> bool:
    from math_verify import verify

    gold, predicted = _COEFFICIENT_SPACE.sub(r"\1\2", gold), _COEFFICIENT_SPACE.sub(r"\1\2", predicted)
    gold_parsed = list(_parse_gold(gold))
    if not gold_parsed:
        return False
    return bool(verify(gold_parsed, _parse_prediction(predicted), timeout_seconds=None))


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
    """Reward 1 when the extracted final answer equals the label's answer, else 0."""

    domain = "math"

    def __init__(self, timeout_s: float | None = 5.0, code_switch_reward: float | None = -1.0) -> None:
        self.timeout_s = timeout_s
        self.code_switch_reward = code_switch_reward

    def check_label(self, label: Any) -> str | None:
        try:
            gold_answer(parse_label({"label": label}))
        except RecordError as error:
            return str(error)
        return None

    def verify_one(self, record: dict[str, Any]) -> Score:
        response = require_response(record)
        gold = gold_answer(parse_label(record))
        extracted, how = extract_answer(response, gold)
        details: dict[str, Any] = {"extracted": extracted, "gold": gold, "extraction": how}
        if not extracted:
            return Score(0.0, False, {**details, "verdict": "no_answer", "path": "extract"})
        fast = fast_verdict(gold, extracted)
        if fast is not None:
            return _verdict(fast, details, "fast")
        if len(extracted) > MAX_ANSWER_CHARS or (
            _HUGE_NUMBER.search(extracted) and not _HUGE_NUMBER.search(gold)
        ):
            return Score(0.0, False, {**details, "verdict": "too_complex", "path": "guard"})
        try:
            equal = run_with_deadline(lambda: math_verify_equal(gold, extracted), self.timeout_s)
        except DeadlineExceeded:
            return Score(0.0, False, {**details, "verdict": "timeout", "path": "math_verify"})
        return _verdict(equal, details, "math_verify")


def _verdict(correct: bool, details: dict[str, Any], path: str) -> Score:
    verdict = "correct" if correct else "wrong"
    return Score(1.0 if correct else 0.0, correct, {**details, "verdict": verdict, "path": path})
