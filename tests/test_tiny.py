"""The embedded tiny model: deterministic, loadable by transformers (and vLLM), chat-template faithful."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from cascade_cli import chat
from cascade_cli.errors import CascadeUsageError
from cascade_cli.models import tiny
from cascade_cli.models.resolve import resolve_model


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    return resolve_model("tiny", tmp_path_factory.mktemp("cache"))


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_spec_parsing():
    assert tiny.is_tiny_spec("tiny") and tiny.is_tiny_spec("tiny:7")
    assert not tiny.is_tiny_spec("tiny:x") and not tiny.is_tiny_spec("Qwen/Qwen3-0.6B")
    assert not tiny.is_tiny_spec(None)
    assert tiny.tiny_seed("tiny") == 0 and tiny.tiny_seed("tiny:7") == 7
    with pytest.raises(CascadeUsageError):
        tiny.tiny_seed("tiny:seven")


def test_build_is_deterministic_and_seeded(tmp_path, tiny_dir):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    again = tiny.build_tiny("tiny:0", tmp_path / "again")
    assert torch.equal(torch.rand(3), expected)  # building leaves the caller's RNG stream alone
    other = tiny.build_tiny("tiny:1", tmp_path / "other")
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert _digest(again / name) == _digest(tiny_dir / name), name
    assert _digest(other / "model.safetensors") != _digest(tiny_dir / "model.safetensors")


def test_resolve_model_caches_and_passes_through(tmp_path, tiny_dir, monkeypatch):
    cache = tiny_dir.parent
    assert resolve_model("tiny:0", cache) == tiny_dir
    assert resolve_model(str(tiny_dir)) == tiny_dir
    # A hub id offline and not in the Hugging Face cache fails at once (asking a hub: test_model_specs.py).
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub_cache"))
    with pytest.raises(CascadeUsageError, match="Qwen/Qwen3-0.6B: no local folder of that name"):
        resolve_model("Qwen/Qwen3-0.6B", cache)
    with pytest.raises(CascadeUsageError, match="did you mean tiny"):
        resolve_model("tinyy", cache)
    with pytest.raises(CascadeUsageError, match="not found"):
        resolve_model(str(tmp_path / "missing" / "ckpt"), cache)
    (tmp_path / "empty").mkdir()
    with pytest.raises(CascadeUsageError, match="config.json"):
        resolve_model(str(tmp_path / "empty"), cache)


def test_transformers_round_trip(tmp_path, tiny_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_dir)
    params = sum(p.numel() for p in model.parameters())
    assert 1_000_000 <= params <= 5_000_000
    assert model.config.model_type == "qwen3"
    model.save_pretrained(tmp_path / "copy")
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "copy")
    ids = torch.tensor([[2, 40, 41, 42, 3]])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, reloaded(ids).logits)
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    assert tokenizer.eos_token == chat.IM_END and tokenizer.pad_token is not None
    assert tokenizer.pad_token_id != tokenizer.eos_token_id
    assert len(tokenizer) <= model.config.vocab_size
    assert model.generation_config.eos_token_id[0] == tokenizer.eos_token_id


def test_special_tokens_are_single_ids(tiny_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    for token in (*chat.SPECIAL_TOKENS, *chat.EXTRA_TOKENS):
        ids = tokenizer.encode(token, add_special_tokens=False)
        assert len(ids) == 1, token
        assert ids[0] != tokenizer.unk_token_id
        assert tokenizer.decode(ids) == token


def test_characters_cover_ascii_and_unknowns_map_to_unk(tiny_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    text = "".join(chr(code) for code in range(32, 127)) + "\n\t"
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert len(ids) == len(text) and tokenizer.unk_token_id not in ids
    assert tokenizer.decode(ids) == text
    ids = tokenizer.encode("x\u00e9y\u4e2d", add_special_tokens=False)
    assert ids[1] == ids[3] == tokenizer.unk_token_id and len(ids) == 4


def test_chat_template_equals_render_prompt(tiny_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    conversation = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 3+4?"},
        {"role": "assistant", "content": chat.format_response("\\boxed{7}", "3+4=7")},
        {"role": "user", "content": "And 2+2?"},
    ]
    for mode in chat.MODES:
        rendered = tokenizer.apply_chat_template(
            conversation, tokenize=False, add_generation_prompt=True, mode=mode
        )
        assert rendered == chat.render_prompt(conversation, mode=mode)
    full = chat.render_messages(conversation, mode="think", add_generation_prompt=True)
    ids = tokenizer.encode(full, add_special_tokens=False)
    assert tokenizer.decode(ids) == full


@pytest.mark.slow
@pytest.mark.vllm
def test_vllm_loads_tiny_and_matches_transformers_greedy(tmp_path, tiny_dir):
    pytest.importorskip("vllm")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    prompt = chat.render_prompt("What is 3+4?", mode="think")
    tokenizer = AutoTokenizer.from_pretrained(tiny_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_dir)
    inputs = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
    expected = model.generate(**inputs, max_new_tokens=8, do_sample=False)[0, inputs["input_ids"].shape[1] :]
    script = tmp_path / "run_vllm.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import json, os
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
            if __name__ == "__main__":
                from vllm import LLM, SamplingParams
                llm = LLM(model={str(tiny_dir)!r}, dtype="float32", max_model_len=512, seed=0,
                          enforce_eager=True, gpu_memory_utilization=0.1)
                out = llm.generate([{prompt!r}], SamplingParams(temperature=0, max_tokens=8, ignore_eos=True))
                print("RESULT " + json.dumps(list(out[0].outputs[0].token_ids)))
            """
        )
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, done.stderr[-3000:]
    produced = json.loads(lines[0][7:])
    assert len(produced) == 8
    assert produced[: len(expected)] == expected.tolist()  # transformers stops early at an eos token
