"""What the local engine computes with: torch's thread count (the idle cores). Where bf16 autocast pays is
models/bf16.py; loading is models/loader.py, where the device is chosen."""

from __future__ import annotations

import os

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
