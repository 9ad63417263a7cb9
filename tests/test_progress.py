"""Progress that a log shows: with stderr in a file, long work prints plain lines (stage, step/total, rate,
ETA) at the start, every CASCADE_PROGRESS_SECONDS (also while one step runs long) and at the end; the
libraries' own bars ("Loading weights") stay out of it unless `--verbose`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cascade_cli.progress import LIBRARY_BAR_SWITCHES, VERBOSE_ENV

LINE = re.compile(r"^sft: step (\d+)/(\d+) \(\d+%\), (- step/s|[\d.]+ step/s|[\d.]+ s/step), elapsed \d+:\d\d, ETA ")


def run_logged(args: list, log: Path, seconds: str = "0.2") -> str:
    inherited = {k: v for k, v in os.environ.items() if k not in (*LIBRARY_BAR_SWITCHES, VERBOSE_ENV)}
    env = {**inherited, "HF_HUB_OFFLINE": "1", "CASCADE_PROGRESS_SECONDS": seconds}
    with log.open("w") as handle:
        result = subprocess.run([sys.executable, *map(str, args)], stdout=subprocess.DEVNULL, stderr=handle,
                                env=env, timeout=600)
    text = log.read_text()
    assert result.returncode == 0, text
    return text


def test_a_long_step_still_prints_a_line_every_interval(tmp_path):
    script = (
        "import time\nfrom cascade_cli.progress import Progress\n"
        "with Progress('eval', 2, unit='benchmark', note='math500: generating') as bar:\n"
        "    time.sleep(1.0)\n    bar.advance(note='math500: done')\n"
    )
    lines = run_logged(["-c", script], tmp_path / "log", seconds="0.1").splitlines()
    waiting = [line for line in lines if line.startswith("eval: benchmark 0/2 (0%)")]
    assert len(waiting) >= 5, lines  # the start line, then one every 0.1 s while the step runs
    assert all("math500: generating" in line and "elapsed" in line for line in waiting)
    assert lines[-1].startswith("eval: benchmark 1/2 (50%), ") and "ETA" in lines[-1] and lines[-1].endswith("math500: done")


@pytest.fixture(scope="module")
def sft_data(tmp_path_factory) -> Path:
    from typer.testing import CliRunner

    from cascade_cli.cli import app

    data = tmp_path_factory.mktemp("data") / "sft"
    result = CliRunner().invoke(app, ["prepare-data", "--source", "tiny:sft", "--out", str(data), "--n", "16"])
    assert result.exit_code == 0, result.output
    return data


def sft(data: Path, out: Path, *before: str) -> list:
    return ["-m", "cascade_cli", *before, "sft", "--init", "tiny", "--data", data, "--out", out, "max_steps=6",
            "batch_size=2", "max_seq_len=64"]


def test_training_in_a_log_prints_plain_progress_lines_and_no_library_bars(sft_data, tmp_path):
    log = run_logged(sft(sft_data, tmp_path / "out"), tmp_path / "sft.log")
    lines = [line for line in log.splitlines() if line.startswith("sft: step")]
    assert lines and all(LINE.match(line) for line in lines), log
    assert lines[0].startswith("sft: step 0/6") and lines[-1].startswith("sft: step 6/6 (100%)"), log
    assert "loss" in lines[-1] and "tok/s" in lines[-1]
    assert "\x1b[" not in log and "━" not in log  # no terminal bar drawn into the file
    assert "Loading weights" not in log


def test_verbose_shows_the_libraries_bars(sft_data, tmp_path):
    log = run_logged(sft(sft_data, tmp_path / "out", "--verbose"), tmp_path / "sft.log")
    assert "Loading weights" in log


def test_line_per_update_prints_every_step_in_a_log(tmp_path):
    """RL steps take a minute or more each: `line_per_update` gives each its own line in a log (the heartbeat
    alone could skip steps), without waiting for the interval."""
    script = (
        "from cascade_cli.progress import Progress\n"
        "with Progress('if_rl', 3, line_per_update=True) as bar:\n"
        "    for step in range(3):\n        bar.update(done=step + 1, note=f'reward 0.{step}')\n"
    )
    lines = run_logged(["-c", script], tmp_path / "log", seconds="60").splitlines()
    steps = [line for line in lines if line.startswith("if_rl: step ")]
    assert [line.split(",")[0] for line in steps] == [
        "if_rl: step 0/3 (0%)", "if_rl: step 1/3 (33%)", "if_rl: step 2/3 (67%)", "if_rl: step 3/3 (100%)",
        "if_rl: step 3/3 (100%)",  # the end line
    ], lines
    assert steps[2].endswith("reward 0.1") and "ETA" in steps[2]


def test_a_recipe_run_in_a_log_prints_a_line_per_evaluated_benchmark(tmp_path):
    """`recipe run` evaluates the starting model and each stage: each evaluation shows its benchmarks in a log
    (a full benchmark pass takes minutes, and a log that says nothing meanwhile looks hung)."""
    recipe = tmp_path / "eval_only.yaml"
    recipe.write_text(
        f"name: eval_only\nmodel: tiny\nrun_dir: {tmp_path / 'run'}\n"
        "stages:\n  data:\n    kind: prepare_data\n    source: tiny:math\n    n: 4\n"
        "eval:\n  after_each_stage: true\n  benchmarks: [tiny_math, tiny_if]\n  k: 1\n  limit: 2\n  max_tokens: 8\n  backend: hf\n"
    )
    log = run_logged(["-m", "cascade_cli", "recipe", "run", recipe], tmp_path / "run.log", seconds="60")
    lines = [line for line in log.splitlines() if line.startswith("eval base: benchmark ")]
    assert lines and lines[0].startswith("eval base: benchmark 0/2 (0%)"), log
    assert any("tiny_math: generating + scoring 2 problems" in line for line in lines), lines
    assert lines[-1].startswith("eval base: benchmark 2/2 (100%)"), lines
    tiny_if = json.loads((tmp_path / "run" / "eval" / "base" / "results.json").read_text())["benchmarks"]["tiny_if"]
    headline = f"tiny_if: {tiny_if['primary']} {tiny_if['score']:.1f}, {tiny_if['truncated']} of 2 cut at the token limit"
    assert lines[-1].endswith(headline), (lines, headline)  # each benchmark's score as it finishes
