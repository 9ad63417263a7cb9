"""`cascade rlhf rm`: a Bradley-Terry reward model on preference pairs (Nemotron-Cascade §2.1)."""

# ruff: noqa: UP045  (OmegaConf 2.3 reads `Optional[X]`, not `X | None`)
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from omegaconf import MISSING

from cascade_cli.config.common import StageConfig


@dataclass
class RewardModelConfig(StageConfig):
    kind: str = "reward_model"
    # Preference pairs: a .jsonl/.json/.parquet file or a prepare-data directory (data.jsonl [+ heldout.jsonl]).
    data: str = MISSING
    # Held-out pairs for pairwise accuracy; unset: heldout.jsonl of a prepare-data directory, else a
    # `heldout_fraction` of the data (split off before training, seeded).
    eval_data: Optional[str] = None
    heldout_fraction: float = 0.1
    skip_bad_rows: bool = False  # drop pairs with an empty side, identical sides or a missing field
    # The RM reads the conversation with the answer only (text after </think>), as RLHF scores it.
    strip_thinking: bool = True
    max_seq_len: int = 512  # longer pairs are truncated from the left (the answer's end is what is scored)
    epochs: float = 1.0  # the paper: one epoch (longer was worse)
    max_steps: Optional[int] = None
    batch_size: int = 16  # pairs per optimizer step
    micro_batch: int = 16  # pairs per forward/backward
    lr: float = 2e-5
    min_lr: float = 0.0
    warmup_ratio: float = 0.03
    weight_decay: float = 0.0
    beta1: float = 0.9
    beta2: float = 0.95
    max_grad_norm: float = 1.0
    bf16: bool = True  # autocast where the hardware has bf16; master weights stay float32
    log_every: int = 1
    tensorboard: bool = False
    save_every: int = 0  # write trainer_state/ every N optimizer steps (0: only at the end)
    resume: bool = True  # continue from OUT/trainer_state when present
    stop_after: Optional[int] = None  # stop (state saved) after this step, as if killed; for resume tests
