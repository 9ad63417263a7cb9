"""GRPO's `dtype: auto`, and the rollout token budget `auto` backends are chosen by (pure functions).

`dtype: auto`: on a GPU bf16 weights; on a CPU fp32 master weights, with bf16 autocast for the training
pass where the CPU has native bf16 matmuls (AVX512-BF16 / AMX) and the model is large enough for its
matmuls to dominate (BF16_MIN_PARAMS in models/bf16.py, whose rule the reward model's scoring follows too):
the training pass's large matmuls gain from bf16, while hf-loop decoding (small matmuls, one token at a
time) does not, so rollouts stay fp32 (`Generator(bf16=True)` is there to measure it), and below
BF16_MIN_PARAMS the conversions cost what the matmuls save, so small models stay fp32.
benchmarks/precision.py and benchmarks/eval_generation.py measure both sides.
An explicit `float32` / `bfloat16` / `float16` is the weights' dtype, without autocast.
"""

from __future__ import annotations

from typing import Any

import torch

from cascade_cli.models.bf16 import BF16_MIN_PARAMS


def weight_dtype(dtype: str, device: str) -> torch.dtype:
    """The dtype GRPO loads the policy in."""
    if dtype == "auto":
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    return getattr(torch, dtype)


def autocast_bf16(dtype: str, device: str, params: int, native_bf16: bool) -> bool:
    """Whether GRPO runs its training pass (policy and reference log-probs) under bf16 autocast."""
    return dtype == "auto" and not device.startswith("cuda") and native_bf16 and params >= BF16_MIN_PARAMS


def planned_rollout_tokens(config: Any, phases: list[Any]) -> int:
    """An upper bound on the tokens a GRPO stage generates: every response of every step at full length."""
    per_step = config.prompts_per_step * config.group_size
    return sum(phase.steps * phase.max_response_len * per_step for phase in phases)
