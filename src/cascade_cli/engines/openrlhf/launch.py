"""How OpenRLHF's non-Ray trainers (openrlhf.cli.train_sft, train_rm: DeepSpeed under torch.distributed) start
on N nodes of G GPUs: `cluster.launcher` picks the command a job's entrypoint is.

- one node (any launcher): DeepSpeed's launcher on the node the job runs on, `deepspeed --num_nodes 1
  --num_gpus G --module openrlhf.cli.X ...`;
- ray: `python3 -m cascade_cli.engines.openrlhf.ray_launch ...` (ray_launch.py), a driver that reserves one
  bundle of G GPUs per node (STRICT_SPREAD) and starts one `torchrun --node_rank R` per node, as OpenRLHF's
  own multi-node recipe for these trainers does (examples/scripts/train_nonrl_slurm.sh);
- hostfile: DeepSpeed's launcher with `--hostfile` (it reaches the other nodes over passwordless ssh);
- slurm: the same torchrun per node, started by `srun` inside an sbatch script (slurm.py).
"""

from __future__ import annotations

import json
from pathlib import Path

from cascade_cli.config.common import ClusterConfig, role_layout

RAY_DRIVER = "cascade_cli.engines.openrlhf.ray_launch"
# torchrun's static rendezvous: node 0 hosts the TCP store at MASTER_ADDR:MASTER_PORT.
TORCHRUN = "torchrun"
SLURM_NODE_RANK = "$SLURM_NODEID"  # the node's index in the allocation, set by srun in each task


def torchrun_argv(
    nodes: int, per_node: int, rank: int | str, master_addr: str, master_port: int | str, module: str
) -> list[str]:
    """One node's share of the job: G processes of `module`, ranks R*G .. R*G+G-1 of N*G."""
    return [
        TORCHRUN,
        "--nnodes",
        str(nodes),
        "--nproc_per_node",
        str(per_node),
        "--node_rank",
        str(rank),
        "--master_addr",
        str(master_addr),
        "--master_port",
        str(master_port),
        "-m",
        module,
    ]


def deepspeed_argv(cluster: ClusterConfig, module: str) -> list[str]:
    nodes, per_node = role_layout(cluster, None)
    argv = ["deepspeed"]
    if nodes > 1:
        argv += ["--hostfile", str(Path(str(cluster.hostfile)).expanduser().resolve())]
    return [*argv, "--num_nodes", str(nodes), "--num_gpus", str(per_node), "--module", module]


def ray_driver_argv(cluster: ClusterConfig, module: str) -> list[str]:
    nodes, per_node = role_layout(cluster, None)
    return [
        "python3",
        "-m",
        RAY_DRIVER,
        "--nodes",
        str(nodes),
        "--gpus-per-node",
        str(per_node),
        "--gpu-resource",
        str(cluster.gpu_resource),
        "--master-port",
        str(cluster.master_port),
        "--module",
        module,
        "--",
    ]


def trainer_launcher(cluster: ClusterConfig, cli: str) -> list[str]:
    """What precedes the OpenRLHF flags in a non-Ray trainer job's entrypoint (its module included)."""
    module = f"openrlhf.cli.{cli}"
    nodes, per_node = role_layout(cluster, None)
    if cluster.launcher == "slurm":
        # Run by `srun` in the sbatch script (slurm.py): the $VARIABLES are each task's own, expanded there.
        return torchrun_argv(nodes, per_node, SLURM_NODE_RANK, "$MASTER_ADDR", "$MASTER_PORT", module)
    if nodes == 1 or cluster.launcher == "hostfile":
        return deepspeed_argv(cluster, module)
    return ray_driver_argv(cluster, module)


def entrypoint_placement(cluster: ClusterConfig) -> list[str]:
    """`ray job submit` options for a non-Ray trainer job: on one node, DeepSpeed's launcher itself needs the
    node's G GPUs (else Ray runs it on the head, which often has none); the Ray driver and a hostfile launcher
    place the work themselves and run anywhere."""
    nodes, per_node = role_layout(cluster, None)
    if nodes > 1:
        return []
    if cluster.gpu_resource == "GPU":
        return ["--entrypoint-num-gpus", str(per_node)]
    return ["--entrypoint-resources", json.dumps({str(cluster.gpu_resource): per_node})]


def module_of(entrypoint: list[str]) -> str:
    """The trainer module an entrypoint runs (after `--module` or `-m`; the ray driver's own `-m` skipped)."""
    if "--module" in entrypoint:
        return entrypoint[entrypoint.index("--module") + 1]
    return entrypoint[entrypoint.index("-m") + 1]


def split_entrypoint(entrypoint: list[str]) -> tuple[str, list[str]]:
    """(trainer module, its flags) of an entrypoint: deepspeed's `--module M ARGS`, the Ray driver's
    `--module M ... -- ARGS`, `python3 -m M ARGS` or torchrun's `-m M ARGS`."""
    module = module_of(entrypoint)
    after = entrypoint[entrypoint.index(module) + 1 :]
    if entrypoint[:3] == ["python3", "-m", RAY_DRIVER]:
        after = after[after.index("--") + 1 :]
    return module, after


def with_module(entrypoint: list[str], module: str) -> list[str]:
    """The same entrypoint running `module` instead of the trainer (tests: a CPU stand-in)."""
    argv = list(entrypoint)
    flag = "--module" if "--module" in argv else "-m"
    argv[argv.index(flag) + 1] = module
    return argv
