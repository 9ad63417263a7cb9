"""`cascade push`: the generated model card and file list (offline, --dry-run), and its errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import yaml

from cascade_cli.manifest import write_manifest


def make_chain(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    previous = "Qwen/Qwen3-8B-Base"
    for stage, kind, config in [
        ("sft", "sft", {"data": "nvidia/Nemotron-Cascade-SFT-Stage-1", "lr": 5e-5, "max_seq_len": 16384}),
        (
            "math_rl",
            "rlvr",
            {
                "data": "runs/x/data_math",
                "domain": "math",
                "lr": 2e-6,
                "group_size": 8,
                "phases": [{"max_response_len": 24576}, {"max_response_len": 32768}],
            },
        ),
    ]:
        out = run / stage
        (out / "trainer_state").mkdir(parents=True)
        (out / "config.json").write_text("{}")
        (out / "model.safetensors").write_bytes(b"weights")
        (out / "tokenizer.json").write_text("{}")
        (out / "trainer_state" / "optimizer.pt").write_bytes(b"adam")
        write_manifest(out, stage=stage, kind=kind, config=config, init=previous, metrics={"steps": 12})
        previous = str(out)
    (run / "run.json").write_text(json.dumps({
        "resolved": {"license": "mit", "model": "Qwen/Qwen3-8B-Base"}, "stage_order": ["sft", "math_rl"],
    }))
    for stage, benchmarks in (("math_rl", {"aime24": (71.5, 64), "ifeval": (80.1, 4)}), ("sft", {"aime24": (60.0, 64)})):
        (run / "eval" / stage).mkdir(parents=True)
        results = {
            name: {"score": score, "k": k, "problems": 30, "primary": "prompt_strict" if name == "ifeval" else f"avg@{k}"}
            for name, (score, k) in benchmarks.items()
        }
        (run / "eval" / stage / "results.json").write_text(json.dumps({"model": str(run / stage), "benchmarks": results}))
    return run / "math_rl"


def test_dry_run_prints_card_and_files(tmp_path, cli):
    ckpt = make_chain(tmp_path)
    result = cli(["push", ckpt, "--repo-id", "me/tiny-cascade", "--dry-run"])
    assert result.exit_code == 0, result.output
    card, _, files = result.output.partition("# files to upload")
    metadata = yaml.safe_load(card.split("---")[1])
    assert metadata["base_model"] == "Qwen/Qwen3-8B-Base"
    assert metadata["license"] == "mit"
    assert "cascade-rl" in metadata["tags"]
    assert "nvidia/Nemotron-Cascade-SFT-Stage-1" in metadata["datasets"]
    assert "| 1 | sft | sft | nvidia/Nemotron-Cascade-SFT-Stage-1 | 12 |" in card
    assert "| 2 | math_rl | rlvr | runs/x/data_math |" in card and "phases=24576 -> 32768" in card
    # Scores (not problem counts) with metric and k per benchmark, stages in cascade order (run.json's).
    assert "| stage | aime24 (avg@64) | ifeval (prompt_strict, k=4) |" in card
    assert card.index("| sft | 60.0 | - |") < card.index("| math_rl | 71.5 | 80.1 |")
    assert "/think" in card and "from vllm import LLM" in card
    assert "github.com/)" not in card and str(tmp_path) not in card  # no placeholder link, no local paths
    listed = files.splitlines()[1:]
    assert listed == ["README.md", "cascade_stage.json", "config.json", "model.safetensors", "tokenizer.json"]
    assert not (ckpt / "README.md").exists()  # a dry run writes nothing


def test_trainer_state_only_when_asked(tmp_path, cli):
    ckpt = make_chain(tmp_path)
    result = cli(["push", ckpt, "--repo-id", "me/x", "--dry-run", "--include-trainer-state"])
    assert "trainer_state/optimizer.pt" in result.output
    shutil.rmtree(ckpt / "trainer_state")  # a stage trained without keep_trainer_state
    result = cli(["push", ckpt, "--repo-id", "me/x", "--dry-run", "--include-trainer-state"])
    assert result.exit_code == 2 and "keep_trainer_state=true" in result.output


def test_bad_repo_id_and_missing_token(tmp_path, cli, monkeypatch):
    ckpt = make_chain(tmp_path)
    result = cli(["push", ckpt, "--repo-id", "no-slash", "--dry-run"])
    assert result.exit_code == 2 and "expected ORG/NAME" in result.output
    result = cli(["push", tmp_path / "nothing", "--repo-id", "me/x"])
    assert result.exit_code == 2 and "not found" in result.output
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    result = cli(["push", ckpt, "--repo-id", "me/x"])
    assert result.exit_code == 2 and "no Hugging Face token" in result.output


def test_report_image_is_in_the_file_list_when_the_card_shows_it(tmp_path, cli):
    ckpt = make_chain(tmp_path)
    (ckpt.parent / "report.png").write_bytes(b"\x89PNG")
    result = cli(["push", ckpt, "--repo-id", "me/x", "--dry-run"])
    card, _, files = result.output.partition("# files to upload")
    assert "![benchmarks after each stage](report.png)" in card and "report.png" in files.splitlines()


def by_hand_cascade(root: Path, cli) -> Path:
    """The README's short cascade by hand: data, SFT, an eval of the base and of the SFT model (no run.json)."""
    data, sft = root / "data_sft", root / "sft"
    for args in (
        ["prepare-data", "--source", "tiny:sft", "--out", data, "--n", "16"],
        ["sft", "--init", "tiny", "--data", data, "--out", sft, "max_steps=2", "batch_size=2", "max_seq_len=64"],
        ["eval", "--model", sft, "--benchmarks", "tiny_math", "--k", "1", "--limit", "2", "--max-tokens", "4",
         "--backend", "hf", "--out", root / "eval" / "sft"],
        ["eval", "--model", "tiny", "--benchmarks", "tiny_math", "--k", "2", "--limit", "2", "--max-tokens", "4",
         "--backend", "hf", "--out", root / "eval" / "base"],
    ):
        result = cli(args)
        assert result.exit_code == 0, result.output
    return sft


def test_a_cascade_by_hand_gets_an_evaluation_section_and_a_usage_snippet_that_runs(tmp_path, cli):
    import subprocess
    import sys

    sft = by_hand_cascade(tmp_path / "runs", cli)
    card = cli(["push", sft, "--repo-id", "me/tiny-cascade", "--dry-run"]).output.partition("# files to upload")[0]
    assert "| 1 | sft | sft | data_sft (tiny:sft) | 2 |" in card  # relative path + the data card's source
    evaluation = card.split("## Evaluation")[1].split("## Usage")[0]
    # k differs (2 for base, 1 for sft): each cell says its metric; base (the init, `tiny`) comes first.
    assert "| stage | tiny_math |" in evaluation
    assert evaluation.index("| base | 0.0 (avg@2) |") < evaluation.index("| sft | 0.0 (avg@1) |")
    snippet = card.split("```python\n")[1].split("```")[0]
    script = snippet.replace('"me/tiny-cascade"', repr(str(sft))).replace("max_new_tokens=512", "max_new_tokens=8")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr  # the installed transformers runs the card's snippet
