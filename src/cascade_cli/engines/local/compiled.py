"""`compile: true`: the decoder's training passes through `torch.compile` (TorchInductor).

A small model's training step on CPU is thousands of short elementwise kernels (norms, rotary embeddings,
SiLU, residual adds) between its matmuls; Inductor fuses them into a few C++ loops: tiny-model steps 1.5-1.7x
faster (benchmarks/sft_throughput.py, sides cascade and cascade-compiled; README). The first step compiles
(30-150 s on 2 cores; Inductor caches the kernels on disk, so later runs start faster); shapes are marked
dynamic so the varying sequence lengths of un-packed batches reuse one graph, but for one recompile: Inductor's
C++ reductions guard on their size (`need_use_acc_helper`, 4,096 elements; the tiny model's query-norm weight
gradient sums batch x length x 4 heads), so batches on the other side of it get a second graph (33 s in `make demo`).

Only training passes are compiled: generation (held-out evaluation, rollouts) keeps the eager module, whose
KV cache would make a compiled graph recompile at every length.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from cascade_cli.console import print_warning


def compiler_missing(device: str) -> str | None:
    """Why `torch.compile` cannot build kernels here, or None. On CPU Inductor needs a C++ compiler."""
    if device != "cpu":
        return None
    candidates = [os.environ.get("CXX", ""), "g++", "c++", "clang++"]
    if any(name and shutil.which(name) for name in candidates):
        return None
    return "no C++ compiler found ($CXX, g++, c++ or clang++); TorchInductor needs one on CPU"


def training_decoder(model: Any, enabled: bool, device: str) -> Any:
    """The module the training step runs the decoder through: compiled when `enabled` (and possible),
    else the model's own decoder. Both share the same parameters."""
    decoder = model.get_decoder()
    if not enabled:
        return decoder
    problem = compiler_missing(device)
    if problem:
        print_warning(f"compile: {problem}; training runs eager")
        return decoder
    import torch

    return torch.compile(decoder, dynamic=True)
