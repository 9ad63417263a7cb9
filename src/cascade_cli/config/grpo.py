"""GRPO stage configs: `GRPOConfig` (shared by every GRPO stage) and `RLVRConfig` (`cascade rlvr --domain`).

Defaults follow the paper (Nemotron-Cascade §1.1, §1.4-1.7): strictly on-policy GRPO, token-level loss,
no KL, no entropy bonus, AdamW (0.9, 0.95), 8 rollouts per prompt, top-p 0.95. Sizes (steps, batch,
response length, LR) are small so the embedded tiny model trains on a CPU; recipes scale them up.
RLHF subclasses `GRPOConfig` (reward = a reward model's score, `mode: half`).
"""

# ruff: noqa: UP045  (OmegaConf 2.3 reads `Optional[X]`, not `X | None`)
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from omegaconf import MISSING

from cascade_cli.config.common import TrainerConfig
from cascade_cli.errors import CascadeUsageError

# The paper's mode per RLVR domain: IF-RL in non-thinking mode, math / code / swe in thinking mode.
DOMAIN_MODES = {"if": "no_think", "math": "think", "code": "think", "swe": "think"}
PROMPT_MODES = ("think", "no_think", "half", "row")
ROLLOUT_DTYPES = ("auto", "float32", "bfloat16")


@dataclass
class PhaseConfig:
    """One part of a response-length schedule; unset keys fall back to the stage's top-level values."""

    # Optimizer steps of this phase.
    steps: int = MISSING
    # Response token limit in this phase (unset: the stage's max_response_len).
    max_response_len: Optional[int] = None
    # Sampling temperature in this phase (unset: the stage's temperature).
    temperature: Optional[float] = None
    # Overlong filtering in this phase (unset: the stage's overlong_filter).
    overlong_filter: Optional[bool] = None


@dataclass
class RolloutConfig:
    # auto | hf | vllm. auto: hf for small models; vllm on a GPU, and on a CPU when the stage's rollout tokens
    # pay back vLLM's engine start (engines/local/rollout_backend.py).
    backend: str = "auto"
    # vLLM engine dtype: auto (bf16 where the device computes bf16 natively, else float32) | float32 | bfloat16
    dtype: str = "auto"
    max_batch_size: int = 512  # sequences per hf generation batch
    # Verify finished chunks of groups in a background thread while the next chunk generates.
    chunk_prompts: int = 0  # prompts per generation chunk; 0 = the whole step at once (no overlap)

    def __post_init__(self) -> None:
        if self.dtype not in ROLLOUT_DTYPES:
            raise CascadeUsageError(
                f"rollout.dtype: expected one of {', '.join(ROLLOUT_DTYPES)}, found {self.dtype!r}"
            )


