"""Where bf16 pays: the hardware test, the model-size rule and the autocast context, shared by the local
engine's training passes (engines/local/ops/precision.py) and the reward model's scoring
(verifiers/reward_model.py), so a policy and the reward model that scores it follow one rule.

On a CPU, bf16 matmuls are native only with AVX512-BF16 or AMX; elsewhere autocast emulates them and runs
slower than fp32. Below BF16_MIN_PARAMS the dtype conversions around each small matmul cost what the
matmuls save (benchmarks/precision.py measures both sides)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

BF16_MIN_PARAMS = 50_000_000


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


def autocast_pays(device: str, params: int) -> bool:
    """Whether a forward pass of a `params`-sized model on `device` gains from bf16 autocast over fp32 weights."""
    return bf16_supported(device) and params >= BF16_MIN_PARAMS


def autocast(device: str, enabled: bool) -> contextlib.AbstractContextManager[Any]:
    """bf16 autocast on `device` when `enabled` and the hardware has it; a no-op context otherwise."""
    import torch

    if not enabled or not bf16_supported(device):
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16)
