"""End to end: `recipe run` of a minimal recipe, the rerun skip, --only, and the `recipe plan` script
reproducing the same checkpoints' metrics."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from cascade_cli.manifest import read_manifest

RECIPE = """
name: mini
model: tiny
run_dir: {run_dir}
seed: 1
stages:
  data:
    kind: prepare_data
    source: tiny:sft
    n: 48
  math:
    kind: prepare_data
    source: tiny:math
    n: 24
    holdout: 8
  sft:
    kind: sft
    data: ${{stages.data.out}}
    eval_prompts: ${{stages.math.out}}/heldout.jsonl
    eval_limit: 8
    eval_max_new_tokens: 24
    max_steps: 4
    batch_size: 4
    max_seq_len: 256
    lr: 1e-3
    threads: 1
"""


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    src = str(Path(__file__).resolve().parents[1] / "src")
    env["PYTHONPATH"] = f"{src}{os.pathsep}{env['PYTHONPATH']}" if env.get("PYTHONPATH") else src
    return env


def test_recipe_run_skip_only_and_plan_equivalence(tmp_path, cli):
    recipe = tmp_path / "mini.yaml"
    recipe.write_text(textwrap.dedent(RECIPE.format(run_dir=tmp_path / "run")))
    result = cli(["recipe", "run", recipe])
    assert result.exit_code == 0, result.output
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["stage_order"] == ["data", "math", "sft"]
    assert all(run["stages"][name]["status"] == "completed" for name in run["stage_order"])
    assert "time per stage" in result.output and run["stages"]["sft"]["seconds"] > 0
    manifest = read_manifest(tmp_path / "run" / "sft")
    assert manifest["status"] == "completed" and manifest["init"] == "tiny"
    assert (tmp_path / "run" / "sft" / "config.json").is_file()

    # Same config and inputs: nothing reruns.
    finished = run["stages"]["sft"]["finished"]
    result = cli(["recipe", "run", recipe])
    assert result.exit_code == 0 and result.output.count("skip stage") == 3
    assert json.loads((tmp_path / "run" / "run.json").read_text())["stages"]["sft"]["finished"] == finished
    # A changed stage config reruns that stage only.
    result = cli(["recipe", "run", recipe, "stages.sft.lr=5e-4"])
    assert result.exit_code == 0 and result.output.count("skip stage") == 2
    # --only forces one stage.
    result = cli(["recipe", "run", recipe, "stages.sft.lr=5e-4", "--only", "math"])
    assert result.exit_code == 0 and "stage math" in result.output and "stage sft" not in result.output

    # The printed plan, run as a shell script elsewhere, gives the same checkpoint metrics.
    plan = cli(["recipe", "plan", recipe, "stages.sft.lr=5e-4", f"run_dir={tmp_path / 'plan'}"]).output
    script = tmp_path / "plan.sh"
    script.write_text(plan)
    subprocess.run(["bash", str(script)], check=True, env=cli_env(), capture_output=True, text=True)
    ran = read_manifest(tmp_path / "run" / "sft")["metrics"]
    planned = read_manifest(tmp_path / "plan" / "sft")["metrics"]
    assert set(planned) == set(ran)
    for key in ("train/loss", "eval/accuracy", "eval/init_accuracy"):
        assert planned[key] == ran[key], key


DATA_ONLY = """
name: data_only
model: tiny
run_dir: {run_dir}
stages:
  math:
    kind: prepare_data
    source: tiny:math
    n: 12
  code:
    kind: prepare_data
    source: tiny:code
    n: 12
