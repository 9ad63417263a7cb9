"""Math verifier fidelity: agreement with math-verify, precision, recall, no-answer rate and the fast path's share.

Reading fidelity (issue 34): tests/data/math_reading_fidelity.jsonl, responses in many answer styles (and
SmolLM2's real ones) labelled by math-verify on the whole response: per style, how often cascade's verdict
agrees with math-verify's, precision and recall of both against the construction's truth, how often each
reads no answer, and the share the fast path decides.
Check sets: tests/data/math_checkset.jsonl (MATH-500 rewrites), tests/data/math_fidelity_checkset.jsonl
(issue 21's answer-format classes) and the 500 MATH-500 reference solutions against their own answers
(recall only: every one should be accepted). Misses are counted by category.

Run: PYTHONPATH=src python benchmarks/math_fidelity.py   (or verify_throughput.py --section math_checkset)
Compare two trees by pointing PYTHONPATH at the other one's src/.
"""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CHECKSETS = [REPO / "tests" / "data" / "math_checkset.jsonl", REPO / "tests" / "data" / "math_fidelity_checkset.jsonl"]
READING_SET = REPO / "tests" / "data" / "math_reading_fidelity.jsonl"
# Styles built to show where cascade reads otherwise than math-verify (verifiers/math.py's documented classes).
DOCUMENTED_CLASSES = ("joined_boxes", "near_boxes", "answer_in_thinking")
ADVERSARIAL = ("joined_boxes", "answer_in_thinking", "issue21_negative")


def math500_reference_rows() -> list[dict[str, Any]]:
    base = os.environ.get("CASCADE_SHARED_DATA")
    candidates = [Path(base)] if base else []
    candidates += [REPO.parent / "shared" / "data", REPO / "shared" / "data", Path("/work/shared/data")]
    source = next((c / "math500" / "test.jsonl" for c in candidates if (c / "math500" / "test.jsonl").exists()), None)
    if source is None:
        sys.exit("MATH-500 not found (set CASCADE_SHARED_DATA)")
    problems = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines()]
    return [
        {"id": p["unique_id"], "category": "reference_solution", "expected": True, "response": p["solution"],
         "answer": p["answer"]}
        for p in problems
    ]


