"""math-verify, the reference reader of the math verifier, called the way its authors call it.

    gold = parse(f"${answer}$", extraction_config=[LatexExtractionConfig(), ExprExtractionConfig()])
    pred = parse(response,      extraction_config=[LatexExtractionConfig(), ExprExtractionConfig()])
    verify(gold, pred)

with math-verify's signal timeouts off (they only work in the main thread); `verifiers/deadline.py` bounds
the time instead. `first_candidate` finds, with math-verify's own regexes and ordering, the match its
`parse` tries first (lowest priority number, then rightmost end, then leftmost start), and `candidate_text`
gives the LaTeX it would hand to latex2sympy for it (math-verify's own normalisation). The fast path in
`verifiers/math.py` decides on that text only when it provably reads the same value.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import groupby
from typing import Any

from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify


class _DropDisabledTimeoutWarning(logging.Filter):
    # math-verify warns once that its timeout is off; ours is on (verifiers/deadline.py).
    def filter(self, record: logging.LogRecord) -> bool:
        return "Timeout is disabled" not in record.getMessage()


for _name in ("math_verify.parser", "math_verify.grader"):
    logging.getLogger(_name).addFilter(_DropDisabledTimeoutWarning())

EXTRACTION_CONFIG = (LatexExtractionConfig(), ExprExtractionConfig())
_LATEX_CONFIG = EXTRACTION_CONFIG[0]


@lru_cache(maxsize=1)
def _priority_groups() -> list[list[tuple[re.Pattern[str], Any]]]:
    """math-verify's extraction regexes, grouped by priority, lowest first (as its `parse` tries them)."""
    from math_verify.parser import get_extraction_regexes

    patterns = [
        (priority, pattern, target)
        for regexes, target in get_extraction_regexes(EXTRACTION_CONFIG)
        for pattern, priority in regexes
    ]
    patterns.sort(key=lambda item: item[0])
    return [[(pattern, target) for _, pattern, target in group] for _, group in groupby(patterns, lambda i: i[0])]


@dataclass(frozen=True)
class Candidate:
    match: re.Match[str]
    latex: bool  # a LaTeX match (else a plain number or expression)


def first_candidate(text: str) -> Candidate | None:
    """The match math-verify's `parse` tries first in `text` and does not pass over, or None when it finds
    nothing to read. Within a priority group it tries matches rightmost first; an expression of plain
    numbers that sympy cannot parse (`540**.` in `**540**.`) it passes over, as we do here with its own
    `extract_expr`; the next group is tried only when no match of this one is left."""
    from math_verify.parser import extract_expr

    for group in _priority_groups():
        found = [
            (match, isinstance(target, LatexExtractionConfig))
            for pattern, target in group
            for match in pattern.finditer(text)
        ]
        # math-verify's order: stable sort by (end, -start), descending
        for match, latex in sorted(found, key=lambda item: (item[0].end(), -item[0].start()), reverse=True):
            if latex or match.groupdict().get("expr") is None or extract_expr(match)[0] is not None:
                return Candidate(match, latex)
    return None


def candidate_text(candidate: Candidate) -> str | None:
    """The text math-verify parses for `candidate` when it is one plain value; None for several values
    (`$1$ and $2$`, a set), a percentage, or an expression of plain numbers (`9 * 2`)."""
    groups = {name: value for name, value in candidate.match.groupdict().items() if value}
    if any(name.endswith("percent") for name in groups):
        return None
    if not candidate.latex:
        integer = next((v for n, v in groups.items() if n.startswith("integer")), "")
        decimal = next((v for n, v in groups.items() if n.startswith("decimal")), "")
        if not (integer or decimal):
            return None
        integer = integer.translate(str.maketrans("", "", ", ")).lstrip("0") or "0"
        return integer + decimal.replace(",", ".")
    latex = [(name, value) for name, value in groups.items() if "_latex" in name]
    if len(latex) != 1:
        return None
    name, value = latex[0]
    config = _LATEX_CONFIG.normalization_config
    if name.endswith("latexBoxed"):
        config = replace(config, boxed="last")
    from latex2sympy2_extended.latex2sympy2 import normalize_latex

    return normalize_latex(value, config=config)


@lru_cache(maxsize=4096)
def gold_text(gold: str) -> str | None:
    """The text math-verify parses for `parse(f"${gold}$")`, when the whole gold is one inline span."""
    if "$" in gold or "\n" in gold or "%" in gold:
        return None
    candidate = first_candidate(f"${gold}$")
    if candidate is None or not candidate.latex or candidate.match.group(0) != f"${gold}$":
        return None
    return candidate_text(candidate)


# ---- the reference itself -------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def parse_gold(gold: str) -> tuple[Any, ...]:
    return tuple(parse(f"${gold}$", list(EXTRACTION_CONFIG), parsing_timeout=None))  # type: ignore[arg-type]


def parse_response(text: str) -> list[Any]:
    return parse(text, list(EXTRACTION_CONFIG), parsing_timeout=None)  # type: ignore[arg-type]


def reference_verdict(gold: str, text: str) -> tuple[bool, str | None]:
    """(math-verify's verdict, what it read) for the gold answer and a response (or a part of one)."""
    predicted = parse_response(text)
    read = str(predicted[-1]) if predicted else None
    gold_parsed = list(parse_gold(gold))
    if not gold_parsed or not predicted:
        return False, read
    return bool(verify(gold_parsed, predicted, timeout_seconds=None)), read  # type: ignore[arg-type]
