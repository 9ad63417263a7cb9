"""GRPO learns (issue 6): IF-RL raises the held-out IF accuracy of an SFT'd tiny model, fixed seed, one thread.

The whole path a user runs: `prepare-data` (tiny SFT mix and tiny IF prompts), `cascade sft` from the random
tiny model, then `cascade rlvr --domain if` with its greedy held-out accuracy before and after (the IFEval
verifier as the reward). Both tests are slow (`make test-all`): the IF one takes 4 minutes on one core of a
quiet machine and 8.6 on a slow one, a third of the default suite, whose RL learning check is then
`test_grpo.py::test_rewards_rise_on_the_toy_task`. `benchmarks/tiny_rl_gains.py` measures every RL stage of
the tiny recipe over several seeds.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest
import torch

IF_SFT_MIX = ["mix.if=0.7", "mix.general=0.3", "mix.math=0", "mix.code=0"]


@pytest.fixture(autouse=True)
def one_thread(monkeypatch):
    """Deterministic numerics (the same thread count everywhere) and no contention with other tests."""
    monkeypatch.setenv("CASCADE_THREADS", "1")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def run_ok(cli, *argv: str) -> None:
    result = cli(list(argv))
    assert result.exit_code == 0, result.output


def heldout_metrics(stage_dir: Path) -> tuple[dict, float, float]:
    """(metrics, accuracy before, accuracy after) from an rlvr stage's manifest."""
    metrics = json.loads((stage_dir / "cascade_stage.json").read_text())["metrics"]
    return metrics, metrics["heldout_accuracy_before"], metrics["heldout_accuracy_after"]


@pytest.mark.slow
def test_if_rl_raises_heldout_accuracy_of_the_sft_model(cli, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("CASCADE_THREADS", "1")  # every stage on one thread: the measured numbers below
    run = functools.partial(run_ok, cli)
    run("prepare-data", "--source", "tiny:sft", "--out", str(tmp_path / "sft_data"), "n=3000", *IF_SFT_MIX)
    run("prepare-data", "--source", "tiny:if", "--out", str(tmp_path / "if"), "n=400", "holdout=64")
    run(
        "sft", "--init", "tiny", "--data", str(tmp_path / "sft_data"), "--out", str(tmp_path / "sft"),
        "lr=3e-3", "min_lr=3e-4", "max_steps=400", "batch_size=16", "bf16=false", "threads=1",
    )  # fmt: skip
    run(
        "rlvr", "--domain", "if", "--init", str(tmp_path / "sft"), "--data", str(tmp_path / "if"),
        "--out", str(tmp_path / "if_rl"), "--eval-data", str(tmp_path / "if" / "heldout.jsonl"),
        "steps=15", "prompts_per_step=8", "group_size=8", "max_response_len=128", "lr=8e-4",
        "dynamic_filter=true", "seed=0",
    )  # fmt: skip

    metrics, before, after = heldout_metrics(tmp_path / "if_rl")
    assert metrics["heldout_n"] == 64
    assert before > 0.05, "the SFT model should already follow some instructions (RL needs some successes)"
    # Measured at this seed, one thread: 0.188 -> 0.219 at lr 8e-4 (as recipes/tiny.yaml); 0.188 -> 0.203 at 5e-4.
    assert after - before >= 2 / 64, f"IF-RL did not raise held-out accuracy: {before:.3f} -> {after:.3f}"


@pytest.mark.slow
def test_math_rl_raises_heldout_accuracy_of_a_math_sft_model(cli, tmp_path: Path):
    """Math RL learns once the SFT base is sometimes right: 1,500 math-only SFT steps (~7 min on one core)
    bring held-out greedy math to ~0.4, and 20 GRPO steps lift it (measured 0.406 -> 0.609; RL seeds 1 and 2:
    0.625, 0.609). Below ~500 math SFT steps held-out math is 0-5% and RL finds nothing to reinforce; the
    tiny recipe's SFT (2,400 steps, mostly math and code) gets there too (see the README's tiny RL gains)."""
    run = functools.partial(run_ok, cli)
    math_only = ["mix.math=1.0", "mix.code=0", "mix.if=0", "mix.general=0"]
    run("prepare-data", "--source", "tiny:sft", "--out", str(tmp_path / "sft_data"), "n=6000", *math_only)
    run("prepare-data", "--source", "tiny:math", "--out", str(tmp_path / "math"), "n=400", "holdout=64")
    run(
        "sft", "--init", "tiny", "--data", str(tmp_path / "sft_data"), "--out", str(tmp_path / "sft"),
        f"eval_prompts={tmp_path / 'math' / 'heldout.jsonl'}", "eval_limit=64",
        "lr=3e-3", "min_lr=3e-4", "max_steps=1500", "batch_size=16", "bf16=false", "threads=1",
    )  # fmt: skip
    run(
        "rlvr", "--domain", "math", "--init", str(tmp_path / "sft"), "--data", str(tmp_path / "math"),
        "--out", str(tmp_path / "math_rl"), "--eval-data", str(tmp_path / "math" / "heldout.jsonl"),
        "steps=20", "prompts_per_step=8", "group_size=8", "max_response_len=64", "lr=1e-4",
        "dynamic_filter=true", "seed=0",
    )  # fmt: skip

    _, before, after = heldout_metrics(tmp_path / "math_rl")
    assert before > 0.2, f"the math SFT base should be sometimes right; found {before:.3f}"
    assert after - before >= 0.1, f"math RL did not raise held-out accuracy: {before:.3f} -> {after:.3f}"
