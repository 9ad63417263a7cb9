"""What the local engine computes with: torch's thread count (the idle cores) and bf16 autocast where the
hardware has it. Loading is models/loader.py; the device is chosen there."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from cascade_cli.cpu_load import busy_cores


def idle_cores() -> int:
    """Cores this process may use minus those busy right now (at least 1).

    Small-model training is all short parallel regions; an OpenMP team larger than the idle cores spends
    its time waiting for descheduled threads, so on a busy machine it runs slower than a smaller team."""
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
