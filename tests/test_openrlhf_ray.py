"""A real local Ray head on loopback receives the stage's jobs through `ray job submit`; `ray job logs --follow`
streams them into the stage's log files and manifest; a failed job fails the stage with its last log lines.

There is no GPU here, so a STAND-IN plays the trainer: each job's entrypoint is replaced by a small CPU
Python program (it prints the OpenRLHF argv it was given and writes a config.json into the job's output
directory). Everything else is the real path: validation, data conversion, submission, log streaming, job
status, the manifest, and the phase chaining (each job's --actor.model_name_or_path is the previous output).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cascade_cli.chat import CHAT_TEMPLATE
from cascade_cli.config.common import ClusterConfig
from cascade_cli.config.grpo import PhaseConfig, RLVRConfig
from cascade_cli.config.sft import SFTConfig
from cascade_cli.engines.openrlhf.runner import run_openrlhf_stage
from cascade_cli.errors import CascadeRunError
from cascade_cli.jsonl import write_jsonl
from cascade_cli.manifest import read_manifest
from cascade_cli.stage_kinds import openrlhf_builder

pytest.importorskip("ray", reason="the Ray test needs `pip install 'ray[default]'`")
pytestmark = pytest.mark.slow  # starting a Ray head takes ~30 s on a shared 2-core machine

HEAD = textwrap.dedent("""
    import os, sys
    os.environ["RAY_AUTH_MODE"] = "disabled"  # a loopback test cluster; ray.init would enable token auth
    import ray
    ray.init(num_cpus=2, num_gpus=0, resources={"test_gpu": 8}, include_dashboard=True, dashboard_host="127.0.0.1",
             dashboard_port=int(sys.argv[1]), _node_ip_address="127.0.0.1", _temp_dir=sys.argv[2],
             configure_logging=False)
    print("ready", flush=True)
    sys.stdin.read()  # until the test closes stdin; ray.shutdown() at exit stops what ray.init started
    ray.shutdown()
""")

STAND_IN = textwrap.dedent("""
    import json, os, sys
    args = sys.argv[1:]
    out = args[args.index("--ckpt.output_dir") + 1]
    print("stand-in trainer (CPU) for", os.environ.get("CASCADE_JOB"), flush=True)
    for step in range(3):
        print(f"step {step} loss {1.0 / (step + 1):.3f}", flush=True)
    if os.environ.get("CASCADE_FAIL"):
        print("CUDA error: out of memory (stand-in)", flush=True)
        sys.exit(3)
    os.makedirs(out, exist_ok=True)
    json.dump({"stand_in": True, "argv": args}, open(os.path.join(out, "config.json"), "w"))
