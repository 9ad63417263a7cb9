"""One in-process vLLM engine per process, shared by every `Generator(backend="vllm")` in it.

A recipe run evaluates the base model, trains a stage, evaluates it, trains the next one, all in one process.
Starting an engine per evaluation and per stage pays the start-up (model load, compile, KV-cache allocation)
every time and, on a CPU, leaves the previous engine's memory and threads beside the next one. So an engine
is kept for the life of the process and reused by every generator whose model has the same architecture,
tokenizer, dtype and context length (`EngineKey`): a new checkpoint's weights are reloaded in place (as
GRPO's weight sync does after every step); anything else shuts the engine down and starts another.

On a CPU, before the engine starts (each of these only when the user has not set it):
- `OMP_NUM_THREADS` = torch's current thread count. vLLM otherwise cuts torch to one thread for serving and
  then replaces `torch.set_num_threads` with a no-op, so the trainer sharing the process would run on one core.
- `VLLM_CPU_OMP_THREADS_BIND=nobind`: compute on this process's torch threads, without pinning them.
- `VLLM_CPU_KVCACHE_SPACE` (GiB of KV cache) = `CPU_KV_CACHE_GIB`: enough to hold a benchmark's batch of
  long greedy answers without preempting (vLLM's own default is far larger than a small machine can spare).
- `VLLM_USE_AOT_COMPILE=0`: vLLM 0.32's ahead-of-time compiled artifact fails to load back on CPU
  ("'function' object has no attribute 'finalize_loading'"), so every start compiled the model again; the
  Inductor cache path loads, and a start with a warm cache skips most of the compile.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import logging
import os
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

CPU_KV_CACHE_GIB = 2
# config.json keys that name or describe a checkpoint without changing what the engine computes with it.
_NAMING_KEYS = ("_name_or_path", "name_or_path", "transformers_version", "torch_dtype", "dtype", "architectures")
_TOKENIZER_FILES = ("tokenizer.json", "vocab.json", "merges.txt", "tokenizer.model", "special_tokens_map.json")


@dataclass(frozen=True)
class EngineKey:
    """What an engine is built for; a generator with an equal key reuses it (with its own weights)."""

    architecture: str  # digest of config.json without its naming keys
    tokenizer: str  # digest of the tokenizer's vocabulary files (vLLM detokenizes with its own copy)
    dtype: str
    max_model_len: int | None
    device: str
    options: str  # extra LLM(...) keyword arguments, as sorted JSON


@dataclass
class _Engine:
    key: EngineKey
    llm: Any
    weights_from: str | None  # the checkpoint directory whose weights it holds (None: pushed by a trainer)


_engine: _Engine | None = None


def _digest(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()[:16]


def engine_key(
    model_dir: str | Path, dtype: str, max_model_len: int | None, device: str, options: dict[str, Any]
) -> EngineKey:
    model_dir = Path(model_dir)
    config = json.loads((model_dir / "config.json").read_text())
    for name in _NAMING_KEYS:
        config.pop(name, None)
    tokenizer = b"".join(
        (model_dir / name).read_bytes() for name in _TOKENIZER_FILES if (model_dir / name).is_file()
    )
    return EngineKey(
        architecture=_digest(json.dumps(config, sort_keys=True).encode()),
        tokenizer=_digest(tokenizer),
        dtype=dtype,
        max_model_len=max_model_len,
        device=device.split(":")[0],
        options=json.dumps(options, sort_keys=True, default=str),
    )


def resolve_dtype(dtype: str, device: str) -> str:
    """The engine's dtype: `auto` is bf16 where the device computes in bf16 natively (a GPU with bf16, a CPU
    with AVX512-BF16 or AMX), else float32, whatever dtype a checkpoint was saved in. One rule for every
    caller, so an evaluation and a stage's rollouts ask for the same engine."""
    if dtype != "auto":
        return dtype
    from cascade_cli.models.bf16 import bf16_supported

    return "bfloat16" if bf16_supported(device) else "float32"


def configure_cpu_environment() -> None:
    """The CPU settings of the module docstring; the user's own environment variables win."""
    os.environ.setdefault("OMP_NUM_THREADS", str(torch.get_num_threads()))
    os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(CPU_KV_CACHE_GIB))
    os.environ.setdefault("VLLM_USE_AOT_COMPILE", "0")


