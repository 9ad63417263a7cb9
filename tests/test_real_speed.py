"""Speed choices for real models: the `auto` rollout backend rule, GRPO's `dtype: auto`, and bf16 training
that still learns."""

from __future__ import annotations

import string
import sys
from pathlib import Path

import pytest
import torch

from cascade_cli.config.grpo import PhaseConfig, RLVRConfig
from cascade_cli.engines.local.ops import precision
from cascade_cli.engines.local.rollout.generation import Generator
from cascade_cli.engines.local.rollout.rollout_backend import (
    AUTO_VLLM_MIN_PARAMS,
    CPU_RATES,
    EXPECTED_FILL,
    BackendRates,
    pick_backend,
    resolve_backend,
)
from cascade_cli.engines.local.train import grpo
from cascade_cli.engines.local.train.rl_rewards import RewardHook
from cascade_cli.errors import CascadeUsageError
from cascade_cli.models import bf16
from cascade_cli.verifiers.base import Score
from stage_helpers import bare_stage

sys.path.insert(0, str(Path(__file__).parent))
from test_grpo_support import build_model_dir  # noqa: E402

SMOL = 134_515_008


# ---- the `auto` rollout backend rule (pure) ----------------------------------------------------------------


def test_break_even_is_the_engine_start_over_the_time_saved_per_token():
    rates = BackendRates(start_s=100.0, hf_tok_s=100.0, vllm_tok_s=200.0)
    assert rates.break_even_tokens() == pytest.approx(20_000)
    assert BackendRates(10.0, hf_tok_s=300.0, vllm_tok_s=200.0).break_even_tokens() == float("inf")


def test_auto_picks_hf_for_small_models_and_without_vllm():
    for device in ("cpu", "cuda"):
        assert pick_backend(2_000_000, device, 10**9, vllm_installed=True) == "hf"
        assert pick_backend(SMOL, device, 10**9, vllm_installed=False) == "hf"
    assert pick_backend(AUTO_VLLM_MIN_PARAMS, "cuda", None, vllm_installed=True) == "vllm"


def test_auto_on_cpu_picks_vllm_only_past_the_measured_break_even():
    """The planned tokens are an upper bound (every response at full length): the rule expects
    EXPECTED_FILL of them, so 8 prompts x n=8 x 256 tokens (16k planned, ~8k expected: the measured hf
    loop wins end to end) stays on hf, and a stage of several such steps goes to vLLM."""
    even = CPU_RATES.break_even_tokens() / EXPECTED_FILL
    assert pick_backend(SMOL, "cpu", int(even) - 1, vllm_installed=True) == "hf"
    assert pick_backend(SMOL, "cpu", int(even) + 1, vllm_installed=True) == "vllm"
    assert pick_backend(SMOL, "cpu", 8 * 8 * 256, vllm_installed=True) == "hf"
    assert pick_backend(SMOL, "cpu", 4 * 8 * 8 * 256, vllm_installed=True) == "vllm"
    assert pick_backend(SMOL, "cpu", None, vllm_installed=True) == "hf"  # unknown budget: no engine start
    # a GPU pays the start back on any budget
    assert pick_backend(SMOL, "cuda:0", 1, vllm_installed=True) == "vllm"


def test_resolve_backend_names_and_small_models(tmp_path):
    tiny = build_model_dir(tmp_path / "tiny")
    assert resolve_backend("auto", tiny, "cpu", planned_tokens=10**9) == "hf"  # 1.5M parameters
    assert resolve_backend("vllm", tiny, "cpu") == "vllm"
    with pytest.raises(CascadeUsageError, match="tgi"):
        resolve_backend("tgi", tiny, "cpu")


# ---- GRPO `dtype: auto` (pure) -----------------------------------------------------------------------------


def test_dtype_auto_is_bf16_weights_on_gpu_and_fp32_master_weights_on_cpu():
    assert precision.weight_dtype("auto", "cuda") == torch.bfloat16
    assert precision.weight_dtype("auto", "cpu") == torch.float32
    assert precision.weight_dtype("float16", "cpu") == torch.float16
    # bf16 autocast: only on a CPU with native bf16, for models big enough, and only for `auto`
    assert precision.autocast_bf16("auto", "cpu", SMOL, native_bf16=True)
    assert not precision.autocast_bf16("auto", "cpu", SMOL, native_bf16=False)
    assert not precision.autocast_bf16("auto", "cpu", 1_500_000, native_bf16=True)
    assert not precision.autocast_bf16("float32", "cpu", SMOL, native_bf16=True)
    assert not precision.autocast_bf16("auto", "cuda", SMOL, native_bf16=True)  # bf16 weights already


def test_planned_rollout_tokens_sum_the_phases():
    config = RLVRConfig(domain="math", data="-", prompts_per_step=8, group_size=8)
    phases = [PhaseConfig(3, 64, 1.0, False), PhaseConfig(2, 128, 1.0, False)]
    assert precision.planned_rollout_tokens(config, phases) == 64 * (3 * 64 + 2 * 128)


# ---- bf16 autocast still learns -----------------------------------------------------------------------------


class LowercaseShare(RewardHook):
    def score(self, records):
        return [
            Score(reward=sum(ch in string.ascii_lowercase for ch in r["response"]) / max(len(r["response"]), 1),
                  passed=False)
            for r in records
        ]  # fmt: skip


@pytest.mark.skipif(not bf16.bf16_supported("cpu"), reason="this CPU has no native bf16")
def test_bf16_autocast_grpo_raises_the_reward(tmp_path, monkeypatch):
    """With bf16 autocast forced on (the tiny model is under BF16_MIN_PARAMS), the training pass (and here the
    hf rollouts too, `Generator(bf16=True)`) run in bf16 over fp32 weights and the reward still rises."""
    monkeypatch.setattr(precision, "BF16_MIN_PARAMS", 0)
    monkeypatch.setenv("CASCADE_THREADS", "1")
    tiny = build_model_dir(tmp_path / "tiny")
    rows = [{"id": str(i), "prompt": "Write letters.", "label": None} for i in range(8)]
    config = RLVRConfig(
        domain="math", init=str(tiny), data="-", out=str(tmp_path / "out"), steps=8, prompts_per_step=4,
        group_size=8, max_response_len=8, truncated_reward=None, lr=1e-2, top_p=1.0, seed=0,
    )  # fmt: skip
    stage = bare_stage(config)
    run, _ = grpo.build_run(stage, rows, LowercaseShare(), domain="math", mode="no_think")
    assert run.bf16 and next(run.policy.parameters()).dtype == torch.float32
    run.generator = Generator.for_policy(
        run.policy, run.tokenizer, str(stage.init), backend="auto", seed=0, max_batch_size=512, bf16=run.bf16,
        planned_tokens=precision.planned_rollout_tokens(config, run.phases),
    )  # fmt: skip
    assert run.generator.backend == "hf" and run.generator.model is run.policy and run.generator.bf16
    rewards = [grpo.train_step(run, step)[0]["reward_mean"] for step in range(config.steps)]
    run.pool.shutdown()
    assert sum(rewards[-2:]) / 2 > sum(rewards[:2]) / 2 + 0.1, rewards
