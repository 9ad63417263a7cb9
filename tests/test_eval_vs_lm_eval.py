"""benchmarks/eval_vs_lm_eval.py on `tiny`: lm-eval (its HF backend, task YAMLs over the local files) and
`cascade eval` render the same prompts, generate the same text and give the same verdicts; cascade rendering
with another template (its ChatML with the mode flags) makes the comparison fail."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

BENCHMARKS = ["ifeval", "gsm8k"]


def test_cascade_eval_agrees_with_lm_eval_and_a_changed_template_fails(shared_data, tmp_path):
    pytest.importorskip("sacrebleu", reason="lm-eval's dependencies (the bench extra) are not installed")
    from eval_vs_lm_eval import compare_model, misses

    report = compare_model("tiny", BENCHMARKS, limit=2, max_tokens=8, out=tmp_path / "same")
    assert misses(report, BENCHMARKS) == []
    for bench in BENCHMARKS:
        row = report[bench]
        assert row["rows"] == 2 and row["prompts_equal"] == 2 and row["generations_equal"] == 2, row
        assert row["verdicts_equal_on_identical"] == 2 and row["verdicts_equal_on_lm_eval_generations"] == 2
        assert row["cascade"] == row["lm_eval"]
    assert report["ifeval"]["first_prompt_differs"] is None

    changed = compare_model(
        "tiny",
        BENCHMARKS,
        limit=2,
        max_tokens=8,
        out=tmp_path / "changed",
        template="cascade",
        theirs=report["lm_eval_rows"],
    )
    missed = misses(changed, BENCHMARKS)
    assert any(
        line.startswith("ifeval: 2 rendered prompts differ") and "/no_think" in line for line in missed
    )
    assert any(line.startswith("gsm8k: 2 rendered prompts differ") and "/think" in line for line in missed)
