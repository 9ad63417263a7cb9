"""`cascade sft`: supervised fine-tuning on the local engine (assistant-only loss)."""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import MISSING

from cascade_cli.config.common import StageConfig


@dataclass
class SFTConfig(StageConfig):
    kind: str = "sft"
    data: str = MISSING
    max_seq_len: int = 512
    epochs: float = 1.0
    max_steps: int | None = None
    batch_size: int = 8
    grad_accum: int = 1
    lr: float = 5e-5
    min_lr: float = 0.0
    warmup_ratio: float = 0.03
    weight_decay: float = 1e-4
    beta1: float = 0.9
    beta2: float = 0.95
    max_grad_norm: float = 1.0
    packing: bool = False
    bf16: bool = True
    save_every: int = 0
    log_every: int = 1
    tensorboard: bool = False
    eval_prompts: str | None = None
    eval_max_new_tokens: int = 48
