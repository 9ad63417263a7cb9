"""cluster.launcher picks how OpenRLHF's non-Ray trainers (train_sft, train_rm) start on N nodes; the Ray
driver's own pieces (its arguments, the cluster-size check, the failure recap). The driver on a real
multi-node Ray cluster: tests/test_openrlhf_multinode_ray.py; the Slurm scripts: tests/test_openrlhf_slurm_*.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cascade_cli.config.checks import validate
from cascade_cli.config.common import ClusterConfig
from cascade_cli.config.sft import SFTConfig
from cascade_cli.engines.openrlhf import launch, ray_launch
from cascade_cli.engines.openrlhf.preflight import check_layout, cluster_nodes
from cascade_cli.errors import CascadeUsageError
from cascade_cli.stage_kinds import build_openrlhf_jobs as build_jobs


def sft(tmp_path: Path, **cluster: Any) -> SFTConfig:
    return SFTConfig(
        engine="openrlhf",
        data="d.jsonl",
        init="Qwen/Qwen3-8B-Base",
        out=str(tmp_path / "sft"),
        cluster=ClusterConfig(**{"gpus_per_node": 8, **cluster}),
    )


def test_one_node_keeps_deepspeed_and_runs_where_its_gpus_are(tmp_path):
    [job] = build_jobs(sft(tmp_path, nodes=1))
    assert job.entrypoint[:7] == [
        "deepspeed",
        "--num_nodes",
        "1",
        "--num_gpus",
        "8",
        "--module",
        "openrlhf.cli.train_sft",
    ]
    submit = job.submit
    assert submit[submit.index("--entrypoint-num-gpus") + 1] == "8" and submit[-1] == "--"
    [job] = build_jobs(sft(tmp_path, nodes=1, gpu_resource="test_gpu"))
    assert json.loads(job.submit[job.submit.index("--entrypoint-resources") + 1]) == {"test_gpu": 8}


def test_ray_launcher_submits_the_driver_with_the_trainer_flags_after_it(tmp_path):
    [job] = build_jobs(sft(tmp_path, nodes=4, master_port=0, gpu_resource="g"))
    assert job.entrypoint[:3] == ["python3", "-m", launch.RAY_DRIVER]
    assert "--entrypoint-num-gpus" not in job.submit  # the driver itself needs no GPU: it runs on the head
    options, trainer_args = ray_launch.parse(job.entrypoint[3:])
    assert (options.nodes, options.gpus_per_node, options.gpu_resource, options.master_port) == (4, 8, "g", 0)
    assert options.module == "openrlhf.cli.train_sft" and trainer_args == job.args
    assert launch.split_entrypoint(job.entrypoint) == ("openrlhf.cli.train_sft", job.args)


def test_hostfile_launcher_is_deepspeeds_with_the_hostfile(tmp_path):
    hostfile = tmp_path / "hosts"
    [job] = build_jobs(sft(tmp_path, nodes=2, launcher="hostfile", hostfile=str(hostfile)))
    assert job.entrypoint[:9] == [
        "deepspeed",
        "--hostfile",
        str(hostfile),
        "--num_nodes",
        "2",
        "--num_gpus",
        "8",
        "--module",
        "openrlhf.cli.train_sft",
    ]
    with pytest.raises(
        CascadeUsageError, match=r"^cluster\.hostfile: launcher hostfile with nodes > 1 needs"
    ):
        validate(sft(tmp_path, nodes=2, launcher="hostfile"))


def test_slurm_launcher_is_torchrun_with_each_tasks_rank(tmp_path):
    [job] = build_jobs(sft(tmp_path, nodes=2, launcher="slurm"))
    assert job.entrypoint[: job.entrypoint.index("-m") + 2] == launch.torchrun_argv(
        2, 8, "$SLURM_NODEID", "$MASTER_ADDR", "$MASTER_PORT", "openrlhf.cli.train_sft"
    )


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("launcher", "ssh", "one of ray, slurm, hostfile"),
        ("master_port", 70000, "in [0, 65535]"),
        ("gpu_resource", " ", "expected a Ray resource name"),
    ],
)
def test_bad_launcher_keys_are_one_line(tmp_path, key, value, expected):
    with pytest.raises(
        CascadeUsageError, match=rf"cluster\.{key}: .*{expected}".replace("[", r"\[")
    ) as error:
        validate(sft(tmp_path, nodes=2, **{key: value}))
    assert "\n" not in str(error.value)


NODES = [
    {"NodeManagerAddress": "10.0.0.1", "Alive": True, "Resources": {"CPU": 32}},  # the head: no GPU
    {"NodeManagerAddress": "10.0.0.2", "Alive": True, "Resources": {"GPU": 8, "CPU": 96}},
    {"NodeManagerAddress": "10.0.0.3", "Alive": True, "Resources": {"GPU": 4, "CPU": 96}},
    {"NodeManagerAddress": "10.0.0.4", "Alive": False, "Resources": {"GPU": 8}},
]


def test_cluster_size_check_counts_alive_nodes_with_enough_gpus():
    assert ray_launch.too_small(NODES, "GPU", 1, 8) is None
    assert ray_launch.too_small(NODES, "GPU", 2, 4) is None
    problem = ray_launch.too_small(NODES, "GPU", 2, 8)
    assert problem == (
        "cluster.nodes: 2 nodes with 8 GPU each asked; the Ray cluster has 1 such node(s) "
        "(GPU per alive node: 10.0.0.1: 0, 10.0.0.2: 8, 10.0.0.3: 4)"
    )
    with pytest.raises(CascadeUsageError, match="2 nodes with 8 GPU each asked"):
        check_layout(ClusterConfig(nodes=2, gpus_per_node=8), NODES)


def test_unreachable_ray_is_one_line():
    pytest.importorskip("ray")
    with pytest.raises(
        CascadeUsageError, match=r"^cluster\.ray_address: no Ray cluster answers at http://127\.0\.0\.1:9 "
    ) as error:
        cluster_nodes("http://127.0.0.1:9")
    assert "\n" not in str(error.value)


def test_failure_recap_drops_torchruns_own_traceback():
    lines = [
        "step 3 loss 0.5",
        "torch.OutOfMemoryError: CUDA out of memory (the worker's error)",
        "E1206 api.py:1002] failed (exitcode: 1) local_rank: 0",
        "Traceback (most recent call last):",
        '  File "/venv/bin/torchrun", line 8, in <module>',
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
        "============================================================",
        "openrlhf.cli.train_sft FAILED",
    ]
    assert ray_launch.recap(lines) == [*lines[:3], *lines[6:]]
    assert ray_launch.recap([str(k) for k in range(100)]) == [str(k) for k in range(80, 100)]


@pytest.mark.parametrize(
    ("launcher", "expected"),
    [
        (
            "ray",
            r"cluster\.ray_address: no Ray cluster answers at http://127\.0\.0\.1:9 ",
        ),  # checked before submitting
        (
            "hostfile",
            r"`ray job submit` failed",
        ),  # ssh-launched nodes: nothing for Ray to count, straight to submit
    ],
)
def test_stage_run_checks_the_cluster_before_its_first_submission(tmp_path, launcher, expected):
    pytest.importorskip("ray")
    from cascade_cli.errors import CascadeRunError
    from cascade_cli.stage_kinds import run_config

    data = tmp_path / "d.jsonl"
    data.write_text(
        json.dumps(
            {
                "id": "1",
                "source": "t",
                "domain": "sft",
                "mode": "think",
                "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
            }
        )
        + "\n"
    )
    config = sft(
        tmp_path,
        nodes=2,
        launcher=launcher,
        hostfile=str(tmp_path / "hosts"),
        ray_address="http://127.0.0.1:9",
    )
    config.data = str(data)
    with pytest.raises((CascadeUsageError, CascadeRunError), match=expected):
        run_config(config)