@dataclass
class GRPOConfig(TrainerConfig):
    # Canonical RL rows (prompt + label): a .jsonl/.parquet file or a prepare-data directory.
    data: str = MISSING
    eval_data: Optional[str] = None  # held-out rows: greedy accuracy before and after the stage
    eval_max_new_tokens: Optional[int] = None  # default: the last phase's max_response_len
    # Held-out rows scored before and after (unset: all of eval_data).
    eval_limit: Optional[int] = None
    # Prompt mode: think | no_think | half (half of each batch each way, RLHF) | row (each row's "mode").
    # Unset: the domain's paper default (if -> no_think; math, code, swe -> think).
    mode: Optional[str] = None
    # Schedule: `steps` optimizer steps, or the sum of `phases[].steps` when phases are given.
    steps: int = 40
    # Response-length schedule: a list of {steps, max_response_len, temperature, overlong_filter}.
    phases: list[PhaseConfig] = field(default_factory=list)
    # Prompts sampled per optimizer step (each gets group_size responses).
    prompts_per_step: int = 16
    # Responses per prompt (the GRPO group the advantage is normalised in).
    group_size: int = 8
    # Prompt token limit (longer prompts keep their last tokens).
    max_prompt_len: int = 1024
    # Response token limit (new tokens per rollout).
    max_response_len: int = 64
    # Rollout sampling temperature.
    temperature: float = 1.0
    # Rollout nucleus sampling (1.0: off).
    top_p: float = 0.95
    # Rollout top-k sampling (-1: off).
    top_k: int = -1
    # Truncated responses: masked out of the loss (True), else kept with reward `truncated_reward`
    # (the paper: 0; unset = the verifier's score as is, as RLHF does with its reward model).
    overlong_filter: bool = False
    # Reward of a truncated response when overlong_filter is off (null: its score as is).
    truncated_reward: Optional[float] = 0.0
    # Batch-level (DAPO) dynamic filtering: drop all-correct / all-wrong groups, refill from the data.
    dynamic_filter: bool = False
    dynamic_filter_max_rounds: int = 4  # generation rounds per step before training on what was kept
    # A round draws the missing prompts / the recent fraction of groups kept, at most this many times the
    # missing count (1: only the missing ones); kept groups beyond prompts_per_step are not trained on.
    dynamic_filter_oversample: float = 4.0
    # Epoch-level filtering: after each epoch drop 0% / 100% prompts; re-add them with these probabilities.
    epoch_filter: bool = False
    # Chance to re-add a dropped 0%-solved prompt in the next epoch.
    epoch_filter_hard_p: float = 0.1
    # Chance to re-add a dropped 100%-solved prompt in the next epoch.
    epoch_filter_easy_p: float = 0.01
    # Added to a group's reward std before dividing (all-equal groups get advantage 0).
    adv_eps: float = 1e-6
    kl_coef: float = 0.0  # > 0: k3 KL to the frozen initial policy
    # token: sum over the step's tokens / their count (paper default); sequence: each response's token
    # mean, then the mean over responses (RLHF stabiliser).
    loss_aggregation: str = "token"
    entropy_coef: float = 0.0  # > 0: entropy bonus
    train_micro_batch: int = 32  # sequences per forward/backward (gradient accumulation, one step)
    logprob_chunk_tokens: int = 1024  # positions per LM-head chunk of the log-probs (memory ~ chunk x vocab)
    # auto: bf16 weights on a GPU; on a CPU fp32 weights, with bf16 autocast for 50M+ parameter models where
    # the CPU has native bf16 (engines/local/precision.py) | float32 | bfloat16 (weights, no autocast)
    dtype: str = "auto"
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    # Rewards: the verifier registry (the same path as `cascade verify`).
    # Verifier worker processes.
    verify_workers: int = 1
    # Options of the stage's verifier (`cascade verify -O DOMAIN.KEY=VALUE`), e.g. {all_tests: true} for code,
    # {reward: fraction} for if.
    verifier_options: dict[str, Any] = field(default_factory=dict)
    # Bookkeeping.
    save_every: int = 0  # checkpoint (weights + trainer_state/) every N steps; 0 = only at the end
    resume: bool = True  # continue from OUT/trainer_state when present
    # Also write TensorBoard logs to OUT/tensorboard.
    tensorboard: bool = False


@dataclass
class RLVRConfig(GRPOConfig):
    """`cascade rlvr --domain {if,math,code,swe}`: GRPO on a rule-based verifier's reward."""

    kind: str = "rlvr"
    # if | math | code | swe: picks the verifier that scores each response.
    domain: str = MISSING
    # IF-RL of the thinking models: a passing response also gets sigmoid(group z-score of the reward model's
    # score); the reward service computes it (`cascade verify --serve --reward-model CKPT`, engine openrlhf).
    if_rm_bonus: bool = False


def resolve_phases(config: GRPOConfig) -> list[PhaseConfig]:
    """The response-length schedule with every key set: each of `phases` with its unset keys taken from the
    stage's top-level values, or (no `phases`) one phase of `steps`. Every engine reads the schedule here."""
    if not config.phases:
        return [PhaseConfig(config.steps, config.max_response_len, config.temperature, config.overlong_filter)]
    phases = []
    for index, phase in enumerate(config.phases):
        if phase.steps is None or phase.steps < 1:
            raise CascadeUsageError(f"phases[{index}].steps: expected a positive integer, found {phase.steps!r}")
        phases.append(
            PhaseConfig(
                phase.steps,
                config.max_response_len if phase.max_response_len is None else phase.max_response_len,
                config.temperature if phase.temperature is None else phase.temperature,
                config.overlong_filter if phase.overlong_filter is None else phase.overlong_filter,
            )
        )
    return phases
