"""The math verifier's reading against math-verify's on the reading-fidelity set (issue 34's goals), the fast
path against math-verify's labels, and GSM8K's flexible reading against lm-eval's own filter."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
READING_SET = DATA / "math_reading_fidelity.jsonl"
BUILDER = DATA / "build_math_reading_fidelity.py"
BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_rows() -> list[dict]:
    return [json.loads(line) for line in READING_SET.read_text(encoding="utf-8").splitlines()]


def fidelity_benchmark():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import math_fidelity
    finally:
        sys.path.remove(str(BENCHMARKS))
    return math_fidelity


# The two GSM8K rows where an explicit `#### N` after the working is the answer (documented class 3) and
# math-verify reads a number of the working instead.
ANSWER_LINE_ROWS = ("gsm8k_hashes/258/wrong", "gsm8k_hashes/876/right")
# Styles where cascade's answer region is not the whole response by design (verifiers/math.py's classes).
DOCUMENTED = ("joined_boxes", "near_boxes", "answer_in_thinking")


def sample_rows(per_style: int = 8) -> list[dict]:
    """Every style's first rows (a right and a wrong answer each) and the answer-line rows: a cross-section
    of the set that scores in a few seconds."""
    taken: dict[str, int] = {}
    sample = []
    for row in load_rows():
        taken[row["style"]] = taken.get(row["style"], 0) + 1
        if taken[row["style"]] <= per_style or row["id"] in ANSWER_LINE_ROWS:
            sample.append(row)
    return sample


def test_the_set_is_large_varied_and_holds_real_responses() -> None:
    rows = load_rows()
    styles = {row["style"] for row in rows}
    assert len(rows) >= 3000 and len(styles - {"real_gsm8k", "real_math500"}) >= 15
    real = [row for row in rows if row["style"].startswith("real_")]
    assert len(real) >= 500 and {row["style"] for row in real} == {"real_gsm8k", "real_math500"}
    assert all(row["expected"] is None for row in real) and all(row["expected"] is not None for row in rows if row not in real)
    assert sum(row["style"] == "issue21_negative" for row in rows) >= 1000


def test_sample_reads_what_math_verify_reads_outside_the_documented_classes() -> None:
    """On a cross-section of every style: cascade's verdict is math-verify's label, except in the documented
    classes, where it is the construction's truth; a fast-path verdict on a region that is the whole response
    is math-verify's label."""
    from cascade_cli.verifiers import verify_batch
    from cascade_cli.verifiers.math_extraction import answer_region, rewrite

    rows = sample_rows()
    records = [{"response": row["response"], "label": {"answer": row["answer"]}} for row in rows]
    scores = verify_batch(records, domain="math", workers=1, options={"math": {"code_switch_reward": None}})
    fast_checked = 0
    for row, score in zip(rows, scores, strict=True):
        if row["style"] in DOCUMENTED or row["id"] in ANSWER_LINE_ROWS:
            assert score.passed == row["expected"] != row["math_verify"], (row["id"], score.details)
        else:
            assert score.passed == row["math_verify"], (row["id"], score.details)
        region = answer_region(row["response"], rewrite(row["answer"])).text
        if score.details["path"] == "fast" and region == row["response"].strip():
            fast_checked += 1
            assert score.passed == row["math_verify"], (row["id"], score.details)
    assert len({row["style"] for row in rows}) >= 20 and fast_checked >= 80


@pytest.mark.slow  # scores the whole set (~6,000 responses, about half a minute on two cores)
def test_goals_agreement_precision_recall() -> None:
    """Agreement with math-verify's verdict >= 99%; no adversarial negative accepted; precision and recall
    (against the construction's truth) at least math-verify's; every disagreement in a documented class or
    one of the answer-line rows."""
    fidelity = fidelity_benchmark().reading_fidelity(load_rows())
    overall = fidelity["all"]
    assert overall["agreement"] >= 0.99, overall
    assert fidelity["adversarial_false_positives"] == 0 and fidelity["adversarial_rows"] >= 1300
    assert overall["recall"] >= overall["mv_recall"] and overall["precision"] >= overall["mv_precision"]
    for row_id, *_ in fidelity["disagreements"]:
        assert row_id.split("/")[0] in DOCUMENTED or row_id in ANSWER_LINE_ROWS, row_id


@pytest.mark.slow  # scores ~4,700 responses
def test_fast_path_verdicts_are_math_verifys_labels() -> None:
    """Where cascade's region is the whole response, every verdict the fast path gives equals math-verify's
    label on that response (the labels were computed by math-verify alone, in the builder)."""
    from cascade_cli.verifiers import verify_batch
    from cascade_cli.verifiers.math_extraction import answer_region, rewrite

    rows = [row for row in load_rows() if not row["style"].startswith("issue21")]
    records = [{"response": row["response"], "label": {"answer": row["answer"]}} for row in rows]
    scores = verify_batch(records, domain="math", workers=2, options={"math": {"code_switch_reward": None}})
    checked = 0
    for row, score in zip(rows, scores, strict=True):
        region = answer_region(row["response"], rewrite(row["answer"])).text
        if score.details["path"] == "fast" and region == row["response"].strip() and rewrite(row["answer"]) == row["answer"]:
            checked += 1
            assert score.passed == row["math_verify"], (row["id"], score.details)
    assert checked >= 1500


def test_gsm8k_flexible_reads_the_number_lm_eval_reads() -> None:
    """On SmolLM2's real GSM8K responses our `flexible` token is lm-eval's flexible-extract token (its own
    RegexFilter, the gsm8k.yaml pattern), cleaned as its metric cleans it, whenever that token has a digit."""
    pytest.importorskip("lm_eval")
    import yaml
    from lm_eval.filters.extraction import RegexFilter

    from cascade_cli.verifiers.math_extraction import answer_region

    task = yaml.safe_load((Path(importlib.util.find_spec("lm_eval").origin).parent / "tasks" / "gsm8k" / "gsm8k.yaml").read_text())
    flexible = next(entry for entry in task["filter_list"] if entry["name"] == "flexible-extract")["filter"][0]
    regex = RegexFilter(regex_pattern=flexible["regex_pattern"], group_select=flexible["group_select"])
    rows = [row for row in load_rows() if row["style"] == "real_gsm8k"]
    tokens = regex.apply([[row["response"]] for row in rows], rows)
    compared = 0
    for row, (token,) in zip(rows, tokens, strict=True):
        if any(char.isdigit() for char in token) and "</think>" not in row["response"]:
            compared += 1
            cleaned = token.replace("$", "").removesuffix(".")
            assert answer_region(row["response"], row["answer"], "flexible").text == cleaned, (row["id"], token)
    assert compared >= 250


@pytest.mark.slow  # labels ~5,000 responses with math-verify (~1-2 min)
def test_reading_set_is_what_its_builder_makes() -> None:
    spec = importlib.util.spec_from_file_location("build_math_reading_fidelity", BUILDER)
    assert spec and spec.loader
    builder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builder)
    assert builder.build() == load_rows()
