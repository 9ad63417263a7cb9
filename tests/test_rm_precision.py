"""The reward model scores in the policy's precision: under bf16 autocast over fp32 weights where that pays
(a 50M+ parameter model on hardware with native bf16: SmolLM2-135M on this CPU), in fp32 for a small model,
with `precision="float32"` (held-out evaluations), and for a stage whose `dtype` is not `auto`."""

from __future__ import annotations

import pytest

from cascade_cli.config.grpo import RLVRConfig
from cascade_cli.engines.local.train.if_rm_bonus import with_rm_bonus
from cascade_cli.engines.local.train.rl_rewards import VerifierReward
from cascade_cli.engines.local.train.rlhf import RewardModelReward
from cascade_cli.models import bf16
from cascade_cli.verifiers.reward_model import RewardModelScorer, rm_text, scoring_precision

TEXTS = [
    rm_text("How do I water a cactus?", "Sparingly: soak the soil, then let it dry out completely before the next time."),
    rm_text("How do I water a cactus?", "Pour a glass of water on it every morning."),
    rm_text("Name a prime number.", "Seven is a prime number."),
    rm_text("Name a prime number.", "Ten."),
]


@pytest.mark.skipif(not bf16.bf16_supported("cpu"), reason="this CPU has no native bf16")
def test_a_large_reward_model_scores_under_bf16_autocast_close_to_fp32(smollm2_dir):
    scorer = RewardModelScorer(smollm2_dir, batch_size=2, max_len=128, device="cpu")
    assert scorer.bf16, "SmolLM2-135M is over BF16_MIN_PARAMS and this CPU has native bf16"
    in_bf16 = scorer.scores(TEXTS)
    scorer.bf16 = False  # the same weights and score head, in fp32
    in_fp32 = scorer.scores(TEXTS)
    assert in_bf16 != in_fp32  # autocast did change the arithmetic
    assert max(abs(a - b) for a, b in zip(in_bf16, in_fp32, strict=True)) < 0.05


def test_float32_precision_and_small_models_score_in_fp32(smollm2_dir, tiny_dir):
    assert not RewardModelScorer(smollm2_dir, device="cpu", precision="float32").bf16
    assert not RewardModelScorer(tiny_dir, device="cpu").bf16  # under BF16_MIN_PARAMS: conversions cost more
    with pytest.raises(ValueError, match=r"precision: expected one of auto, float32; found 'bf16'"):
        RewardModelScorer(tiny_dir, device="cpu", precision="bf16")


@pytest.mark.parametrize(("dtype", "expected"), [("auto", "auto"), ("float32", "float32"), ("bfloat16", "float32")])
def test_a_stage_reward_model_follows_the_stage_dtype(tiny_dir, dtype, expected):
    """IF-RL's bonus and RLHF's reward take the reward model's precision from the stage's `dtype`."""
    assert scoring_precision(dtype) == expected  # run_rlhf passes this to RewardModelReward
    rlvr = RLVRConfig(domain="if", init="tiny", data="d", out="o", if_rm_bonus=True, reward_model=str(tiny_dir), dtype=dtype)
    assert with_rm_bonus(rlvr, VerifierReward("if"), "cpu").precision == expected
    assert RewardModelReward(tiny_dir, device="cpu", precision=expected).scorer.bf16 is False  # tiny: fp32 either way
