"""Which part of a response the math verifier reads: the answer region (the rule is in `verifiers/math.py`).

Three extractions, one per benchmark convention (`evaluation/benchmarks*.py` says which applies where):

    boxed_first  math-verify's reading of the answer region (boxes first, then answer phrases, then the
                 last LaTeX span or number), with the region narrowed where math-verify misreads
    flexible     lm-eval's GSM8K `flexible-extract`: the last number, a match of its regex
                 `(-?[$0-9.,]{2,})|(-?[0-9]+)` (group_select -1)
    strict       lm-eval's GSM8K `strict-match`: the first `#### (\\-?[0-9\\.\\,]+)`

A token of `flexible` / `strict` is cleaned as lm-eval's metric cleans it (`$` and a final `.` dropped) and
then read as a number by math-verify (`1,234` = 1234, `1,22` = 1.22). Two departures from lm-eval, both
about what a number is: lm-eval's last match may hold no digit (`$.` after `$\\boxed{18}$.`, an ellipsis),
which it then scores as a wrong answer, where `flexible` takes the last match with a digit; and lm-eval
drops every comma (`1,22` = 122) and compares strings (`18.0` is not `18`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cascade_cli.chat import answer_text, split_response
from cascade_cli.records import boxed_spans
from cascade_cli.verifiers.math_numeric import split_top_level

EXTRACTIONS = ("boxed_first", "flexible", "strict")

# Readings math-verify misses, rewritten before it reads: its box regex finds `\boxed` only (its normaliser
# knows `\fbox`), it does not parse `°` or a number wrapped in `\text{}`, and it reads the `i` of `9 i` as
# the imaginary unit but the `i` of `9i` as a variable (so `6 + 9 i` never equals a label `6+9i`).
_REWRITES = (
    (re.compile(r"\\fbox\s*\{"), r"\\boxed{"),
    (re.compile(r"°"), r"^\\circ"),
    (re.compile(r"\\(?:text|textbf|mathrm)\{\s*(-?\d+(?:\.\d+)?)\s*\}"), r"\1"),
)
_IMAGINARY_SPACE = re.compile(r"(\d)\s+i(?![A-Za-z])")

# An explicit final-answer line: "Final Answer: ...", a line opening with "Answer:", GSM8K's "#### N".
_ANSWER_LINE = re.compile(
    r"^[#>*_ \t]*(?:final\s+answer|answer)[*_ \t]*(?::|=|\bis\b)|^[ \t]*####(?=[ \t]*[-$\d])", re.I | re.M
)
_STATES_MATH = re.compile(r"[\d\\$]")
_FLEXIBLE = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")  # lm-eval gsm8k.yaml, flexible-extract
_STRICT = re.compile(r"#### (\-?[0-9\.\,]+)")  # lm-eval gsm8k.yaml, strict-match
_THOUSANDS = re.compile(r"^[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
_DIGIT = re.compile(r"\d")


@dataclass(frozen=True)
class Region:
    """The text the reader reads (None: no answer) and how it was chosen."""

    text: str | None
    how: str  # unfinished | answer_line | last_box | response | flexible | strict | none


def rewrite(text: str) -> str:
    """`text` with the readings math-verify misses rewritten (applied to gold labels too)."""
    for pattern, replacement in _REWRITES:
        text = pattern.sub(replacement, text)
    return _IMAGINARY_SPACE.sub(r"\1i", text)


def one_part(gold: str) -> bool:
    """Whether the label is one value (`32,349` is one number), not a list, tuple, set or interval."""
    gold = gold.strip().strip("$").strip()
    return _THOUSANDS.match(gold) is not None or split_top_level(gold) is None


def answer_region(response: str, gold: str, extraction: str = "boxed_first") -> Region:
    """The part of `response` that answers, under `extraction` (one of EXTRACTIONS)."""
    if not split_response(response).finished:
        return Region(None, "unfinished")
    text = rewrite(answer_text(response))
    if extraction == "flexible":
        tokens = [next(group for group in match if group) for match in _FLEXIBLE.findall(text)]
        return _token_region(next((t for t in reversed(tokens) if _DIGIT.search(t)), None), "flexible")
    if extraction == "strict":
        match = _STRICT.search(text)
        return _token_region(match.group(1) if match else None, "strict")
    return _boxed_first_region(text, gold)


def _token_region(token: str | None, how: str) -> Region:
    """lm-eval's cleaning of a token (`$` and a final `.` dropped); the comma is left to math-verify."""
    if token is None:
        return Region(None, "none")
    token = token.strip().replace("$", "")
    return Region(token[:-1] if token.endswith(".") else token, how)


def _boxed_first_region(text: str, gold: str) -> Region:
    # An empty box ("the answer is within \boxed{}") answers nothing; math-verify passes over it too.
    boxes = [box for box in boxed_spans(text) if box[2].strip()]
    last_box_end = boxes[-1][1] if boxes else 0
    for line in reversed(list(_ANSWER_LINE.finditer(text, last_box_end))):
        line_end = text.find("\n", line.end())
        stated = text[line.start() : line_end if line_end >= 0 else len(text)]
        if _STATES_MATH.search(stated[line.end() - line.start() :]):
            return Region(stated, "answer_line")
    if len(boxes) >= 2 and one_part(gold):
        return Region(text[boxes[-1][0] :], "last_box")
    return Region(text, "response")