"""


def _records(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())["stages"]


def test_recipe_run_restarts_changed_stages_and_resumes_interrupted_ones(tmp_path, cli):
    recipe = tmp_path / "data_only.yaml"
    recipe.write_text(textwrap.dedent(DATA_ONLY.format(run_dir=tmp_path / "run")))
    assert cli(["recipe", "run", recipe]).exit_code == 0
    records = _records(tmp_path / "run")
    assert records["math"]["restart"] is False and records["math"]["config"]["n"] == 12

    # A changed key: printed, and that stage runs with restart=true (the other one is skipped).
    result = cli(["recipe", "run", recipe, "stages.math.n=16"])
    assert result.exit_code == 0, result.output
    assert "stage math changed since its last run: n: 12 -> 16; starting it over" in " ".join(result.output.split())
    assert result.output.count("skip stage") == 1 and _records(tmp_path / "run")["math"]["restart"] is True

    # An interrupted stage with the same config runs with restart=false (its trainer resumes it).
    manifest = json.loads((tmp_path / "run" / "run.json").read_text())
    manifest["stages"]["code"]["status"] = "running"
    (tmp_path / "run" / "run.json").write_text(json.dumps(manifest))
    result = cli(["recipe", "run", recipe, "stages.math.n=16"])
    assert result.exit_code == 0 and "changed since" not in result.output
    assert _records(tmp_path / "run")["code"]["restart"] is False
    assert _records(tmp_path / "run")["code"]["status"] == "completed"

    # --from and --restart start the stages they select over.
    assert cli(["recipe", "run", recipe, "stages.math.n=16", "--from", "code"]).exit_code == 0
    assert _records(tmp_path / "run")["code"]["restart"] is True
    result = cli(["recipe", "run", recipe, "stages.math.n=16", "--restart"])
    assert result.exit_code == 0 and "skip stage" not in result.output
    assert all(record["restart"] for record in _records(tmp_path / "run").values())

    # A record written before a config key existed (the key at its default now) is the same config: skipped.
    manifest = json.loads((tmp_path / "run" / "run.json").read_text())
    recorded = manifest["stages"]["code"]["config"]
    added = "limit"  # None: no limit, the default
    assert recorded.pop(added) is None
    manifest["stages"]["code"]["config_fingerprint"] = "sha256:written-by-an-older-cascade"
    (tmp_path / "run" / "run.json").write_text(json.dumps(manifest))
    result = cli(["recipe", "run", recipe, "stages.math.n=16"])
    assert result.exit_code == 0 and "changed since" not in result.output and result.output.count("skip stage") == 2
    result = cli(["recipe", "run", recipe, "stages.math.n=16", f"stages.code.{added}=5"])
    assert f"stage code changed since its last run: {added}: None -> 5" in " ".join(result.output.split())


def test_stage_command_restart_flag_reaches_the_trainer(cli, tmp_path):
    """`cascade sft --restart` sets the config key `restart` (recorded in the checkpoint's manifest)."""
    assert cli(["prepare-data", "--source", "tiny:sft", "--out", tmp_path / "data", "--n", "8"]).exit_code == 0
    args = ["sft", "--init", "tiny", "--data", tmp_path / "data", "--out", tmp_path / "sft", "max_steps=1",
            "batch_size=2", "max_seq_len=64", "threads=1"]
    result = cli([*args, "--restart"])
    assert result.exit_code == 0, result.output
    assert read_manifest(tmp_path / "sft")["config"]["restart"] is True
    bad = cli([*args, "restart=maybe"])
    assert bad.exit_code == 2 and "restart" in bad.output


def test_timing_table_sums_train_and_eval_seconds():
    from rich.console import Console

    from cascade_cli.recipe.runner import timing_table

    manifest = {
        "base": {"eval_seconds": 4.0},
        "stages": {"data": {"seconds": 1.0}, "sft": {"seconds": 30.0, "eval_seconds": 6.0}, "rm": {"seconds": 9.0}},
    }
    console = Console(width=80, record=True)
    console.print(timing_table(manifest, ["data", "sft", "rm", "never_ran"]))
    cells = {}
    for line in console.export_text().splitlines():
        parts = [part.strip() for part in line.split("│")[1:-1]]
        if parts:
            cells[parts[0]] = parts[1:]
    assert cells["base"] == ["", "4"] and cells["sft"] == ["30", "6"] and cells["rm"] == ["9", ""]
    assert cells["total"] == ["40", "10"] and "never_ran" not in cells


def test_only_a_data_stage_of_an_evaluating_recipe_writes_no_report(tmp_path, cli):
    """Nothing evaluated yet (a data stage alone): the run ends without a report instead of failing on it."""
    result = cli(["recipe", "run", "tiny", f"run_dir={tmp_path}", "stages.data_if.n=8", "stages.data_if.holdout=2",
                  "--only", "data_if"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert (tmp_path / "data_if" / "data.jsonl").is_file() and not (tmp_path / "report.md").exists()


def test_a_resumed_stage_reports_its_whole_time_not_its_last_segment(tmp_path):
    """run.json's `seconds` for a stage: the trainer's elapsed_s (every segment of a resumed run) when longer
    than this run's wall time; this run's wall time for a stage without one (data, the OpenRLHF engine)."""
    from cascade_cli.recipe.runner import stage_seconds

    assert stage_seconds(tmp_path / "none", 20.0) == 20.0
    (tmp_path / "cascade_stage.json").write_text(json.dumps({"timings": {"elapsed_s": 100.0, "wall_s": 18.0}}))
    assert stage_seconds(tmp_path, 20.0) == 100.0  # resumed: 80 s before the cut, 20 s now
    (tmp_path / "cascade_stage.json").write_text(json.dumps({"timings": {"elapsed_s": 19.5}}))
    assert stage_seconds(tmp_path, 20.0) == 20.0  # a fresh run: the recipe's wall time covers the trainer's
