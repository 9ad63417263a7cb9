"""`lora.save: merged | adapter | both` (issue 51): the adapter a LoRA stage writes loads with
`peft.PeftModel.from_pretrained` onto its base and gives the merged model's logits; `cascade push` uploads
what was saved, with a card that says how to load the adapter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from peft import PeftModel
from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

from cascade_cli.jsonl import write_jsonl

IDS = torch.arange(5, 45).view(2, 20)
SFT = ["max_steps=3", "batch_size=2", "max_seq_len=64", "lr=1e-2", "lora.r=8", "bf16=false", "threads=1"]


@pytest.fixture(scope="module")
def sft_data(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("lora_save_data") / "sft.jsonl"
    rows = [{"messages": [{"role": "user", "content": f"What is {i}+{i}?"},
                          {"role": "assistant", "content": f"{2 * i}"}]} for i in range(12)]  # fmt: skip
    write_jsonl(path, rows)
    return path


def logits(model) -> torch.Tensor:
    with torch.no_grad():
        return model.eval()(input_ids=IDS).logits


def train(cli, tiny_dir, data, out, save) -> Path:
    result = cli(["sft", "--init", tiny_dir, "--data", data, "--out", out, *SFT, f"lora.save={save}"])
    assert result.exit_code == 0, result.output
    return Path(out)


def test_both_writes_the_merged_model_and_an_adapter_with_its_logits(cli, tiny_dir, sft_data, tmp_path):
    out = train(cli, tiny_dir, sft_data, tmp_path / "sft", "both")
    merged = logits(AutoModelForCausalLM.from_pretrained(out))
    base = logits(AutoModelForCausalLM.from_pretrained(tiny_dir))
    assert not torch.allclose(merged, base, atol=1e-3), (
        "training moved nothing: the comparison below proves nothing"
    )
    adapter_config = json.loads((out / "adapter" / "adapter_config.json").read_text())
    assert adapter_config["base_model_name_or_path"] == str(tiny_dir) and adapter_config["r"] == 8
    adapted = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_dir), out / "adapter")
    assert torch.allclose(logits(adapted), merged, atol=1e-5)

    result = cli(["push", out, "--repo-id", "me/tiny-lora", "--dry-run"])
    assert result.exit_code == 0, result.output
    card, _, files = result.output.partition("# files to upload")
    listed = files.split()
    assert {"model.safetensors", "adapter/adapter_config.json", "adapter/adapter_model.safetensors"} <= set(
        listed
    )
    assert 'PeftModel.from_pretrained(base, "me/tiny-lora", subfolder="adapter")' in card


def test_adapter_alone_loads_onto_the_base_and_pushes_as_a_peft_repo(cli, tiny_dir, sft_data, tmp_path):
    out = train(cli, tiny_dir, sft_data, tmp_path / "sft", "adapter")
    assert not (out / "model.safetensors").exists() and not (out / "config.json").exists()
    assert (out / "adapter_model.safetensors").is_file() and (out / "tokenizer.json").is_file()
    reference = train(cli, tiny_dir, sft_data, tmp_path / "merged", "merged")  # the same run, saved merged
    adapted = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_dir), out)
    assert torch.allclose(logits(adapted), logits(AutoModelForCausalLM.from_pretrained(reference)), atol=1e-5)

    result = cli(["push", out, "--repo-id", "me/tiny-adapter", "--dry-run"])
    assert result.exit_code == 0, result.output
    card, _, files = result.output.partition("# files to upload")
    assert yaml.safe_load(card.split("---")[1])["library_name"] == "peft"
    assert {"adapter_config.json", "adapter_model.safetensors", "cascade_stage.json"} <= set(files.split())
    assert "config.json" not in files.split()
    assert 'PeftModel.from_pretrained(base, "me/tiny-adapter")' in card

    result = cli(["sft", "--init", out, "--data", sft_data, "--out", tmp_path / "next", *SFT])
    assert result.exit_code == 2
    assert "a LoRA adapter alone (lora.save=adapter), not a model" in " ".join(result.output.split())


def test_a_reward_model_adapter_keeps_its_score_head(cli, tiny_dir, tmp_path):
    pairs = tmp_path / "pairs.jsonl"
    write_jsonl(pairs, [{"prompt": f"Say {i}.", "chosen": f"{i}", "rejected": "no"} for i in range(16)])
    result = cli([
        "rlhf", "rm", "--init", tiny_dir, "--data", pairs, "--out", tmp_path / "rm", "max_steps=2", "batch_size=4",
        "micro_batch=4", "max_seq_len=32", "lr=1e-2", "lora.r=4", "lora.save=both", "bf16=false",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    merged = AutoModelForSequenceClassification.from_pretrained(tmp_path / "rm")
    base = AutoModelForSequenceClassification.from_pretrained(
        tiny_dir, num_labels=1, pad_token_id=merged.config.pad_token_id
    )
    adapted = PeftModel.from_pretrained(base, tmp_path / "rm" / "adapter")
    assert torch.allclose(logits(adapted), logits(merged), atol=1e-5)


def test_save_adapter_without_lora_is_refused(cli, tiny_dir, sft_data, tmp_path):
    result = cli(
        ["sft", "--init", tiny_dir, "--data", sft_data, "--out", tmp_path / "x", "lora.save=adapter"]
    )
    assert result.exit_code == 2
    assert "lora.save: adapter needs adapters (lora.r > 0); found lora.r=0" in " ".join(result.output.split())
