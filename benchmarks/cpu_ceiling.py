"""The machine's own ceiling, a reference line for the training benchmarks: fp32 and bf16 matmul GFLOP/s with
the current torch thread count, and what fraction of it a training pass reaches (6 x params x tokens FLOPs:
forward 2, backward 4 per parameter and token; attention's own FLOPs are left out, so it is a lower bound).

    from cpu_ceiling import ceiling_line, measure_ceiling
    ceiling = measure_ceiling()                  # {"float32": GFLOP/s, "bfloat16": GFLOP/s}
    print(ceiling_line(ceiling, "cascade sft", params, tokens, seconds, "bfloat16"))

    python benchmarks/cpu_ceiling.py [--threads 2]
"""

from __future__ import annotations

import argparse
import time

SIZES = (512, 1024)  # square matmuls; the best of them is the ceiling (512 fits the caches of this CPU)


def matmul_gflops(dtype_name: str, size: int, seconds: float = 0.5) -> float:
    """Best GFLOP/s of `size`^3 matmuls in `dtype_name` over ~`seconds` (best of short rounds: a shared
    machine only ever slows a round down)."""
    import torch

    dtype = getattr(torch, dtype_name)
    a, b = torch.randn(size, size).to(dtype), torch.randn(size, size).to(dtype)
    for _ in range(3):
        a @ b  # warm-up: oneDNN picks and caches its kernel
    best, deadline = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        began = time.perf_counter()
        for _ in range(4):
            a @ b
        best = max(best, 4 * 2 * size**3 / (time.perf_counter() - began) / 1e9)
    return best


def measure_ceiling(seconds: float = 0.5) -> dict[str, float]:
    """{"float32": GFLOP/s, "bfloat16": GFLOP/s}: the best over SIZES, with torch's current thread count."""
    return {
        name: max(matmul_gflops(name, size, seconds) for size in SIZES) for name in ("float32", "bfloat16")
    }


def training_gflops(params: int, tokens: int, seconds: float) -> float:
    """Achieved GFLOP/s of a training pass (forward + backward) over `tokens` tokens in `seconds`."""
    return 6 * params * tokens / seconds / 1e9


def ceiling_line(
    ceiling: dict[str, float], label: str, params: int, tokens: int, seconds: float, dtype: str
) -> str:
    achieved = training_gflops(params, tokens, seconds)
    return (
        f"ceiling {label}: {achieved:.1f} GFLOP/s (6*params*tokens) = {achieved / ceiling[dtype]:.0%} of the "
        f"{dtype} matmul ceiling {ceiling[dtype]:.0f} GFLOP/s"
    )


def format_ceiling(ceiling: dict[str, float], threads: int) -> str:
    return (
        f"CPU ceiling ({threads} threads, best square matmul of {SIZES}): fp32 {ceiling['float32']:.0f} GFLOP/s, "
        f"bf16 {ceiling['bfloat16']:.0f} GFLOP/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    print(format_ceiling(measure_ceiling(), args.threads))


if __name__ == "__main__":
    main()
