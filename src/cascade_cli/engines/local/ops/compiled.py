"""`compile: true`: the decoder layers' training passes through `torch.compile` (TorchInductor).

A small model's training step on CPU is thousands of short elementwise kernels (norms, rotary embeddings,
SiLU, residual adds) between its matmuls; Inductor fuses them into a few C++ loops. The compile is regional
(PyTorch's recipe for repeated blocks): each decoder layer is compiled in place, and since every layer runs the
same code on parameters of the same shapes, Dynamo compiles that code once and every layer reuses it: the
compile costs about one layer's instead of the whole decoder's, and the steps are no slower
(benchmarks/compile_regional.py measures both sides). Shapes are marked dynamic
so the varying sequence lengths of un-packed batches reuse one graph, but for one recompile: Inductor's C++
reductions guard on their size (`need_use_acc_helper`, 4,096 elements; the tiny model's query-norm weight
gradient sums batch x length x 4 heads), so batches on the other side of it get a second, smaller compile.

Only training passes run compiled: generation on the compiled model (held-out evaluation) runs under
`eager_generation()`, since its KV cache would make a compiled layer recompile at every length.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
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
    """The module the training step runs the decoder through: the model's own decoder, with its layers
    compiled in place when `enabled` (and possible); a decoder without a `layers` list is compiled whole."""
    decoder = model.get_decoder()
    if not enabled:
        return decoder
    problem = compiler_missing(device)
    if problem:
        print_warning(f"compile: {problem}; training runs eager")
        return decoder
    import torch

    layers = getattr(decoder, "layers", None)
    if not isinstance(layers, torch.nn.ModuleList):
        return torch.compile(decoder, dynamic=True)
    for layer in layers:
        layer.compile(dynamic=True)
    return decoder


@contextlib.contextmanager
def eager_generation() -> Iterator[None]:
    """Run compiled modules eagerly inside this block (generation: a KV cache changes shapes every token)."""
    import torch

    with torch.compiler.set_stance("force_eager"):
        yield
