"""Multi-node SFT on a real Ray cluster on this machine: a head without GPUs and two worker nodes, each its own
raylet on its own loopback address (127.0.0.2, 127.0.0.3; the head keeps the machine's address, which its
dashboard agent connects to) with one `test_gpu`, a custom resource standing for
its GPU (`cluster.gpu_resource`). The stage goes the real way: `ray job submit` of the launcher driver
(engines/openrlhf/ray_launch.py), a STRICT_SPREAD placement group, one torchrun per node. The trainer is the
CPU stand-in gloo_check (same flags as openrlhf.cli.train_sft): every process joins one gloo group across the
nodes and all-reduces its rank, so a wrong rank, world size or master address cannot pass.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cascade_cli.config.common import ClusterConfig
from cascade_cli.config.sft import SFTConfig
from cascade_cli.engines.openrlhf.launch import RAY_DRIVER, with_module
from cascade_cli.engines.openrlhf.runner import ray_cli, run_openrlhf_stage
from cascade_cli.errors import CascadeRunError, CascadeUsageError
from cascade_cli.jsonl import write_jsonl
from cascade_cli.manifest import read_manifest
from cascade_cli.stage_kinds import openrlhf_builder

pytest.importorskip("ray", reason="the Ray test needs `pip install 'ray[default]'`")
pytestmark = pytest.mark.slow  # a 3-node Ray cluster and torch in 2 processes: about a minute on 2 cores

STAND_IN = "cascade_cli.engines.openrlhf.gloo_check"
WORKERS = ("127.0.0.2", "127.0.0.3")
CLUSTER = textwrap.dedent("""
    import os, sys
    os.environ["RAY_AUTH_MODE"] = "disabled"  # a loopback test cluster
    import ray._private.utils
    from ray.cluster_utils import Cluster
    # Not /tmp/ray/ray_current_cluster: `ray.init("auto")` elsewhere on this machine must not find this cluster.
    ray._private.utils.write_ray_address = lambda *args, **kwargs: None
    port, temp_dir, workers = int(sys.argv[1]), sys.argv[2], sys.argv[3].split(",")
    cluster = Cluster(initialize_head=True, head_node_args=dict(
        num_cpus=1, include_dashboard=True, dashboard_host="127.0.0.1",
        dashboard_port=port, temp_dir=temp_dir))
    for address in workers:
        cluster.add_node(num_cpus=1, resources={"test_gpu": 1}, node_ip_address=address)
    print("ready", flush=True)
    sys.stdin.read()  # until the test closes stdin
    cluster.shutdown()
