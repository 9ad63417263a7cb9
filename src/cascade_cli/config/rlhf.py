"""`cascade rlhf`: GRPO on a reward model's scores (Nemotron-Cascade §2.2)."""

# ruff: noqa: UP045  (OmegaConf 2.3 reads `Optional[X]`, not `X | None`)
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional

from omegaconf import MISSING

from cascade_cli.config.checks import TEXT, Bound, at_least, one_of
from cascade_cli.config.grpo import GRPOConfig, missing_reward, resolve_phases
from cascade_cli.errors import CascadeUsageError

REWARD_SHAPINGS = ("none", "zscore_tanh")


@dataclass
class RLHFConfig(GRPOConfig):
    """The GRPO base with the paper's RLHF choices as defaults.

    Reward: the RM's score of the text after `</think>` (the whole response when it is missing, which
    penalises unfinished thinking); a code-switching response gets the lowest score in the batch minus
    `code_switch_margin`. Half of each batch's prompts think, half do not (`mode: half`). No overlong
    filtering, and truncated responses keep their RM score (`truncated_reward: null`).
    The paper's stabilisers are off by default: `kl_coef: 1e-3`, `loss_aggregation: sequence` (mean over
    each response's tokens, then over responses) and `reward_shaping: zscore_tanh` (each group's rewards
    z-scored, then squashed with tanh, before the GRPO advantage).
    """

    kind: str = "rlhf"
    # Reward-model checkpoint (from `cascade rlhf rm`) that scores the answers.
    reward_model: str = MISSING
    # Prompt mode (half: half of each batch thinks, half does not).
    mode: Optional[str] = "half"
    # Truncated responses keep their RM score (null) unless a number is given.
    truncated_reward: Optional[float] = None
    # A code-switching response gets the batch's lowest score minus code_switch_margin.
    code_switch_penalty: bool = True
    # How far below the batch's lowest score a code-switching response lands.
    code_switch_margin: float = 10.0
    # none | zscore_tanh (each group's RM scores z-scored, then tanh).
    reward_shaping: str = "none"
    rm_batch_size: int = 32  # sequences per reward-model forward
    rm_max_len: int = 4096  # longer (prompt + answer) texts keep their last rm_max_len tokens

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "reward_model": TEXT, "code_switch_margin": at_least(0), "reward_shaping": one_of(*REWARD_SHAPINGS),
        "rm_batch_size": at_least(1), "rm_max_len": at_least(1),
    }

    def check(self) -> None:
        super().check()
        if self.engine == "openrlhf" and not self.cluster.reward_urls:
            if not self.reward_model:
                raise missing_reward("cluster.reward_urls or reward_model")
            if self.top_k > 0 or self.epoch_filter or any(p.overlong_filter for p in resolve_phases(self)):
                raise CascadeUsageError(
                    "cluster.reward_urls: top_k / overlong_filter / epoch_filter need cascade's agent and the "
                    "reward service: set cluster.reward_urls to `cascade verify --serve --reward-model CKPT`"
                )
