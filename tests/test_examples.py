"""examples/: the hand-chained tiny cascade equals `recipe run recipes/tiny.yaml`, the cluster script is what
`recipe plan` prints for the 14B recipe, and the external-outputs script scores what it says it scores."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cascade_cli.manifest import read_manifest

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"

# How examples/nemotron14b_openrlhf.sh is made. An absolute run_dir (on the cluster's shared filesystem) keeps the
# script free of the planning machine's working directory, which the openrlhf engine's paths would otherwise embed.
NEMOTRON14B_PLAN = ["recipe", "plan", "recipes/nemotron14b.yaml", "run_dir=/shared/runs/nemotron14b"]

# A short tiny cascade: the same overrides for the script (environment) and the recipe (dotlist).
SHORT_ENV = {
    "N_SFT": "48", "N_PREF": "16", "PREF_HOLDOUT": "4", "N_CHAT": "16", "CHAT_HOLDOUT": "4", "N_RL": "16", "N_SWE": "16", "HOLDOUT": "4",
    "SFT_STEPS": "4", "SFT_BATCH": "4", "SFT_EVAL_LIMIT": "4",
    "SFT_ARGS": "max_seq_len=256 threads=1 eval_max_new_tokens=24", "RM_ARGS": "max_steps=2",
    "RLHF_STEPS": "1", "IF_RL_STEPS": "1", "RL_STEPS": "1", "PROMPTS": "2", "IF_RESPONSE_LEN": "16",
    "RESPONSE_LEN": "16", "RLHF_RESPONSE_LEN": "16", "SWE_RL_STEPS": "1", "SWE_PROMPTS": "2", "SWE_RESPONSE_LEN": "16",
    "DISTILL_STEPS": "1", "DISTILL_PROMPTS": "2", "DISTILL_RESPONSE_LEN": "16", "DISTILL_ARGS": "eval_limit=2 eval_max_new_tokens=16",
    "MATH_PHASES": "[{steps: 1, max_response_len: 16, temperature: 1.0, overlong_filter: true}]",
    "RL_ARGS": "eval_limit=4 eval_max_new_tokens=16",
    "EVAL_K": "1", "EVAL_LIMIT": "2", "EVAL_MAX_TOKENS": "16",
}
RL_STAGES = ["rlhf", "if_rl", "math_rl", "code_rl", "swe_rl"]
SHORT_OVERRIDES = [
    "stages.data_sft.n=48", "stages.data_pref.n=16", "stages.data_pref.holdout=4", "stages.data_chat.n=16", "stages.data_chat.holdout=4",
    *(f"stages.data_{d}.{key}" for d in ("if", "math", "code", "swe") for key in ("n=16", "holdout=4")),
    "stages.sft.max_steps=4", "stages.sft.batch_size=4", "stages.sft.eval_limit=4", "stages.sft.max_seq_len=256",
    "stages.sft.threads=1", "stages.sft.eval_max_new_tokens=24", "stages.rm.max_steps=2",
    *(f"stages.{stage}.{key}" for stage in RL_STAGES
      for key in ("steps=1", "prompts_per_step=2", "eval_limit=4", "eval_max_new_tokens=16")),
    *(f"stages.{stage}.max_response_len=16" for stage in ("rlhf", "if_rl", "code_rl", "swe_rl")),
    "stages.math_rl.phases=[{steps: 1, max_response_len: 16, temperature: 1.0, overlong_filter: true}]",
    *(f"stages.distill.{key}" for key in ("steps=1", "prompts_per_step=2", "max_response_len=16", "eval_limit=2",
                                          "eval_max_new_tokens=16")),
    "eval.k=1", "eval.limit=2", "eval.max_tokens=16",
]
DATA_STAGES = ["data_sft", "data_pref", "data_chat", "data_if", "data_math", "data_code", "data_swe"]


def cli_env(**extra: str) -> dict[str, str]:
    """The environment a user has after `source .venv/bin/activate`: `cascade` on PATH, this checkout's src."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    src = str(REPO / "src")
    env["PYTHONPATH"] = f"{src}{os.pathsep}{env['PYTHONPATH']}" if env.get("PYTHONPATH") else src
    env.update(extra)
    return env


