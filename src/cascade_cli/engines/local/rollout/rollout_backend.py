"""Which rollout backend `auto` means: the hf loop or in-process vLLM, by model size, device and how many
tokens the stage will generate (vLLM's engine start is paid once, its speed-up on every token).

The rule (`pick_backend`, a pure function; `resolve_backend` feeds it the facts):
- vLLM not installed, or a model under AUTO_VLLM_MIN_PARAMS parameters -> `hf` (on CPU a small model decodes
  faster in the hf loop than through vLLM's scheduler, and the engine start is never paid back).
- a GPU -> `vllm` (its batched kernels and paged KV cache beat the hf loop by far on 50M+ models).
- a CPU -> `vllm` when the tokens the stage is expected to generate reach the break-even
  `start_s / (1/hf_tok_s - 1/vllm_tok_s)` of the rates measured on SmolLM2-135M (CPU_RATES; about 12k
  tokens), else `hf`; unknown planned tokens -> `hf`. The caller plans every response at its full length;
  responses stop earlier (EXPECTED_FILL), so the rule expects that share of the planned tokens. Bigger models lose more time per token in the hf loop while the engine
  start grows slower, so SmolLM2's break-even is a conservative bound for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from cascade_cli.errors import CascadeUsageError

BACKENDS = ("auto", "vllm", "hf")
AUTO_VLLM_MIN_PARAMS = 50_000_000


@dataclass(frozen=True)
class BackendRates:
    """Measured rollout costs on one device class: vLLM's engine start and both backends' tokens/s."""

    start_s: float
    hf_tok_s: float
    vllm_tok_s: float

    def break_even_tokens(self) -> float:
        """Tokens after which vLLM's faster decoding has paid for its engine start."""
        saved_per_token = 1 / self.hf_tok_s - 1 / self.vllm_tok_s
        return float("inf") if saved_per_token <= 0 else self.start_s / saved_per_token


# SmolLM2-135M on this CPU (AVX512-BF16, 2 threads, quiet machine), 2 prompts x n=8, temperature 1, <= 128
# tokens: vLLM 660 tok/s generating after a 59 s engine start, hf loop 152 tok/s (fp32; bf16 autocast 142).
# `benchmarks/eval_generation.py --model smollm2-135m` re-measures all three.
CPU_RATES = BackendRates(start_s=59.0, hf_tok_s=152.0, vllm_tok_s=660.0)
# Sampled responses stop before the length limit: SmolLM2, temperature 1, <= 256 tokens, 64 responses to
# math prompts: a mean 124 tokens (benchmarks/eval_generation.py), i.e. 0.48 of the planned upper bound.
EXPECTED_FILL = 0.5


def pick_backend(
    params: int, device: str, planned_tokens: int | None, vllm_installed: bool, cpu: BackendRates = CPU_RATES
) -> str:
    """`hf` or `vllm` for an `auto` rollout backend (the rule in the module docstring)."""
    if not vllm_installed or params < AUTO_VLLM_MIN_PARAMS:
        return "hf"
    if device.startswith("cuda"):
        return "vllm"
    if planned_tokens is None:
        return "hf"
    return "vllm" if planned_tokens * EXPECTED_FILL >= cpu.break_even_tokens() else "hf"


def vllm_available() -> bool:
    try:
        import vllm  # noqa: F401
    except Exception:  # ImportError, or a broken install raising at import
        return False
    return True


def count_parameters(model_dir: str | Path) -> int:
    """Parameter count from config.json alone (the model is built on the meta device: no memory, no load)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(model_dir)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


def resolve_backend(
    backend: str, model_dir: str | Path | None, device: str, planned_tokens: int | None = None
) -> str:
    """`hf` or `vllm` for `backend` (`auto` by `pick_backend`); a usage error for an unknown name."""
    if backend not in BACKENDS:
        raise CascadeUsageError(f"rollout backend must be one of {', '.join(BACKENDS)}; found {backend!r}")
    if backend != "auto":
        return backend
    if model_dir is None or not vllm_available():
        return "hf"
    return pick_backend(count_parameters(model_dir), device, planned_tokens, vllm_installed=True)
