"""End to end: `recipe run` of a minimal recipe, the rerun skip, --only, and the `recipe plan` script
reproducing the same checkpoints' metrics."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from cascade_cli.checkpoint import read_manifest

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