def checkpoint_weights(model_dir: str | Path) -> Iterator[tuple[str, torch.Tensor]]:
    """(HF parameter name, tensor) of every safetensors shard of a checkpoint, one tensor at a time.

    A model with tied input and output embeddings saves the embedding once; the tied output head is yielded
    too, because vLLM's in-place reload keeps the head it had when the checkpoint does not name it."""
    from safetensors import safe_open

    shards = sorted(Path(model_dir).glob("*.safetensors"))
    if not shards:
        raise FileNotFoundError(f"{model_dir}: no *.safetensors weights to load into the shared vLLM engine")
    config = json.loads((Path(model_dir) / "config.json").read_text())
    tied = config.get("tie_word_embeddings", False)
    names: set[str] = set()
    embedding = None
    for shard in shards:
        with safe_open(str(shard), framework="pt") as handle:
            for name in handle.keys():  # noqa: SIM118 (safe_open is not a mapping)
                tensor = handle.get_tensor(name)
                names.add(name)
                if name.endswith("embed_tokens.weight"):
                    embedding = tensor
                yield name, tensor
    if tied and "lm_head.weight" not in names and embedding is not None:
        yield "lm_head.weight", embedding


def reload_weights(llm: Any, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
    """Load HF-named weights into the engine's model in place (cast to its dtype on the way) and forget
    prefix-cached keys and values."""
    dtype = llm.llm_engine.model_config.dtype
    worker = llm.llm_engine.model_executor.driver_worker.worker
    worker.reload_weights(weights_iterator=((name, tensor.to(dtype)) for name, tensor in weights))
    llm.reset_prefix_cache()


def quiet_logs() -> None:
    """vLLM logs every start-up detail at INFO and per-weight dtype casts as warnings; keep its errors
    unless the user chose a level (`VLLM_LOGGING_LEVEL=INFO` shows everything again)."""
    level = os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    logging.getLogger("vllm").setLevel(level.upper())
    if level.upper() != "ERROR":
        return
    # vLLM's import touches deprecated torch.distributed names; the user can do nothing about it.
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"vllm\.")


def acquire(model_dir: str | Path, *, dtype: str, max_model_len: int | None, device: str, seed: int,
            options: dict[str, Any]) -> Any:
    """The process's engine for `model_dir`, holding `model_dir`'s weights: the running one when its key
    matches (weights reloaded when they came from elsewhere), else a new one (the old one shut down)."""
    global _engine
    model_dir = str(model_dir)
    key = engine_key(model_dir, dtype, max_model_len, device, options)
    if _engine is not None and _engine.key == key:
        if _engine.weights_from != model_dir:
            reload_weights(_engine.llm, checkpoint_weights(model_dir))
            _engine.weights_from = model_dir
        return _engine.llm
    release()
    # In-process engine core: weights can then be reloaded in place (and no worker processes are spawned).
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    kwargs: dict[str, Any] = {"model": model_dir, "seed": seed, "dtype": dtype, "use_tqdm_on_load": False}
    if max_model_len is not None:
        kwargs["max_model_len"] = max_model_len
    if device.startswith("cuda"):
        kwargs.update(gpu_memory_utilization=0.5, enable_sleep_mode=False)
    else:
        configure_cpu_environment()
        kwargs["gpu_memory_utilization"] = 0.15  # unused on CPU: VLLM_CPU_KVCACHE_SPACE sizes the cache
    kwargs.update(options)
    quiet_logs()
    from vllm import LLM

    _engine = _Engine(key, LLM(**kwargs), model_dir)
    return _engine.llm


def weights_pushed(llm: Any) -> None:
    """Record that a trainer loaded its own weights into `llm`: the next `acquire` must reload from disk."""
    if _engine is not None and _engine.llm is llm:
        _engine.weights_from = None


def release() -> None:
    """Shut the process's engine down (a new key, or the process ending)."""
    global _engine
    if _engine is None:
        return
    engine, _engine = _engine, None
    with contextlib.suppress(Exception):  # best effort: engine internals differ across versions
        engine.llm.llm_engine.engine_core.shutdown()
    del engine


atexit.register(release)
