"""Loading models for the local trainers (SFT, reward model, GRPO): one place for dtype, threads and bf16
autocast. Saving is `engines.local.checkpoint.save_final` (atomic)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from cascade_cli.chat import adopt_template
from cascade_cli.config.common import TrainerConfig
from cascade_cli.cpu_load import busy_cores
from cascade_cli.errors import CascadeUsageError
from cascade_cli.models.tiny import resolve_model
from cascade_cli.progress import verbose

_DTYPES = ("float32", "bfloat16", "float16", "auto")


def idle_cores() -> int:
    """Cores this process may use minus those busy right now (at least 1).

    Small-model training is all short parallel regions; an OpenMP team larger than the idle cores spends
    its time waiting for descheduled threads (10x slower on a busy two-core machine than one thread)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    # Measured now, not the 1-minute load average: that one counts this process's own previous stage.
    return max(1, min(cores, int(cores - busy_cores() + 0.5)))


def configure_threads(threads: int | None = None) -> int:
    """Set torch's thread count: `threads`, else $CASCADE_THREADS, else the idle cores; returns it."""
    import torch

    if threads is None:
        threads = int(os.environ.get("CASCADE_THREADS", "0") or 0)
    if threads <= 0:
        threads = idle_cores()
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    return threads


def quiet_transformers() -> None:
    """Silence transformers' per-file progress bars and info logs (our own progress tells the story) unless
    `cascade --verbose` asked for them."""
    from transformers.utils import logging as hf_logging

    if verbose():
        return
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def pick_device(device: str | None = None) -> str:
    import torch

    if device:
        return device
    return "cuda" if torch.cuda.is_available() else "cpu"


def cpu_supports_bf16() -> bool:
    """True when the CPU has native bf16 matmuls (AVX512-BF16 or AMX); elsewhere bf16 autocast is slower."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def bf16_supported(device: str) -> bool:
    import torch

    if device.startswith("cuda"):
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return cpu_supports_bf16()


def autocast(device: str, enabled: bool) -> contextlib.AbstractContextManager[Any]:
    """bf16 autocast on `device` when `enabled` and the hardware has it; a no-op context otherwise."""
    import torch

    if not enabled or not bf16_supported(device):
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16)


def _torch_dtype(dtype: str):
    import torch

    if dtype not in _DTYPES:
        raise CascadeUsageError(f"dtype: expected one of {', '.join(_DTYPES)}; found {dtype!r}")
    return "auto" if dtype == "auto" else getattr(torch, dtype)


def load_model(
    init: str | Path, dtype: str = "float32", device: str | None = None, cache_dir: str | Path | None = None
):
    """A causal LM from `tiny`/`tiny:SEED`, a checkpoint directory or a hub id. Master weights default to
    float32 (train in fp32 and autocast to bf16); pass `dtype="auto"` to keep the checkpoint's dtype."""
    from transformers import AutoModelForCausalLM

    from cascade_cli.engines.local.fast_attention import use_gqa_sdpa

    quiet_transformers()
    path = resolve_model(str(init), cache_dir)
    try:
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=_torch_dtype(dtype))
    except OSError as error:
        raise CascadeUsageError(f"model {init}: cannot load ({error})") from None
    model = model.to(pick_device(device))
    use_gqa_sdpa(model)
    return model


def load_tokenizer(init: str | Path, cache_dir: str | Path | None = None):
    """The tokenizer saved with a checkpoint; guarantees a pad token (falls back to eos). A ChatML tokenizer
    gets the project's chat template (`chat.adopt_template`), so the checkpoints saved with it carry it."""
    from transformers import AutoTokenizer

    quiet_transformers()
    path = resolve_model(str(init), cache_dir)
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path))
    except OSError as error:
        raise CascadeUsageError(f"tokenizer {init}: cannot load ({error})") from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    adopt_template(tokenizer)
    return tokenizer


def prepare_for_training(model: Any, config: TrainerConfig, tokens: int, keep: tuple[str, ...] = ()) -> Any:
    """`config.gradient_checkpointing` (for micro-batches of `tokens` positions) and `config.lora` (`keep`:
    modules that train fully under LoRA) applied to `model`, in place; returns it."""
    from cascade_cli.engines.local import grad_checkpointing, lora

    device = next(model.parameters()).device.type
    grad_checkpointing.enable(model, config.gradient_checkpointing, tokens, device)
    return lora.apply(model, config.lora, keep)