""")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def ray_cluster():
    port = free_port()
    temp_dir = Path("/tmp") / f"raymn{os.getpid()}"  # short: Ray's socket paths have a length limit
    process = subprocess.Popen(
        [sys.executable, "-c", CLUSTER, str(port), str(temp_dir), ",".join(WORKERS)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # Every node runs `python3 -m ...` from PATH, as a cluster's nodes run their installed environment.
        env={**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"},
    )
    deadline, ready, seen = time.time() + 240, False, []
    while time.time() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        seen.append(line)
        if line.strip() == "ready":
            ready = True
            break
    if not ready:
        process.kill()
        pytest.fail("the Ray cluster did not start:\n" + "".join(seen[-40:]))
    yield f"http://127.0.0.1:{port}"
    process.stdin.close()
    try:
        process.wait(timeout=90)
    except subprocess.TimeoutExpired:
        process.kill()
    shutil.rmtree(temp_dir, ignore_errors=True)


def sft_config(tmp_path: Path, address: str, nodes: int, runtime_env: dict | None = None) -> SFTConfig:
    data = tmp_path / "sft.jsonl"
    row = {
        "id": "1",
        "source": "t",
        "domain": "sft",
        "mode": "think",
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
    }
    write_jsonl(data, [row])
    return SFTConfig(
        name="sft_multinode",
        engine="openrlhf",
        data=str(data),
        init="Qwen/Qwen3-8B-Base",
        out=str(tmp_path / "sft_multinode"),
        cluster=ClusterConfig(
            ray_address=address,
            nodes=nodes,
            gpus_per_node=1,
            gpu_resource="test_gpu",
            master_port=0,
            launcher="ray",
            runtime_env_json=json.dumps(runtime_env or {"env_vars": {}}),
        ),
    )


def gloo_stand_in(job):
    assert job.entrypoint[:3] == ["python3", "-m", RAY_DRIVER]  # the real launcher; only the trainer differs
    return with_module(job.entrypoint, STAND_IN)


def test_one_torchrun_per_node_forms_one_gloo_group(tmp_path, ray_cluster):
    config = sft_config(tmp_path, ray_cluster, nodes=2)
    run_openrlhf_stage(config, openrlhf_builder(config), entrypoint_override=gloo_stand_in)
    manifest = read_manifest(config.out)
    [job] = manifest["openrlhf_jobs"]
    assert manifest["status"] == "completed" and job["status"] == "SUCCEEDED"
    log = Path(job["log"]).read_text()
    header = re.search(r"2 nodes x 1 test_gpu: (\S+), (\S+); master (\S+):(\d+)", log)
    assert header, log
    node0, node1, master, port = header.groups()
    assert {node0, node1} == set(WORKERS) and master == node0  # one node each, bundle 0's node is the master
    checks = re.findall(
        r"\[node (\d)\] gloo_check rank=(\d) node_rank=(\d) local_rank=0 world_size=(\d) "
        r"master=(\S+) host=\S+ sum=(\S+) expected=(\S+)",
        log,
    )
    assert sorted(checks) == [
        ("0", "0", "0", "2", f"{master}:{port}", "3", "3"),
        ("1", "1", "1", "2", f"{master}:{port}", "3", "3"),
    ], log
    report = json.loads((Path(config.out) / "config.json").read_text())
    assert report["world_size"] == 2 and report["sum"] == 3.0
    assert report["argv"][report["argv"].index("--data.dataset") + 1] == manifest["openrlhf_data"]


def test_a_failing_node_fails_the_job_with_its_message(tmp_path, ray_cluster):
    config = sft_config(
        tmp_path, ray_cluster, nodes=2, runtime_env={"env_vars": {"CASCADE_GLOO_CHECK_FAIL_RANK": "1"}}
    )
    pattern = r"(?s)ended FAILED.*\[node 1\] gloo_check: node 1 fails on purpose.*node 1 \(127\.0\.0\.\d\) exited with code 1"
    with pytest.raises(CascadeRunError, match=pattern):
        run_openrlhf_stage(config, openrlhf_builder(config), entrypoint_override=gloo_stand_in)
    tail = read_manifest(config.out)["openrlhf_jobs"][0]["last_log_lines"]
    assert any("[node 1] gloo_check: node 1 fails on purpose" in line for line in tail)
    # Node 0, left waiting for its peer in the rendezvous, was stopped with the job: no stand-in lives on.
    deadline = time.time() + 30
    while time.time() < deadline and stand_ins_running():
        time.sleep(1)
    assert not stand_ins_running()


def stand_ins_running() -> list[str]:
    found = subprocess.run(["pgrep", "-f", f"[-]m {STAND_IN}"], capture_output=True, text=True)
    assert found.returncode in (0, 1), found.stderr  # 1: none found
    return found.stdout.split()


def test_too_few_nodes_fails_before_anything_starts(tmp_path, ray_cluster):
    config = sft_config(tmp_path, ray_cluster, nodes=3)
    # `recipe run`'s check before submitting: one line, nothing submitted.
    with pytest.raises(
        CascadeUsageError, match=r"3 nodes with 1 test_gpu each asked; the Ray cluster has 2"
    ) as error:
        run_openrlhf_stage(config, openrlhf_builder(config), entrypoint_override=gloo_stand_in)
    assert "\n" not in str(error.value)
    assert not (Path(config.out) / "openrlhf_logs").exists()
    # The driver's own check, for a job submitted by hand: one line and exit 2, no torchrun started.
    result = subprocess.run(
        [
            ray_cli(),
            "job",
            "submit",
            "--address",
            ray_cluster,
            "--",
            "python3",
            "-m",
            RAY_DRIVER,
            "--nodes",
            "3",
            "--gpus-per-node",
            "1",
            "--gpu-resource",
            "test_gpu",
            "--module",
            STAND_IN,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "RAY_ADDRESS": ""},
        timeout=180,
    )
    assert result.returncode != 0
    assert re.search(
        r"cluster\.nodes: 3 nodes with 1 test_gpu each asked; the Ray cluster has 2 such node",
        result.stdout + result.stderr,
    ), result.stdout + result.stderr
    assert "[node" not in result.stdout
