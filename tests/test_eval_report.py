"""`cascade report`: report.md (stage x benchmark with deltas), report.png, and flagged regressions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cascade_cli.cli import app
from cascade_cli.errors import CascadeUsageError
from cascade_cli.evaluation.report import stage_eval_dir, write_report

SCORES = {  # stage -> benchmark -> score; ifeval falls 20.7 points after rlhf (as in the paper's Table 2)
    "sft": {"aime24": 83.6, "ifeval": 70.8},
    "rlhf": {"aime24": 86.1, "ifeval": 50.1},
    "if_rl": {"aime24": 86.2, "ifeval": 90.4},
    "math_rl": {"aime24": 90.2, "ifeval": 92.1},
}


def _write_run(run_dir: Path, scores: dict, listed: list[str] | None = None) -> None:
    for stage, benches in scores.items():
        out = stage_eval_dir(run_dir, stage)
        out.mkdir(parents=True)
        results = {
            "benchmarks": {
                name: {"score": score, "primary": "prompt_strict" if name == "ifeval" else "avg@64"}
                for name, score in benches.items()
            },
            "evaluated_at": f"2026-01-01T00:0{len(list(run_dir.glob('eval/*')))}:00",
        }
        (out / "results.json").write_text(json.dumps(results))
    (run_dir / "run.json").write_text(json.dumps({"stages": listed if listed is not None else list(scores)}))


def test_report_table_deltas_plot_and_regression(tmp_path: Path) -> None:
    _write_run(tmp_path, SCORES)
    report = write_report(tmp_path, max_regression=3.0)
    assert report["stages"] == ["sft", "rlhf", "if_rl", "math_rl"]
    assert report["regressions"] == [
        {"benchmark": "ifeval", "stage": "rlhf", "previous_stage": "sft", "delta": -20.7}
    ]
    markdown = (tmp_path / "report.md").read_text()
    assert "| Benchmark (metric) | sft | rlhf | if_rl | math_rl |" in markdown
    assert "| aime24 (avg@64) | 83.6 | 86.1 (+2.5) | 86.2 (+0.1) | 90.2 (+4.0) ★ |" in markdown  # its best stage
    assert "- **aime24**: `math_rl` (90.2)" in markdown and report["best"]["aime24"] == "math_rl"
    assert "**50.1 (-20.7)** ⚠" in markdown
    assert "**ifeval** fell 20.7 points after `rlhf`" in markdown
    png = (tmp_path / "report.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 5000


def test_threshold_and_stage_order(tmp_path: Path) -> None:
    # run.json lists math_rl before if_rl; a `base` eval not listed goes first
    scores = {**SCORES, "base": {"aime24": 10.0, "ifeval": 20.0}}
    _write_run(tmp_path, scores, listed=["sft", "rlhf", "math_rl", "if_rl"])
    report = write_report(tmp_path, max_regression=25.0)
    assert report["stages"] == ["base", "sft", "rlhf", "math_rl", "if_rl"]
    assert report["regressions"] == []
    assert "None." in (tmp_path / "report.md").read_text()


def test_recipe_run_manifest_shape(tmp_path: Path) -> None:
    # `recipe run` writes {"stage_order": [...], "stages": {name: record}}; stage_order wins
    _write_run(tmp_path, SCORES)
    records = {name: {"status": "completed"} for name in ["math_rl", "sft", "rlhf", "if_rl"]}
    (tmp_path / "run.json").write_text(json.dumps({"stage_order": list(SCORES), "stages": records}))
    assert write_report(tmp_path)["stages"] == list(SCORES)
    (tmp_path / "run.json").write_text(json.dumps({"stages": records}))  # no order: the mapping's order
    assert write_report(tmp_path)["stages"] == ["math_rl", "sft", "rlhf", "if_rl"]
    (tmp_path / "run.json").write_text(json.dumps({"stages": "sft"}))
    with pytest.raises(
        CascadeUsageError, match=r"run.json: 'stages' must be a list of stage names; found str"
    ):
        write_report(tmp_path)


def test_missing_results_and_bad_files(tmp_path: Path) -> None:
    with pytest.raises(CascadeUsageError, match="not found"):
        write_report(tmp_path / "nope")
    with pytest.raises(
        CascadeUsageError, match=r"no evaluation results \(expected eval/<stage>/results.json\)"
    ):
        write_report(tmp_path)
    (tmp_path / "eval" / "sft").mkdir(parents=True)
    (tmp_path / "eval" / "sft" / "results.json").write_text("{broken")
    with pytest.raises(CascadeUsageError, match=r"results.json: malformed JSON"):
        write_report(tmp_path)


def test_report_command(tmp_path: Path) -> None:
    _write_run(tmp_path, SCORES)
    result = CliRunner().invoke(app, ["report", str(tmp_path), "--fail-on-regression"])
    assert result.exit_code == 1, result.output
    assert "ifeval fell 20.7 points after stage rlhf" in result.output
    assert (tmp_path / "report.png").is_file()
    result = CliRunner().invoke(app, ["report", str(tmp_path), "--max-regression", "30"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(app, ["report", str(tmp_path / "missing")])
    assert result.exit_code == 2 and "run directory" in result.output and "not found" in result.output


def test_mixed_k_is_stated_per_stage_gaps_stay_gaps_and_flat_scores_get_a_readable_axis(tmp_path: Path) -> None:
    import math

    from cascade_cli.evaluation.report import plot_series, score_axis

    for stage, k, benches in (("base", 1, {"tiny_math": 3.0, "tiny_code": 10.0}), ("sft", 2, {"tiny_math": 20.0}),
                              ("math_rl", 2, {"tiny_math": 30.0, "tiny_code": 25.0})):
        (tmp_path / "eval" / stage).mkdir(parents=True)
        summaries = {name: {"score": score, "primary": f"avg@{k}", "k": k} for name, score in benches.items()}
        (tmp_path / "eval" / stage / "results.json").write_text(json.dumps({"benchmarks": summaries}))
    (tmp_path / "run.json").write_text(json.dumps({"stage_order": ["base", "sft", "math_rl"]}))
    report = write_report(tmp_path)
    markdown = (tmp_path / "report.md").read_text()
    assert "| tiny_math | 3.0 [avg@1] | 20.0 (+17.0) [avg@2] | 30.0 (+10.0) [avg@2] ★ |" in markdown
    assert "| tiny_code | 10.0 [avg@1] | – | 25.0 (+15.0) [avg@2] ★ |" in markdown
    series = plot_series(report["stages"], report["benchmarks"], report["table"])
    assert series["tiny_math"] == [3.0, 20.0, 30.0]
    assert series["tiny_code"][0] == 10.0 and math.isnan(series["tiny_code"][1])  # a gap, not a bridge
    low, high = score_axis([0.0, 0.0, 0.0])  # all-zero scores: a 10-point axis from 0, not -0.04..0.04
    assert -1 < low <= 0 and high >= 10
    low, high = score_axis([12.0, 15.0])
    assert low < 12 and high > 15 and high - low >= 10
