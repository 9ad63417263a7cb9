"""Pass-rate filtering: the band (paper thresholds), pass rates from the real verifiers, the written files and
reuse, the `prepare-data filter` subcommand on the tiny model, and `prepare-data` still taking overrides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cascade_cli.chat import render_prompt
from cascade_cli.data import tiny_tasks
from cascade_cli.data.io import load_canonical
from cascade_cli.data.pass_rate import (
    apply_band,
    band_verdict,
    build_filter_config,
    estimate_pass_rates,
    run_pass_rate_filter,
)
from cascade_cli.data.prepare import build_prepare_config, run_prepare_data
from cascade_cli.errors import CascadeUsageError
from cascade_cli.manifest import fingerprint_path

WRONG = {"math": "The answer is \\boxed{-987654}.", "code": "```python\nprint('nope')\n```"}


def test_band_follows_the_paper_thresholds():
    # math: k=16, drop problems solved at least 75% of the time (12/16), keep the rest, unsolved included
    assert band_verdict(12 / 16, 0.0, 0.75) == "too_easy"
    assert band_verdict(11 / 16, 0.0, 0.75) is None
    assert band_verdict(0.0, 0.0, 0.75) is None
    # code: k=8, drop 8/8 and 0/8
    assert band_verdict(8 / 8, 0.1, 1.0) == "too_easy"
    assert band_verdict(0 / 8, 0.1, 1.0) == "too_hard"
    assert band_verdict(1 / 8, 0.1, 1.0) is None and band_verdict(7 / 8, 0.1, 1.0) is None
    kept, dropped = apply_band([{"id": "a"}, {"id": "b"}], [0.5, 1.0], 8, 0.0, 0.75)
    assert kept == [{"id": "a", "pass_rate": 0.5, "pass_rate_k": 8}]
    assert dropped == [{"id": "b", "pass_rate": 1.0, "pass_rate_k": 8, "dropped": "too_easy"}]


def test_mixed_files_take_a_band_per_domain():
    rows = [{"id": "m", "domain": "math"}, {"id": "c0", "domain": "code"}, {"id": "c8", "domain": "code"}]
    kept, dropped = apply_band(rows, [0.0, 0.0, 1.0], 8, 0.0, 0.75, {"code": [0.1, 1.0]})
    assert [row["id"] for row in kept] == ["m"]  # unsolved math stays; 0/8 and 8/8 code go
    assert [(row["id"], row["dropped"]) for row in dropped] == [("c0", "too_hard"), ("c8", "too_easy")]


def _rows(domain: str, n: int) -> list[dict]:
    return tiny_tasks.generate(domain, n, seed=3, wrong_fraction=0.0)


def _scripted_sampler(rows: list[dict], solved: dict[str, int]):
    """Answers each prompt with its row's correct reference `solved[id]` times out of n, else a wrong one."""
    by_prompt = {render_prompt(row["prompt"], row["mode"]): row for row in rows}

    def sample(prompts: list[str], n: int) -> list[list[tuple[str, str]]]:
        out = []
        for prompt in prompts:
            row = by_prompt[prompt]
            good = solved[row["id"]]
            out.append([(row["reference"] if j < good else WRONG[row["domain"]], "stop") for j in range(n)])
        return out

    return sample


def test_pass_rates_come_from_the_real_verifiers():
    rows = _rows("math", 5) + _rows("code", 4)
    k = 4
    solved = {row["id"]: index % (k + 1) for index, row in enumerate(rows)}
    rates = estimate_pass_rates(rows, _scripted_sampler(rows, solved), k, batch_prompts=3)
    assert rates == [solved[row["id"]] / k for row in rows]


