"""Epoch-level filtering through the real runner and a real local Ray head: `run_openrlhf_stage` (what
`recipe run` calls) submits one job per epoch with `ray job submit`, writes each job's agent file, rewrites
the prompt file between jobs, and a rerun after a failed job resumes at that epoch.

No GPU here: each job's entrypoint is a STAND-IN trainer (test_openrlhf_epoch_filter.stand_in_job: OpenRLHF's
own agent-executor code over our agent file, a fixed-answer stand-in for vLLM, the live reward service)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from cascade_cli.config.common import ClusterConfig
from cascade_cli.engines.openrlhf.runner import run_openrlhf_stage
from cascade_cli.errors import CascadeRunError
from cascade_cli.manifest import read_manifest
from cascade_cli.serve.server import RewardService
from cascade_cli.stage_kinds import openrlhf_builder

pytest.importorskip("ray", reason="the Ray test needs `pip install 'ray[default]'`")
pytestmark = pytest.mark.slow  # a Ray head and five stand-in jobs: about two minutes on 2 cores

sys.path.insert(0, str(Path(__file__).parent))
from service_thread import ServiceThread  # noqa: E402
from test_openrlhf_epoch_filter import prompt_ids, stage  # noqa: E402
from test_openrlhf_ray import ray_head  # noqa: E402, F401  (the module-scoped Ray head fixture)

TESTS = Path(__file__).parent
SRC = TESTS.parent / "src"


def stand_in(marker: Path):
    def entrypoint(job):
        env = [f"PYTHONPATH={SRC}:{TESTS}", f"CASCADE_JOB={job.name}", f"CASCADE_FAIL_ONCE={marker}"]
        code = "import sys; from test_openrlhf_epoch_filter import main; main(sys.argv[1:])"
        return ["env", *env, sys.executable, "-c", code, *job.args]

    return entrypoint


def test_recipe_runner_runs_one_job_per_epoch_and_resumes(tmp_path, ray_head):  # noqa: F811
    service = ServiceThread(RewardService(workers=1, timeout_s=60.0))
    try:
        config = stage(tmp_path, service.url)
        config.cluster = ClusterConfig(ray_address=ray_head, nodes=1, gpus_per_node=8, gpu_resource="test_gpu", vllm_engines=8,
                                       reward_urls=[service.url])
        entrypoint = stand_in(tmp_path / "failed_once")
        with pytest.raises(CascadeRunError, match=r"math_rl/epoch2\) ended FAILED"):
            run_openrlhf_stage(config, openrlhf_builder(config), entrypoint_override=entrypoint)
        assert read_manifest(config.out)["status"] == "failed"
        run_openrlhf_stage(config, openrlhf_builder(config), entrypoint_override=entrypoint)
    finally:
        service.close()
    manifest = read_manifest(config.out)
    jobs = manifest["openrlhf_jobs"]
    assert manifest["status"] == "completed" and jobs[0]["name"] == "math_rl/epoch2"  # resumed at the failed epoch
    assert jobs[0]["init"] == str(tmp_path / "math_rl" / "epochs" / "1")
    data = tmp_path / "math_rl" / "openrlhf_data"
    assert sorted(prompt_ids(data / "epoch0.jsonl")) == list(range(12))
    assert not set(prompt_ids(data / "epoch1.jsonl")) >= set(range(8))  # easy / hard prompts were dropped
    argv = json.loads((tmp_path / "math_rl" / "config.json").read_text())["argv"]
    assert argv[argv.index("--actor.model_name_or_path") + 1] == jobs[-1]["init"]
    assert (data / "agent_epoch2.py").is_file()
