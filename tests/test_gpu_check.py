"""benchmarks/gpu_check.py on CPU: its usage error, its profile part on the real SmolLM2, its nvidia-smi summaries."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_check.py"
sys.path.insert(0, str(SCRIPT.parent))
from gpu_check import GpuSampler  # noqa: E402


def run(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    # One thread: on two shared cores OpenMP's spin-waits make a second one many times slower.
    env = {**os.environ, "PYTHONPATH": str(SCRIPT.parents[1] / "src"), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=timeout)


def test_a_model_other_than_smollm2_or_a_gguf_is_a_usage_error():
    done = run("--model", "tiny")
    assert done.returncode == 2
    assert "--model: expected `smollm2-135m` or `gguf:PATH`; found 'tiny'" in done.stderr
    assert "Traceback" not in done.stderr


def test_on_cpu_it_reports_the_device_and_profiles_one_decode_call(tmp_path, smollm2_dir):
    done = run("--quick", "--skip", "tiny,ifeval,if_rl,generation", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "torch " in out and "no GPU: every part runs on the CPU" in out
    assert "5. one hf decode call on cpu: 2 prompts x 8, 8 tokens, top-p 0.95" in out
    assert "ms per step" in out and "Self CPU" in out and "aten::mm" in out


def test_busy_and_where_summaries():
    sampler = GpuSampler()
    sampler.available = True
    now = time.time()
    sampler.samples = [(now - 10, 0.0, 500.0)] + [(now + i, float(10 * i), 500.0 + 400 * i) for i in range(10)]
    assert sampler.busy(now, now + 10) == "GPU busy median 45%, p90 90% (10 samples)"
    assert sampler.where(now, now + 10) == "cuda (GPU memory +3600 MiB)"
    assert sampler.where(now + 20, now + 30) == "cpu? (GPU memory +0 MiB)"
    sampler.available = False
    assert sampler.where(now, now + 10) == "cpu (no GPU)"