def run_script(name: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess:
    result = subprocess.run(
        ["bash", str(EXAMPLES / name)], cwd=cwd, env=cli_env(**extra), capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


@pytest.mark.parametrize("script", sorted(p.name for p in EXAMPLES.glob("*.sh")))
def test_example_scripts_parse(script):
    subprocess.run(["bash", "-n", str(EXAMPLES / script)], check=True)


def comparable(metrics: dict) -> dict:
    """Stage metrics without times and throughput (they depend on the machine's load, not on the run)."""
    timing = re.compile(r"(^|[_/])time_|(_s|seconds|tok/s)$")
    return {key: value for key, value in metrics.items() if not timing.search(key)}


@pytest.mark.parametrize("whole", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["to_sft", "whole"])
def test_tiny_cascade_by_hand_equals_recipe_run(tmp_path, cli, whole):
    recipe = [str(REPO / "recipes" / "tiny.yaml"), f"run_dir={tmp_path / 'recipe'}", *SHORT_OVERRIDES]
    if whole:
        result = cli(["recipe", "run", *recipe])
        assert result.exit_code == 0, result.output
        run_script("tiny_cascade.sh", tmp_path, RUN_DIR=str(tmp_path / "hand"), **SHORT_ENV)
    else:  # the data stages and SFT, no evals
        for stage in [*DATA_STAGES, "sft"]:
            result = cli(["recipe", "run", *recipe, "eval.after_each_stage=false", "--only", stage])
            assert result.exit_code == 0, result.output
        run_script("tiny_cascade.sh", tmp_path, RUN_DIR=str(tmp_path / "hand"), **SHORT_ENV, EVAL="0",
                   STOP_AFTER="sft")

    order = json.loads((tmp_path / "recipe" / "run.json").read_text())["stage_order"]
    assert order == [*DATA_STAGES, "sft", "rm", *RL_STAGES, "distill"], "recipes/tiny.yaml changed: update the script"
    compared = order if whole else [*DATA_STAGES, "sft"]
    for stage in compared:
        ran = read_manifest(tmp_path / "recipe" / stage)
        by_hand = read_manifest(tmp_path / "hand" / stage)
        assert by_hand["status"] == "completed" and by_hand["kind"] == ran["kind"], stage
        assert comparable(by_hand["metrics"]) == comparable(ran["metrics"]), stage
    # The sft metrics were compared, not {} == {}.
    assert {"train/loss", "eval/accuracy"} <= set(read_manifest(tmp_path / "recipe" / "sft")["metrics"])
    if not whole:
        assert not (tmp_path / "hand" / "rm").exists() and not (tmp_path / "hand" / "eval").exists()
        return
    evaluated = sorted(path.name for path in (tmp_path / "recipe" / "eval").iterdir())
    assert evaluated == sorted(["base", "sft", *RL_STAGES, "distill"])
    for stage in evaluated:
        ran_eval = json.loads((tmp_path / "recipe" / "eval" / stage / "results.json").read_text())["benchmarks"]
        hand_eval = json.loads((tmp_path / "hand" / "eval" / stage / "results.json").read_text())["benchmarks"]
        assert set(hand_eval) == {"tiny_math", "tiny_code", "tiny_if", "tiny_swe"}
        assert {name: b["metrics"] for name, b in hand_eval.items()} == {
            name: b["metrics"] for name, b in ran_eval.items()
        }, stage
    assert (tmp_path / "hand" / "report.md").is_file()


def test_nemotron14b_script_is_the_recipe_plan(cli, monkeypatch):
    monkeypatch.chdir(REPO)
    result = cli(NEMOTRON14B_PLAN)
    assert result.exit_code == 0, result.output
    shipped = (EXAMPLES / "nemotron14b_openrlhf.sh").read_text()
    regenerate = f"cascade {' '.join(NEMOTRON14B_PLAN)} > examples/nemotron14b_openrlhf.sh"
    assert result.stdout == shipped, f"recipes/nemotron14b.yaml or the plan changed; regenerate: {regenerate}"
    assert "ray job submit" in shipped and "cascade rlvr --domain swe" in shipped


def test_score_external_outputs(tmp_path, shared_data):
    run_script("score_external_outputs.sh", tmp_path, OUT=str(tmp_path / "scores"), SHARED_DATA=str(shared_data))
    math = json.loads((tmp_path / "scores" / "math_example" / "results.json").read_text())
    assert math["benchmarks"]["other_system_math"]["metrics"] == {"avg@2": 62.5, "pass@2": 75.0}
    ifeval = json.loads((tmp_path / "scores" / "ifeval_gpt4" / "results.json").read_text())
    metrics = ifeval["benchmarks"]["input_data_066e1eda"]["metrics"]
    assert ifeval["benchmarks"]["input_data_066e1eda"]["problems"] == 541
    assert round(metrics["prompt_strict"], 2) == 76.71 and round(metrics["inst_loose"], 2) == 85.37
