"""Math verifier fidelity: precision, recall and the fast path's share on the check sets and MATH-500.

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


def main() -> None:
    for path in CHECKSETS:
        if path.exists():
            measure(path.name, [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()])
    measure("MATH-500 reference solutions", math500_reference_rows())


if __name__ == "__main__":
    main()
