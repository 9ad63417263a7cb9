"""`cascade sft`: supervised fine-tuning on the local engine (assistant-only loss)."""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import MISSING

from cascade_cli.config.common import StageConfig


@dataclass
class SFTConfig(StageConfig):
    kind: str = "sft"
    # A canonical .jsonl file, or a directory holding data.jsonl (what `cascade prepare-data` writes).
    data: str = MISSING
    max_seq_len: int = 512  # longer examples are truncated (their tail loses its loss)
    epochs: float = 1.0
    max_steps: int | None = None  # optimizer steps; overrides `epochs`
    batch_size: int = 8  # sequences (packed rows when packing=true) per micro-batch
    grad_accum: int = 1
    lr: float = 5e-5
    min_lr: float = 0.0  # the cosine decays to this
    warmup_ratio: float = 0.03
    weight_decay: float = 1e-4  # not applied to norms and biases
    beta1: float = 0.9
    beta2: float = 0.95
    max_grad_norm: float = 1.0  # 0 disables clipping
    packing: bool = False  # several examples per row, attention kept within each example
    bf16: bool = True  # bf16 autocast where the hardware has native bf16; fp32 master weights always
    shuffle: bool = True
    threads: int = 0  # CPU threads for torch; 0 = the idle cores (cores minus the load average)
    save_every: int = 0  # write trainer_state/ every N optimizer steps (0: only at the end)
    resume: bool = True  # continue from OUT/trainer_state when present
    stop_after: int | None = None  # stop (state saved) after this step, as if killed; for resume tests
    log_every: int = 1
    tensorboard: bool = False
    # Held-out math prompts (canonical math rows, a file or a prepare-data directory): greedy exact-answer
    # accuracy of the init and the trained model is printed and stored in the manifest.
    eval_prompts: str | None = None
    eval_max_new_tokens: int = 64
    eval_limit: int = 200
    eval_batch_size: int = 32