def _write(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_filter_writes_kept_dropped_summary_and_reuses_pass_rates(tmp_path):
    rows = _rows("math", 8)
    k = 4
    solved = {row["id"]: index % (k + 1) for index, row in enumerate(rows)}  # 0,1,2,3,4,0,1,2
    data = _write(tmp_path / "in" / "data.jsonl", rows)
    _write(tmp_path / "in" / "heldout.jsonl", _rows("math", 1))
    out = tmp_path / "out"
    config = build_filter_config({"init": "unused", "data": str(data.parent), "out": str(out), "k": k})
    metrics = run_pass_rate_filter(config, sampler=_scripted_sampler(rows, solved))
    # max_pass 0.75: 3/4 and 4/4 are too easy
    assert metrics["kept"] == 6 and metrics["too_easy"] == 2 and metrics["sampled"] == 8
    kept = load_canonical(out)
    assert [row["pass_rate"] for row in kept] == [0.0, 0.25, 0.5, 0.0, 0.25, 0.5]
    assert all(row["pass_rate_k"] == k for row in kept)
    dropped = [json.loads(line) for line in (out / "dropped.jsonl").read_text().splitlines()]
    assert [(row["pass_rate"], row["dropped"]) for row in dropped] == [(0.75, "too_easy"), (1.0, "too_easy")]
    summary = json.loads((out / "pass_rate.json").read_text())
    assert summary["histogram"] == {"0/4": 2, "1/4": 2, "2/4": 2, "3/4": 1, "4/4": 1}
    assert summary["by_domain"]["math"]["kept"] == 6
    assert (out / "heldout.jsonl").is_file() and (out / "cascade_stage.json").is_file()

    # Re-band the written rows without sampling: a sampler that is called would fail the test.
    def no_sampling(prompts, n):
        raise AssertionError("reused rows must not be sampled")

    again = tmp_path / "again"
    config = build_filter_config(
        {"init": "unused", "data": str(out), "out": str(again), "k": k, "min_pass": 0.25, "reuse": True}
    )
    metrics = run_pass_rate_filter(config, sampler=no_sampling)
    assert metrics["sampled"] == 0 and metrics["reused"] == 6 and metrics["kept"] == 4
    # A different k is not the same measurement: those rows are sampled again.
    config = build_filter_config(
        {"init": "unused", "data": str(out), "out": str(tmp_path / "k8"), "k": 8, "reuse": True}
    )
    with pytest.raises(AssertionError, match="must not be sampled"):
        run_pass_rate_filter(config, sampler=no_sampling)


def test_rows_without_a_verifier_and_bad_bands_are_usage_errors(tmp_path):
    sft = _write(tmp_path / "sft.jsonl", tiny_tasks.generate("sft", 2, seed=0))
    config = build_filter_config({"init": "tiny", "data": str(sft), "out": str(tmp_path / "o")})
    with pytest.raises(CascadeUsageError, match=r"sft.jsonl: row 1: domain 'sft' has no verifier"):
        run_pass_rate_filter(config)
    math = _write(tmp_path / "math.jsonl", _rows("math", 2))
    for values, message in (
        ({"max_pass": 0.2, "min_pass": 0.5}, "max_pass: expected a value above min_pass"),
        ({"k": 0}, "k: expected an integer >= 1, found 0"),
        ({"min_pass": 1.5}, r"min_pass: expected a number in \[0, 1\], found 1.5"),
        ({"bands": {"code": [0.5, 0.1]}}, r"bands.code: max_pass: expected a value above min_pass"),
    ):
        # The config class refuses the value when it is built, before any sampling (config/checks.py).
        with pytest.raises(CascadeUsageError, match=message):
            build_filter_config({"init": "tiny", "data": str(math), "out": str(tmp_path / "o"), **values})


def test_prepare_data_filter_command_on_the_tiny_model(tmp_path, cli):
    data = tmp_path / "math"
    # `prepare-data` stays a command with options and key=value overrides next to its `filter` subcommand.
    result = cli(
        ["prepare-data", "--source", "tiny:math", "--out", data, "--n", "6", "--holdout", "2", "seed=4"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads((data / "cascade_stage.json").read_text())["config"]["seed"] == 4
    out = tmp_path / "filtered"
    result = cli(
        [
            "prepare-data",
            "filter",
            "--model",
            "tiny",
            "--data",
            data,
            "--out",
            out,
            "--k",
            "2",
            "--max-pass",
            "0.75",
            "max_new_tokens=8",
        ]
    )
    assert result.exit_code == 0, result.output
    rows = load_canonical(out)
    dropped = (out / "dropped.jsonl").read_text().splitlines()
    # A random-init model solves nothing: every row has pass rate 0 and stays in a [0, 0.75) band.
    assert len(rows) == 6 and not dropped and {row["pass_rate"] for row in rows} == {0.0}
    manifest = json.loads((out / "cascade_stage.json").read_text())
    assert manifest["kind"] == "pass_rate_filter" and manifest["config"]["k"] == 2
    result = cli(
        ["prepare-data", "filter", "--model", "tiny", "--data", out, "--out", tmp_path / "x", "--k", "0"]
    )
    assert result.exit_code == 2 and "k: expected an integer >= 1, found 0" in result.output


def test_prepare_data_without_subcommand_still_validates_and_helps(tmp_path, cli):
    result = cli(["prepare-data", "--source", "tiny:math", "--out", tmp_path / "o", "wrong_fraction=2"])
    assert result.exit_code == 2 and "wrong_fraction" in result.output
    result = cli(["prepare-data", "--help"])
    assert result.exit_code == 0 and "filter" in result.output and "--source" in result.output
    result = cli(["prepare-data", "filter", "--help"])
    assert result.exit_code == 0 and "--max-pass" in result.output
    # the runner path used by recipes is unchanged
    metrics = run_prepare_data(
        build_prepare_config({"source": "tiny:if", "out": str(tmp_path / "if"), "n": 3})
    )
    assert metrics["rows"] == 3


FILTER_RECIPE = """
name: filtered
model: tiny
run_dir: {run_dir}
seed: 2
stages:
  data_math:
    kind: prepare_data
    source: tiny:math
    n: 6
    holdout: 2
  hard:
    kind: pass_rate_filter
    data: ${{stages.data_math.out}}
    k: 2
    max_new_tokens: 8
    backend: hf
  math_rl:
    kind: rlvr
    domain: math
    data: ${{stages.hard.out}}
    steps: 1
    prompts_per_step: 2
    group_size: 2
    max_response_len: 8
"""


def test_a_recipe_filters_by_pass_rate_between_its_data_and_rl_stages(tmp_path, cli):
    recipe = tmp_path / "filtered.yaml"
    recipe.write_text(FILTER_RECIPE.format(run_dir=tmp_path / "run"))
    result = cli(["recipe", "run", recipe])
    assert result.exit_code == 0, result.output
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert [run["stages"][name]["status"] for name in ("data_math", "hard", "math_rl")] == ["completed"] * 3
    # The filter samples with the recipe's policy so far (here the starting model) and is not one itself:
    # the RL stage starts from that same model and reads the filter's rows, each with its pass rate.
    assert run["stages"]["hard"]["config"]["init"] == "tiny"
    assert run["stages"]["math_rl"]["config"]["init"] == "tiny"
    assert run["stages"]["math_rl"]["config"]["data"] == str(tmp_path / "run" / "hard")
    rows = load_canonical(tmp_path / "run" / "hard")
    assert len(rows) == 6 and all(row["pass_rate_k"] == 2 for row in rows)
    assert (tmp_path / "run" / "hard" / "heldout.jsonl").is_file()
    # `recipe plan` prints the stage as the command that runs it.
    plan = cli(["recipe", "plan", recipe])
    assert f"cascade prepare-data filter --init tiny --data {tmp_path / 'run' / 'data_math'}" in plan.output
    # A rerun skips every stage; a new band re-filters, and the RL stage after it runs again on the new rows.
    result = cli(["recipe", "run", recipe])
    assert result.exit_code == 0 and result.output.count("skip") >= 3, result.output
    result = cli(["recipe", "run", recipe, "stages.hard.k=3"])
    assert result.exit_code == 0, result.output
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["stages"]["hard"]["config"]["k"] == 3
    assert all(row["pass_rate_k"] == 3 for row in load_canonical(tmp_path / "run" / "hard"))
    assert run["stages"]["math_rl"]["input_fingerprints"]["data"] == fingerprint_path(
        tmp_path / "run" / "hard" / "cascade_stage.json"
    )
