"""How busy the CPU is right now, and what follows for this process: OpenMP's wait policy (chosen once,
before torch loads: it cannot change afterwards) and the idle cores a stage's torch threads may take.

Small-model steps are thousands of short parallel regions. On an idle machine OpenMP's default (idle threads
spin briefly before sleeping) is fastest: waking a sleeping thread for every short region costs more than
the region. On a machine that other processes already keep busy, spinning threads fight them for the cores
and PASSIVE (sleep at once) is faster. An explicit `OMP_WAIT_POLICY` always wins.
"""

from __future__ import annotations

import os
import time

BUSY_CORES = 0.5  # other processes' CPU use (in cores) from which idle OpenMP threads sleep at once
SAMPLE_S = 0.1


def busy_cores(sample_s: float = SAMPLE_S) -> float:
    """Cores in use right now by every process, from two reads of /proc/stat `sample_s` apart; the 1-minute
    load average where /proc/stat is missing."""
    try:
        first = _cpu_times()
        time.sleep(sample_s)
        second = _cpu_times()
    except OSError:
        try:
            return os.getloadavg()[0]
        except OSError:  # pragma: no cover - neither /proc nor a load average
            return 0.0
    total = sum(second) - sum(first)
    idle = (second[3] + second[4]) - (first[3] + first[4])  # idle + iowait
    return (os.cpu_count() or 1) * (total - idle) / total if total > 0 else 0.0


def _cpu_times() -> list[int]:
    with open("/proc/stat") as stat:
        return [int(value) for value in stat.readline().split()[1:]]


def choose_wait_policy() -> str:
    """Set `OMP_WAIT_POLICY=PASSIVE` when the machine is busy and the user set no policy; returns the policy
    in force ("default" when OpenMP's own)."""
    if "OMP_WAIT_POLICY" not in os.environ and busy_cores() >= BUSY_CORES:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    return os.environ.get("OMP_WAIT_POLICY", "default")
