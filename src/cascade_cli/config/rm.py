"""`cascade rlhf rm`: a Bradley-Terry reward model on preference pairs (Nemotron-Cascade §2.1)."""

# ruff: noqa: UP045  (OmegaConf 2.3 reads `Optional[X]`, not `X | None`)
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

from omegaconf import MISSING

from cascade_cli.config.checks import TEXT, Bound, above, at_least, fraction
from cascade_cli.config.common import TrainerConfig
from cascade_cli.config.sft import check_min_lr


@dataclass
class RewardModelConfig(TrainerConfig):
    kind: str = "reward_model"
    # Preference pairs: a .jsonl/.json/.parquet file or a prepare-data directory (data.jsonl [+ heldout.jsonl]).
    data: str = MISSING
    # Held-out pairs for pairwise accuracy; unset: heldout.jsonl of a prepare-data directory, else a
    # `heldout_fraction` of the data (split off before training, seeded).
    eval_data: Optional[str] = None
    # Share of the pairs held out when there is no eval_data or heldout.jsonl.
    heldout_fraction: float = 0.1
    skip_bad_rows: bool = False  # drop pairs with an empty side, identical sides or a missing field
    # The RM reads the conversation with the answer only (text after </think>), as RLHF scores it.
    strip_thinking: bool = True
    max_seq_len: int = 512  # longer pairs are truncated from the left (the answer's end is what is scored)
    epochs: float = 1.0  # the paper: one epoch (longer was worse)
    # Optimizer steps; overrides `epochs`.
    max_steps: Optional[int] = None
    batch_size: int = 16  # pairs per optimizer step
    micro_batch: int = 16  # pairs per forward/backward
    # Peak learning rate (cosine schedule with warmup).
    lr: float = 2e-5
    # The cosine decays to this.
    min_lr: float = 0.0
    # Share of the steps spent warming the learning rate up.
    warmup_ratio: float = 0.03
    bf16: bool = True  # autocast where the hardware has bf16; master weights stay float32
    # Log metrics every N optimizer steps.
    log_every: int = 1
    save_every: int = 0  # write trainer_state/ every N optimizer steps (0: only at the end)
    resume: bool = True  # continue from OUT/trainer_state when present
    stop_after: Optional[int] = None  # stop (state saved) after this step, as if killed; for resume tests

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "data": TEXT, "eval_data": TEXT, "heldout_fraction": fraction(high_open=True), "max_seq_len": at_least(1),
        "epochs": above(0), "max_steps": at_least(1), "batch_size": at_least(1), "micro_batch": at_least(1),
        "min_lr": at_least(0), "warmup_ratio": fraction(high_open=True), "log_every": at_least(1),
        "save_every": at_least(0), "stop_after": at_least(1),
    }

    def check(self) -> None:
        super().check()
        check_min_lr(self.lr, self.min_lr)
