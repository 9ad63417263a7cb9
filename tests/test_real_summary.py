"""benchmarks/real_summary.py: start-to-end changes of several real_gains.py runs, with goals, in one table and plot."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "real_summary.py"
_spec = importlib.util.spec_from_file_location("real_summary", SCRIPT)
real_summary = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(real_summary)


def fake_run(out: Path, seed: int, stages: dict[str, list[bool]], kinds: dict[str, str],
             words: dict[str, int] | None = None) -> Path:
    """OUT/seedS as real_gains.py leaves it: run.json and, per evaluated stage, one IFEval verdict per problem
    (each answer `words[stage]` words long, 2 unless given)."""
    run_dir = out / f"seed{seed}"
    order = ["data_if", *kinds]
    records = {"data_if": {"kind": "prepare_data", "seconds": 1.0}}
    records.update({name: {"kind": kind, "seconds": 600.0} for name, kind in kinds.items()})
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps({"stage_order": order, "stages": records}))
    for stage, verdicts in stages.items():
        (run_dir / "eval" / stage).mkdir(parents=True)
        response = " ".join(["word"] * (words or {}).get(stage, 2))
        rows = [{"benchmark": "ifeval", "id": str(i), "response": response, "details": {"prompt_strict": ok}}
                for i, ok in enumerate(verdicts)]
        (run_dir / "eval" / stage / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run_dir


def test_start_to_end_change_skips_the_middle_stage_and_judges_the_goal(tmp_path: Path):
    out = tmp_path / "smol-math"
    base = [False] * 20
    sft = [True] * 10 + [False] * 10  # the middle stage is not what is compared
    end = [True] * 4 + [False] * 16
    fake_run(out, 0, {"base": base, "sft": sft, "math_rl": end}, {"sft": "sft", "math_rl": "rlvr"},
             words={"base": 120, "sft": 90, "math_rl": 7})
    (row,) = real_summary.run_rows("smol-math", 0, out / "seed0")
    assert row["end_stage"] == "math_rl" and row["n"] == 20
    assert row["words"] == [120, 7]  # the median answer at the start and at the end, not the middle stage's
    assert row["change"][0] == 20.0 and 0 < row["change"][1] <= 20.0 <= row["change"][2]
    assert row["training_s"] == 1200.0  # sft + math_rl, data preparation not counted
    # a stage resumed by an older cascade recorded its last segment only: its steps' seconds are the floor
    (out / "seed0" / "math_rl").mkdir()
    (out / "seed0" / "math_rl" / "metrics.jsonl").write_text("".join(
        json.dumps({"step": i, "time_step": 300.0}) + "\n" for i in range(1, 4)))
    assert real_summary.training_seconds(out / "seed0") == 600.0 + 900.0
    table = real_summary.render([row], [], {("smol-math", "ifeval"): 30.0})
    assert "+20.0 [" in table and "missed (>= 30)" in table and "20 min" in table and "| 120 -> 7 words |" in table
    assert "from the better start" not in table
    assert "met (>= 5)" in real_summary.render([row], [], {("smol-math", "ifeval"): 5.0})


def test_an_unfinished_seed_is_left_out_and_the_cli_writes_the_plot(tmp_path: Path):
    out = tmp_path / "smol-if"
    fake_run(out, 0, {"base": [False, True, False, False], "if_rl": [True, True, True, False]}, {"if_rl": "rlvr"})
    fake_run(out, 1, {"base": [False, True, False, False]}, {"if_rl": "rlvr"})  # if_rl not evaluated yet
    assert [seed for seed, _ in real_summary.seed_dirs(out)] == [0]
    plot = tmp_path / "summary.png"
    result = subprocess.run([sys.executable, str(SCRIPT), str(out), "--goal", "smol-if:ifeval=5", "--plot", str(plot)],
                            capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "| smol-if | 0 | IFEval (4) | 25.0" in result.stdout and "+50.0" in result.stdout
    assert plot.stat().st_size > 5_000


def test_usage_errors_name_the_argument(tmp_path: Path):
    result = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--goal", "smol-if=5"], capture_output=True, text=True)
    assert result.returncode == 2 and "--goal 'smol-if=5': expected RECIPE:BENCHMARK=POINTS" in result.stderr
    result = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "none")], capture_output=True, text=True)
    assert result.returncode == 2 and "none: no finished seed" in result.stderr


def test_other_start_counts_the_end_from_the_better_start(tmp_path: Path):
    """A start measured another way (cascade's chat template) above the run's own start lowers the change counted
    from the better one; below it, the run's own start is the better one."""
    out = tmp_path / "smol-if"
    fake_run(out, 0, {"base": [True] * 2 + [False] * 8, "if_rl": [True] * 5 + [False] * 5}, {"if_rl": "rlvr"})
    (row,) = real_summary.run_rows("smol-if", 0, out / "seed0")  # start 20.0, end 50.0
    higher = real_summary.render([row], [], {}, {"ifeval": 35.0})
    assert "| start | other start | end | change [95% CI] | from the better start |" in higher
    assert "| 35.0 | 50.0 [" in higher and "] | +15.0 |" in higher
    lower = real_summary.render([row], [], {}, {"ifeval": 10.0})
    assert "| 10.0 | 50.0 [" in lower and "] | +30.0 |" in lower
    assert "| - | 50.0 [" in real_summary.render([row], [], {}, {"gsm8k": 50.0})  # no other start for IFEval
    rlhf = {"recipe": "smol-if", "seed": 0, "stage": "rlhf", "before": 0.1, "after": 0.3, "change": None}
    for other_starts in ({}, {"ifeval": 35.0}):  # every line has the header's columns, with or without two starts
        lines = real_summary.render([row], [rlhf], {}, other_starts).splitlines()
        assert len({line.count("|") for line in lines}) == 1 and "| +0.200 |" in lines[-1]
    result = subprocess.run([sys.executable, str(SCRIPT), str(out), "--other-start", "ifeval=35"],
                            capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 0 and "] | +15.0 |" in result.stdout, result.stderr
    result = subprocess.run([sys.executable, str(SCRIPT), str(out), "--other-start", "ifeval"],
                            capture_output=True, text=True)  # fmt: skip
    assert result.returncode == 2 and "--other-start 'ifeval': expected BENCHMARK=SCORE" in result.stderr


def test_saved_rows_merge_with_new_runs_and_a_rerun_replaces_its_row(tmp_path: Path):
    """--json writes the rows, --rows reads them back: the table outlives its runs, a new recipe adds its rows and
    a re-run of a saved recipe and seed replaces that row."""
    first = tmp_path / "first" / "smol-if"
    fake_run(first, 0, {"base": [False] * 8 + [True] * 2, "if_rl": [True] * 5 + [False] * 5}, {"if_rl": "rlvr"})
    saved = tmp_path / "rows.json"
    result = subprocess.run([sys.executable, str(SCRIPT), str(first), "--json", str(saved)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    shutil.rmtree(tmp_path / "first")  # the runs are gone; their rows are not
    rerun = tmp_path / "second" / "smol-if"
    fake_run(rerun, 0, {"base": [False] * 8 + [True] * 2, "if_rl": [True] * 3 + [False] * 7}, {"if_rl": "rlvr"})
    other = tmp_path / "second" / "smol-mopd"
    fake_run(other, 0, {"base": [False] * 10, "distill": [True] * 1 + [False] * 9}, {"distill": "distill"})
    alone = subprocess.run([sys.executable, str(SCRIPT), "--rows", str(saved)], capture_output=True, text=True)
    assert alone.returncode == 0 and "| smol-if | 0 | IFEval (10) | 20.0 [" in alone.stdout and "+30.0 [" in alone.stdout
    merged = subprocess.run([sys.executable, str(SCRIPT), str(rerun), str(other), "--rows", str(saved)],
                            capture_output=True, text=True)  # fmt: skip
    assert merged.returncode == 0, merged.stderr
    lines = [line for line in merged.stdout.splitlines() if line.startswith("| smol")]
    assert len(lines) == 2 and "+10.0 [" in lines[0] and lines[0].startswith("| smol-if | 0 |")  # the re-run's
    assert lines[1].startswith("| smol-mopd | 0 | IFEval (10) | 0.0 [")


def test_bad_saved_rows_are_one_line_naming_the_file(tmp_path: Path):
    bad = tmp_path / "rows.json"
    for content, message in (("not json", "expected a JSON file"), ('{"rows": [{"recipe": "x"}]}', "rows[0]: expected keys")):
        bad.write_text(content)
        result = subprocess.run([sys.executable, str(SCRIPT), "--rows", str(bad)], capture_output=True, text=True)
        assert result.returncode == 2 and f"--rows {bad}: {message}" in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
    result = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True)
    assert result.returncode == 2 and "expected at least one OUT folder or --rows FILE" in result.stderr
