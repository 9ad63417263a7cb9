"""`cascade eval` end to end on a tiny model (hf backend), and its bad-input messages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cascade_cli.cli import app

CHARS = [chr(code) for code in range(32, 127)] + ["\n"]
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]


def _build_tiny_model(out_dir: Path) -> Path:
    """The project's tiny model when it exists, else a random-init Qwen3 with a character tokenizer."""
    try:
        from cascade_cli.models.tiny import build_tiny
    except ImportError:
        pass
    else:
        return build_tiny("tiny:0", out_dir)
    import torch
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    vocab = {token: index for index, token in enumerate(["<unk>", *SPECIALS, *CHARS])}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        unk_token="<unk>",
        pad_token="<|endoftext|>",
        eos_token="<|im_end|>",
        additional_special_tokens=SPECIALS[1:],
    )
    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        max_position_embeddings=1024,
        eos_token_id=vocab["<|im_end|>"],
        pad_token_id=vocab["<|endoftext|>"],
    )
    Qwen3ForCausalLM(config).save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build_tiny_model(tmp_path_factory.mktemp("tiny"))


def _quiz(tmp_path: Path) -> Path:
    path = tmp_path / "quiz.jsonl"
    rows = [
        {"id": f"q{i}", "question": f"What is {i}+1?", "options": [str(i), str(i + 1)], "answer": "B"}
        for i in range(3)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_eval_end_to_end_on_the_tiny_model(tiny_model: Path, tmp_path: Path) -> None:
    pytest.importorskip("cascade_cli.engines.local.rollout.generation")
    quiz = _quiz(tmp_path)
    out = tmp_path / "eval"
    result = CliRunner().invoke(
        app,
        [
            "eval",
            "--model",
            str(tiny_model),
            "--benchmarks",
            f"mcq:{quiz}",
            "--k",
            "2",
            "--max-tokens",
            "12",
            "--temperature",
            "1.0",
            "--backend",
            "hf",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "avg@2" in result.output  # the rich table
    results = json.loads((out / "results.json").read_text())
    assert results["settings"]["backend_used"] == "hf"
    summary = results["benchmarks"]["mcq:quiz"]
    assert summary["problems"] == 3 and summary["samples"] == 6 and summary["k"] == 2
    assert set(summary["metrics"]) == {"avg@2", "pass@2"} and 0.0 <= summary["score"] <= 100.0
    samples = [json.loads(line) for line in (out / "samples.jsonl").open()]
    assert len(samples) == 6
    for sample in samples:
        assert sample["finish_reason"] in ("stop", "length") and isinstance(sample["response"], str)
        assert sample["passed"] == (sample["details"].get("extracted") == "B")
        assert sample["mode"] == "think"


def test_evaluate_checkpoint_python_api(tiny_model: Path, tmp_path: Path) -> None:
    pytest.importorskip("cascade_cli.engines.local.rollout.generation")
    from cascade_cli.config.eval import EvalConfig
    from cascade_cli.evaluation import evaluate_stage, write_report

    config = EvalConfig(benchmarks=[f"mcq:{_quiz(tmp_path)}"], k=1, max_tokens=4, backend="hf", limit=2)
    for stage in ("sft", "rlhf"):
        results = evaluate_stage(tmp_path / "run", stage, tiny_model, config)
        assert results["benchmarks"]["mcq:quiz"]["problems"] == 2
    (tmp_path / "run" / "run.json").write_text(json.dumps({"stages": ["sft", "rlhf"]}))
    report = write_report(tmp_path / "run", max_regression=config.max_regression)
    assert report["stages"] == ["sft", "rlhf"] and Path(report["plot"]).is_file()


def test_not_a_model_directory(tmp_path: Path) -> None:
    (tmp_path / "ckpt").mkdir()
    result = CliRunner().invoke(app, ["eval", "--model", str(tmp_path / "ckpt"), "--benchmarks", "aime24"])
    assert result.exit_code == 2
    assert f"checkpoint {tmp_path / 'ckpt'}: not a model directory (expected config.json" in result.output
    result = CliRunner().invoke(app, ["eval", "--model", str(tmp_path / "gone"), "--benchmarks", "aime24"])
    assert result.exit_code == 2 and "not found" in result.output


def test_unknown_benchmark_and_missing_file_before_loading_the_model(
    tiny_model: Path, tmp_path: Path
) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["eval", "--model", str(tiny_model), "--benchmarks", "aime24,gsm9k"])
    assert result.exit_code == 2
    assert "unknown benchmark 'gsm9k'; known benchmarks:" in result.output and "humaneval" in result.output
    missing = tmp_path / "missing.jsonl"
    result = runner.invoke(
        app, ["eval", "--model", str(tiny_model), "--benchmark-file", str(missing), "--domain", "math"]
    )
    assert result.exit_code == 2 and f"benchmark file {missing}: not found" in result.output
    result = runner.invoke(
        app, ["eval", "--model", str(tiny_model), "--benchmarks", "aime24", "--backend", "tpu"]
    )
    assert result.exit_code == 2 and "backend: expected one of auto, vllm, hf; found 'tpu'" in result.output
    result = runner.invoke(app, ["eval", "--benchmarks", "aime24"])
    assert result.exit_code == 2 and "--model CKPT is required" in result.output


def test_eval_help_has_an_example() -> None:
    for command in ("eval", "report"):
        result = CliRunner().invoke(app, [command, "--help"])
        assert result.exit_code == 0 and "Example:" in result.output


def test_eval_plans_its_tokens_so_auto_takes_vllm_for_a_full_benchmark_on_cpu(shared_data: Path) -> None:
    """`cascade eval` hands `auto` the tokens it will generate: a full IFEval pass of a 135M model on a CPU
    pays back vLLM's engine start; four prompts do not."""
    from cascade_cli.config.eval import EvalSettings
    from cascade_cli.engines.local.rollout.rollout_backend import pick_backend
    from cascade_cli.evaluation.benchmarks import resolve_benchmarks
    from cascade_cli.evaluation.run import planned_tokens

    specs = resolve_benchmarks(["ifeval"], None, None)
    full = EvalSettings(k=1, max_tokens=512)
    rows = {bench.name: bench.rows(None) for bench in specs}
    assert planned_tokens(specs, rows, full) == 541 * 512
    assert pick_backend(135_000_000, "cpu", planned_tokens(specs, rows, full), vllm_installed=True) == "vllm"
    few = {bench.name: bench.rows(4) for bench in specs}
    assert pick_backend(135_000_000, "cpu", planned_tokens(specs, few, full), vllm_installed=True) == "hf"
