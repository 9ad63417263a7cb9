"""`cascade distill`: multi-domain on-policy distillation (Nemotron-Cascade 2 §4.4, MOPD).

The student samples on-policy; each prompt's row `domain` routes it to that domain's teacher (an earlier
checkpoint of the same cascade, e.g. the best one on the domain's benchmark); the loss is GRPO's machinery
with the per-token advantage a_t = log pi_teacher(y_t) - log pi_student(y_t). Defaults are the paper's MOPD
settings (its first setting: 4 rollouts x 128 prompts; later 1 x 512), so a recipe scales them down for a CPU.
Every other key is GRPO's (LoRA, bf16, chunked log-probs, rollout backend, checkpointing, resume).
"""

# ruff: noqa: UP045  (OmegaConf 2.3 reads `Optional[X]`, not `X | None`)
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Optional

from omegaconf import MISSING

from cascade_cli.config.checks import Bound, Range, at_least
from cascade_cli.config.grpo import GRPOConfig
from cascade_cli.errors import CascadeUsageError


@dataclass
class DistillConfig(GRPOConfig):
    """GRPO's keys with MOPD's defaults; `teachers` and `data` name the domains."""

    kind: str = "distill"
    # Domain -> teacher checkpoint, e.g. {if: runs/x/if_rl, math: runs/x/math_rl}; in a recipe also
    # `best:BENCHMARK` (the stage checkpoint that scored best on it in this run's evaluations). Every teacher
    # must share the student's tokenizer.
    teachers: dict[str, str] = MISSING
    # RL rows (prompt + label + domain): .jsonl/.parquet files or prepare-data directories, one per domain or
    # mixed; each row's `domain` must have a teacher.
    data: list[str] = MISSING
    # Each domain's share of every step's prompts, e.g. {if: 1, math: 1} for half and half: each domain
    # walks its own rows. Unset: every row is equally likely, so a domain's share is its share of the rows
    # (a large math set beside a few hundred IF prompts leaves the IF teacher almost nothing to teach on).
    domain_weights: dict[str, float] = field(default_factory=dict)
    # Held-out rows of any of the domains: greedy accuracy per domain before and after the stage.
    eval_data: list[str] = field(default_factory=list)
    # Held-out rows scored per domain (unset: all of each domain's).
    eval_limit: Optional[int] = None
    # Prompt mode; row: each row's own `mode`, else its domain's RL mode (if: no_think; math, code, swe: think).
    mode: Optional[str] = "row"
    # Optimizer steps (paper: about 50; AIME25 peaked within 30).
    steps: int = 50
    # Prompts per step (paper: 128, with 4 rollouts each; later 512 x 1).
    prompts_per_step: int = 128
    # Rollouts per prompt (paper: 4).
    group_size: int = 4
    # Learning rate after the warm-up, then constant (paper: 2e-6; its Table 8: 3e-6).
    lr: float = 2e-6
    # Steps of the linear warm-up from warmup_start_lr to lr (paper: 30).
    warmup_steps: int = 30
    # Learning rate of the first step (paper: 2e-7).
    warmup_start_lr: float = 2e-7
    # Rollout temperature: 1 samples the student's own distribution, the one its log-probs are taken under.
    temperature: float = 1.0
    # Rollout nucleus sampling (1.0: off, the student's own distribution).
    top_p: float = 1.0
    # Weight of the task reward's group advantage added to every token's teacher advantage (paper: 0).
    reward_weight: float = 0.0
    # Importance weights r_t = pi_train / pi_rollout below this carry no loss (paper: 0.5).
    importance_low: float = 0.5
    # Importance weights above this carry no loss (paper: 2.0).
    importance_high: float = 2.0
    # Options per domain's verifier, e.g. {code: {all_tests: true}}.
    verifier_options: dict[str, dict] = field(default_factory=dict)

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "warmup_steps": at_least(0), "warmup_start_lr": at_least(0), "reward_weight": at_least(0),
        "importance_low": Range(0, 1, low_open=True), "importance_high": at_least(1),
    }

    def check(self) -> None:
        super().check()
        for key in ("dynamic_filter", "epoch_filter"):
            if getattr(self, key):
                raise CascadeUsageError(
                    f"{key}: distill learns from every rollout's tokens (no group is without signal); found true"
                )
        if self.kl_coef or self.entropy_coef:
            raise CascadeUsageError(
                "kl_coef, entropy_coef: distill's loss has neither term (the teachers anchor the student); "
                f"found {self.kl_coef}, {self.entropy_coef}"
            )
        for domain, weight in self.domain_weights.items():
            if domain not in self.teachers:
                raise CascadeUsageError(
                    f"domain_weights.{domain}: expected one of the teachers' domains ({', '.join(self.teachers)}), "
                    f"found {domain!r}"
                )
            if not weight > 0:
                raise CascadeUsageError(f"domain_weights.{domain}: expected a number above 0, found {weight}")
        missing = [domain for domain in self.teachers if self.domain_weights and domain not in self.domain_weights]
        if missing:
            raise CascadeUsageError(
                f"domain_weights: expected a weight for every teacher's domain, missing {', '.join(missing)}"
            )
        if self.loss_aggregation != "token":
            raise CascadeUsageError(
                f"loss_aggregation: distill's loss is the mean over tokens (token); found {self.loss_aggregation!r}"
            )