def measure(name: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    from cascade_cli.verifiers import verify_batch

    records = [{"response": row["response"], "label": {"answer": row["answer"]}} for row in rows]
    scores = verify_batch(records, domain="math", workers=2, options={"math": {"code_switch_reward": None}})
    counts, misses, paths = Counter(), Counter(), Counter()
    for row, score in zip(rows, scores, strict=True):
        kind = ("t" if score.passed == row["expected"] else "f") + ("p" if score.passed else "n")
        counts[kind] += 1
        paths[score.details.get("path", "error")] += 1
        if kind[0] == "f":
            misses[("false_positive" if score.passed else "false_negative", row["category"])] += 1
    precision = counts["tp"] / max(1, counts["tp"] + counts["fp"])
    recall = counts["tp"] / max(1, counts["tp"] + counts["fn"])
    fast_share = paths["fast"] / max(1, len(rows))
    print(f"{name}: {len(rows)} rows, precision {precision:.4f}, recall {recall:.4f}, "
          f"fast path {fast_share:.1%} of decisions, paths {dict(paths)}")
    for (kind, category), count in sorted(misses.items()):
        print(f"  {kind:<15} {category:<36} {count}")
    return {"precision": precision, "recall": recall, "fast_share": fast_share, "misses": dict(misses)}


def _rates(rows: list[dict[str, Any]], ours: list[bool], ours_none: list[bool]) -> dict[str, float | None]:
    """Agreement, both precision/recall pairs (over rows with a construction truth; None where no row has
    one, as for real responses) and no-answer rates."""
    truth = [(row, mine) for row, mine in zip(rows, ours, strict=True) if row["expected"] is not None]

    def precision_recall(verdicts: list[tuple[bool, bool]]) -> tuple[float | None, float | None]:
        if not verdicts:
            return None, None
        tp = sum(said and want for said, want in verdicts)
        fp = sum(said and not want for said, want in verdicts)
        fn = sum(want and not said for said, want in verdicts)
        return (tp / (tp + fp) if tp + fp else 1.0), (tp / (tp + fn) if tp + fn else 1.0)

    ours_p, ours_r = precision_recall([(mine, row["expected"]) for row, mine in truth])
    mv_p, mv_r = precision_recall([(row["math_verify"], row["expected"]) for row, _ in truth])
    return {
        "rows": len(rows),
        "agreement": sum(mine == row["math_verify"] for row, mine in zip(rows, ours, strict=True)) / len(rows),
        "precision": ours_p, "recall": ours_r, "mv_precision": mv_p, "mv_recall": mv_r,
        "no_answer": sum(ours_none) / len(rows),
        "mv_no_answer": sum(row["math_verify_read"] is None for row in rows) / len(rows),
    }  # fmt: skip


def reading_set_rows(path: Path = READING_SET) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def reading_fidelity(rows: list[dict[str, Any]], workers: int = 2) -> dict[str, Any]:
    """Score rows of the reading-fidelity set; per style and overall figures (see the module docstring)."""
    from cascade_cli.verifiers import verify_batch

    records = [{"response": row["response"], "label": {"answer": row["answer"]}} for row in rows]
    scores = verify_batch(records, domain="math", workers=workers, options={"math": {"code_switch_reward": None}})
    ours = [score.passed for score in scores]
    ours_none = [score.details.get("verdict") == "no_answer" for score in scores]
    fast = [score.details.get("path") in ("fast", "extract") for score in scores]
    by_style: dict[str, list[int]] = {}
    for index, row in enumerate(rows):
        by_style.setdefault(row["style"], []).append(index)
    styles = {}
    for style, indices in sorted(by_style.items()):
        picked = [[values[i] for i in indices] for values in (rows, ours, ours_none, fast)]
        styles[style] = {**_rates(*picked[:3]), "fast": sum(picked[3]) / len(indices)}
    adversarial = [i for i, row in enumerate(rows) if row["style"] in ADVERSARIAL]
    outside = [i for i, row in enumerate(rows) if row["style"] not in DOCUMENTED_CLASSES]
    return {
        "all": {**_rates(rows, ours, ours_none), "fast": sum(fast) / len(rows)},
        "styles": styles,
        "adversarial_false_positives": sum(ours[i] for i in adversarial),
        "adversarial_rows": len(adversarial),
        "agreement_outside_documented": sum(ours[i] == rows[i]["math_verify"] for i in outside) / len(outside),
        "disagreements": [
            (rows[i]["id"], rows[i]["math_verify"], ours[i], scores[i].details.get("extraction"),
             scores[i].details.get("extracted"), rows[i]["math_verify_read"])
            for i in range(len(rows)) if ours[i] != rows[i]["math_verify"]
        ],
    }  # fmt: skip


def print_reading_fidelity(result: dict[str, Any], show: int = 20) -> None:
    print(f"reading fidelity ({READING_SET.name}): cascade vs math-verify on the whole response")
    header = f"{'style':<20}{'rows':>6}{'agree':>8}{'P':>7}{'R':>7}{'mv P':>7}{'mv R':>7}{'none':>7}{'mv none':>8}{'fast':>7}"
    print(header)
    def rate(value: float | None) -> str:
        return f"{value:>7.3f}" if value is not None else f"{'-':>7}"

    for name, figures in [*result["styles"].items(), ("ALL", result["all"])]:
        pairs = "".join(rate(figures[key]) for key in ("precision", "recall", "mv_precision", "mv_recall"))
        print(f"{name:<20}{figures['rows']:>6}{figures['agreement']:>8.2%}{pairs}"
              f"{figures['no_answer']:>7.1%}{figures['mv_no_answer']:>8.1%}{figures['fast']:>7.1%}")  # fmt: skip
    print(f"adversarial negatives accepted: {result['adversarial_false_positives']} of {result['adversarial_rows']}; "
          f"agreement outside the documented classes: {result['agreement_outside_documented']:.2%}")  # fmt: skip
    print(f"disagreements ({len(result['disagreements'])}): id, math-verify, cascade, extraction, cascade read, mv read")
    for entry in result["disagreements"][:show]:
        print("  ", *entry)


def main() -> None:
    if READING_SET.exists():
        print_reading_fidelity(reading_fidelity(reading_set_rows()))
        print()
    for path in CHECKSETS:
        if path.exists():
            measure(path.name, [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()])
    measure("MATH-500 reference solutions", math500_reference_rows())


if __name__ == "__main__":
    main()
