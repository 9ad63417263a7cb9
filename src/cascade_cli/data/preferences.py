"""Preference sources -> canonical pref rows (`{"id", "domain": "pref", "prompt", "chosen", "rejected", "mode",
"source"}`) for the reward model.

Understood shapes (one function each; `normalize_preferences` picks by columns or by `fmt`):
- HelpSteer2/3 style: a prompt (`prompt`, or HelpSteer3's `context` message list) and two responses
  (`response_1`/`response_2` or `response1`/`response2`) with a signed preference strength
  (`preference_strength` or `overall_preference`: negative = response 1 better, 0 = tie). Ties are dropped.
- UltraFeedback style: `chosen`/`rejected` message lists (binarized; the prompt is the turns before the
  last assistant turn, or `prompt`), with optional `score_chosen`/`score_rejected` (equal scores: a tie,
  dropped); or the raw form, `instruction` + `completions` with ratings (`overall_score`, else the mean of
  the `annotations` ratings): best vs worst, dropped when all ratings are equal.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from cascade_cli.errors import CascadeUsageError

FORMATS = ("auto", "helpsteer", "ultrafeedback")
_STRENGTH_KEYS = ("preference_strength", "overall_preference")


class SkipRow(ValueError):
    """A row that carries no preference (a tie); counted, not an error."""


def _text(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and isinstance(value[-1], dict):
        return str(value[-1].get("content", ""))
    raise ValueError(f"{where}: expected text or a message list, found {type(value).__name__}")


def _pick(row: dict[str, Any], *names: str) -> Any:
    for name in names:
        if name in row and row[name] is not None:
            return row[name]
    raise ValueError(f"missing field {' or '.join(repr(n) for n in names)}")


def helpsteer_pair(row: dict[str, Any]) -> dict[str, Any]:
    prompt = _pick(row, "prompt", "context")
    first = _text(_pick(row, "response_1", "response1"), "response_1")
    second = _text(_pick(row, "response_2", "response2"), "response_2")
    strength = _pick(row, *_STRENGTH_KEYS)
    try:
        strength = float(strength)
    except (TypeError, ValueError):
        raise ValueError(f"preference strength: expected a number, found {strength!r}") from None
    if strength == 0:
        raise SkipRow("tie")
    chosen, rejected = (first, second) if strength < 0 else (second, first)
    return {"prompt": prompt, "chosen": chosen, "rejected": rejected, "margin": abs(strength)}


def _rating(completion: dict[str, Any]) -> float:
    if completion.get("overall_score") is not None:
        return float(completion["overall_score"])
    ratings = []
    for annotation in (completion.get("annotations") or {}).values():
        value = annotation.get("Rating") if isinstance(annotation, dict) else annotation
        try:
            ratings.append(float(value))
        except (TypeError, ValueError):
            continue
    if not ratings:
        raise ValueError("completion without overall_score or numeric annotation ratings")
    return sum(ratings) / len(ratings)


def ultrafeedback_pair(row: dict[str, Any]) -> dict[str, Any]:
    if "completions" in row:
        prompt = _pick(row, "instruction", "prompt")
        completions = row["completions"]
        if not isinstance(completions, list) or len(completions) < 2:
            raise ValueError("completions: expected a list of at least two rated responses")
        rated = sorted(((_rating(c), i) for i, c in enumerate(completions)), key=lambda t: (-t[0], t[1]))
        (best, best_i), (worst, worst_i) = rated[0], rated[-1]
        if best == worst:
            raise SkipRow("tie")
        return {
            "prompt": prompt,
            "chosen": str(completions[best_i].get("response", "")),
            "rejected": str(completions[worst_i].get("response", "")),
            "margin": best - worst,
        }
    chosen, rejected = _pick(row, "chosen"), _pick(row, "rejected")
    if row.get("score_chosen") is not None and row.get("score_chosen") == row.get("score_rejected"):
        raise SkipRow("tie")
    prompt = row.get("prompt")
    if isinstance(chosen, list) and len(chosen) > 1:
        context = [dict(m) for m in chosen[:-1]]
        if prompt is None or (isinstance(prompt, str) and len(context) > 1):
            prompt = context  # multi-turn: the conversation before the answer is the prompt
    if prompt is None:
        raise ValueError("missing field 'prompt' (and the chosen side carries no conversation)")
    pair = {"prompt": prompt, "chosen": _text(chosen, "chosen"), "rejected": _text(rejected, "rejected")}
    if row.get("score_chosen") is not None and row.get("score_rejected") is not None:
        pair["margin"] = float(row["score_chosen"]) - float(row["score_rejected"])
    return pair


def detect_format(row: dict[str, Any]) -> str:
    if any(key in row for key in ("response_1", "response1")):
        return "helpsteer"
    if "completions" in row or ("chosen" in row and "rejected" in row):
        return "ultrafeedback"
    raise ValueError("not a preference row (expected response_1/response_2 + preference strength, "
                     "chosen/rejected, or instruction + rated completions)")


def normalize_preferences(
    rows: list[dict[str, Any]], fmt: str = "auto", source: str = "", where: str = "data"
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Canonical pref rows and counts (`kept`, `ties_dropped`). A malformed row is a usage error that names
    its row number."""
    if fmt not in FORMATS:
        raise CascadeUsageError(f"format: expected one of {', '.join(FORMATS)}; found {fmt!r}")
    out: list[dict[str, Any]] = []
    counts: Counter[str] = Counter()
    for number, row in enumerate(rows, start=1):
        try:
            if not isinstance(row, dict):
                raise ValueError(f"expected a JSON object, found {type(row).__name__}")
            kind = detect_format(row) if fmt == "auto" else fmt
            pair = helpsteer_pair(row) if kind == "helpsteer" else ultrafeedback_pair(row)
        except SkipRow:
            counts["ties_dropped"] += 1
            continue
        except ValueError as error:
            raise CascadeUsageError(f"{where}: row {number}: {error}") from None
        row_id = row.get("id", row.get("prompt_id", f"{source or 'pref'}-{number - 1:06d}"))
        out.append(
            {"id": str(row_id), "domain": "pref", "mode": row.get("mode") or "no_think",
             "source": source, **pair}
        )
    counts["kept"] = len(out)
    return out, dict(counts)