""")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory):
    port = free_port()
    temp_dir = Path("/tmp") / f"rayt{os.getpid()}"  # short: Ray's socket paths have a length limit
    process = subprocess.Popen(
        [sys.executable, "-c", HEAD, str(port), str(temp_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.time() + 180
    ready = False
    while time.time() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        if line.strip() == "ready":
            ready = True
            break
    if not ready:
        process.kill()
        pytest.fail("the Ray head did not start:\n" + (process.stdout.read() or ""))
    yield f"http://127.0.0.1:{port}"
    process.stdin.close()
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
    shutil.rmtree(temp_dir, ignore_errors=True)


def stand_in(fail: bool = False):
    def entrypoint(job):
        env = f"CASCADE_JOB={job.name}" + (" CASCADE_FAIL=1" if fail else "")
        return ["env", *env.split(), "python3", "-c", STAND_IN, *job.args]

    return entrypoint


def sft_config(tmp_path: Path, address: str) -> SFTConfig:
    data = tmp_path / "sft.jsonl"
    write_jsonl(
        data,
        [
            {
                "id": "1",
                "source": "t",
                "domain": "sft",
                "mode": "think",
                "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
            }
        ],
    )
    return SFTConfig(
        name="sft_16k",
        engine="openrlhf",
        data=str(data),
        init="Qwen/Qwen3-8B-Base",
        out=str(tmp_path / "sft_16k"),
        cluster=ClusterConfig(ray_address=address, nodes=1, gpus_per_node=8, gpu_resource="test_gpu"),
    )


def test_submitted_job_streams_logs_into_the_manifest(tmp_path, ray_head):
    config = sft_config(tmp_path, ray_head)
    metrics = run_openrlhf_stage(config, openrlhf_builder(config), entrypoint_override=stand_in())
    out = Path(config.out)
    manifest = read_manifest(out)
    assert manifest["status"] == "completed" and manifest["engine"] == "openrlhf"
    assert manifest["output_dir"] == str(out.resolve()) and metrics["output_dir"] == str(out.resolve())
    [job] = manifest["openrlhf_jobs"]
    assert job["status"] == "SUCCEEDED" and job["job_id"] == metrics["job_ids"][0]
    log = Path(job["log"]).read_text()
    assert "stand-in trainer (CPU) for sft_16k" in log and "step 2 loss 0.333" in log
    # The command recorded is the real OpenRLHF one; the stand-in got exactly its OpenRLHF flags.
    assert job["command"][job["command"].index("--") + 1 : job["command"].index("--") + 7] == [
        "deepspeed",
        "--num_nodes",
        "1",
        "--num_gpus",
        "8",
        "--module",
    ]
    written = json.loads((out / "config.json").read_text())["argv"]
    assert written[written.index("--data.dataset") + 1] == manifest["openrlhf_data"]
    # The Jinja chat template (spaces, quotes, braces) survives `ray job submit` and the job's shell intact.
    assert written[written.index("--data.tokenizer_chat_template") + 1] == CHAT_TEMPLATE
    converted = [json.loads(line) for line in Path(manifest["openrlhf_data"]).read_text().splitlines()]
    assert converted[0]["messages"][0]["content"] == "hi /think"


def test_failed_job_fails_the_stage_with_its_last_log_lines(tmp_path, ray_head):
    config = sft_config(tmp_path, ray_head)
    with pytest.raises(CascadeRunError, match=r"(?s)ended FAILED.*CUDA error: out of memory \(stand-in\)"):
        run_openrlhf_stage(config, openrlhf_builder(config), entrypoint_override=stand_in(fail=True))
    manifest = read_manifest(config.out)
    assert manifest["status"] == "failed"
    assert "CUDA error: out of memory (stand-in)" in manifest["openrlhf_jobs"][0]["last_log_lines"]


def test_length_schedule_runs_as_chained_jobs(tmp_path, ray_head):
    data = tmp_path / "math.jsonl"
    write_jsonl(
        data,
        [
            {"id": str(i), "source": "t", "domain": "math", "mode": "think", "prompt": f"{i}+1?",
             "label": {"answer": str(i + 1)}}
            for i in range(5)
        ],
    )
    config = RLVRConfig(
        name="math_rl",
        domain="math",
        engine="openrlhf",
        data=str(data),
        init="Qwen/Qwen3-8B-Base",
        out=str(tmp_path / "math_rl"),
        prompts_per_step=2,
        group_size=8,
        phases=[PhaseConfig(2, 1024, 1.0, True), PhaseConfig(3, 2048, 0.8, False)],
        cluster=ClusterConfig(
            ray_address=ray_head,
            nodes=1,
            gpus_per_node=8,
            gpu_resource="test_gpu",
            vllm_engines=8,
            reward_urls=["http://127.0.0.1:5000/get_reward"],
        ),
    )
    run_openrlhf_stage(config, openrlhf_builder(config), entrypoint_override=stand_in())
    manifest = read_manifest(config.out)
    first, second = manifest["openrlhf_jobs"]
    assert manifest["status"] == "completed" and first["status"] == second["status"] == "SUCCEEDED"
    assert second["init"] == first["output_dir"] and second["output_dir"] == manifest["output_dir"]
    for job, rows in ((first, 4), (second, 6)):
        argv = json.loads((Path(job["output_dir"]) / "config.json").read_text())["argv"]
        assert argv[argv.index("--actor.model_name_or_path") + 1] == job["init"]
        assert len(Path(argv[argv.index("--data.prompt_dataset") + 1]).read_text().splitlines()) == rows
