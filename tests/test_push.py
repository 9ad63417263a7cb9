"""`cascade push`: the generated model card and file list (offline, --dry-run), and its errors."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from cascade_cli.checkpoint import write_manifest


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
    (run / "run.json").write_text(json.dumps({"resolved": {"license": "mit", "model": "Qwen/Qwen3-8B-Base"}}))
    (run / "eval" / "math_rl").mkdir(parents=True)
    (run / "eval" / "math_rl" / "results.json").write_text(
        json.dumps({"benchmarks": {"aime24": {"avg@64": 71.5}}})
    )
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
    assert "| 2 | math_rl | rlvr |" in card and "phases=24576 -> 32768" in card
    assert "| math_rl | 71.50 |" in card
    assert "/think" in card and "from vllm import LLM" in card
    listed = files.splitlines()[1:]
    assert listed == ["README.md", "cascade_stage.json", "config.json", "model.safetensors", "tokenizer.json"]
    assert not (ckpt / "README.md").exists()  # a dry run writes nothing


def test_trainer_state_only_when_asked(tmp_path, cli):
    ckpt = make_chain(tmp_path)
    result = cli(["push", ckpt, "--repo-id", "me/x", "--dry-run", "--include-trainer-state"])
    assert "trainer_state/optimizer.pt" in result.output


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
