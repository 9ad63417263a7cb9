"""`cascade sft`: supervised fine-tuning on the local engine (assistant-only loss)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from omegaconf import MISSING

from cascade_cli.config.checks import TEXT, Bound, above, at_least, fraction, one_of
from cascade_cli.config.common import TrainerConfig
from cascade_cli.errors import CascadeUsageError
from cascade_cli.template_choice import TEMPLATE_CHOICES, check_openrlhf_template


@dataclass
class SFTConfig(TrainerConfig):
    kind: str = "sft"
    # A canonical .jsonl file, or a directory holding data.jsonl (what `cascade prepare-data` writes).
    data: str = MISSING
    # Template the rows render with: auto (a stock model adopts cascade's ChatML + mode flags, as a checkpoint
    # cascade trained keeps them) | model (the model's own, no mode flag) | cascade.
    chat_template: str = "auto"
    max_seq_len: int = 512  # longer examples are truncated (their tail loses its loss)
    # Passes over the data (fractions allowed).
    epochs: float = 1.0
    max_steps: int | None = None  # optimizer steps; overrides `epochs`
    batch_size: int = 8  # sequences (packed rows when packing=true) per micro-batch
    # Micro-batches per optimizer step.
    grad_accum: int = 1
    # Peak learning rate (cosine schedule with warmup).
    lr: float = 5e-5
    min_lr: float = 0.0  # the cosine decays to this
    # Share of the steps spent warming the learning rate up.
    warmup_ratio: float = 0.03
    weight_decay: float = 1e-4  # not applied to norms and biases
    packing: bool = False  # several examples per row, attention kept within each example
    bf16: bool = True  # bf16 autocast where the hardware has native bf16; fp32 master weights always
    # torch.compile the decoder's training passes (fuses a small model's many short kernels; the first step
    # pays the compile, so it suits runs of many steps; on CPU needs a C++ compiler, else a warning and eager).
    compile: bool = False
    # Shuffle the rows every epoch (seeded).
    shuffle: bool = True
    threads: int = 0  # CPU threads for torch; 0 = the idle cores (cores minus those busy now)
    save_every: int = 0  # write trainer_state/ every N optimizer steps (0: only at the end)
    resume: bool = True  # continue from OUT/trainer_state when present
    stop_after: int | None = None  # stop (state saved) after this step, as if killed; for resume tests
    # Log metrics every N optimizer steps.
    log_every: int = 1
    # Held-out math prompts (canonical math rows, a file or a prepare-data directory): greedy exact-answer
    # accuracy of the init and the trained model is printed and stored in the manifest.
    eval_prompts: str | None = None
    # Token limit of each greedy held-out answer.
    eval_max_new_tokens: int = 64
    # Held-out prompts scored at most.
    eval_limit: int = 200
    # Held-out prompts per generation batch.
    eval_batch_size: int = 32

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "data": TEXT, "chat_template": one_of(*TEMPLATE_CHOICES), "max_seq_len": at_least(1), "epochs": above(0), "max_steps": at_least(1),
        "batch_size": at_least(1), "grad_accum": at_least(1), "min_lr": at_least(0),
        "warmup_ratio": fraction(high_open=True), "threads": at_least(0), "save_every": at_least(0),
        "stop_after": at_least(1), "log_every": at_least(1), "eval_prompts": TEXT,
        "eval_max_new_tokens": at_least(1), "eval_limit": at_least(1), "eval_batch_size": at_least(1),
    }

    def check(self) -> None:
        super().check()
        if self.engine == "openrlhf":
            check_openrlhf_template(self.chat_template)
        check_min_lr(self.lr, self.min_lr)


def check_min_lr(lr: float, min_lr: float) -> None:
    """The cosine schedule decays from lr to min_lr, so min_lr may not exceed lr."""
    if min_lr > lr:
        raise CascadeUsageError(f"min_lr: expected a number <= lr ({lr:g}), found {min_lr:g}")
