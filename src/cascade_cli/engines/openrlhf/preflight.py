"""What `recipe run` (and a stage run on engine openrlhf) checks before it submits anything to Ray, each
failure one line naming what is missing:

- the Ray dashboard answers at cluster.ray_address;
- the cluster has cluster.nodes alive nodes with cluster.gpus_per_node of cluster.gpu_resource each (`GPU`
  on a real cluster; OpenRLHF's Ray trainer always asks for `GPU`, so another name is for test clusters only);
- run_dir is visible from a GPU node: a one-line Ray job placed on such a node looks for a marker file the
  runner wrote (a run_dir on a disk only the submitting machine has would leave every job's output there).
"""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

from cascade_cli.config.common import ClusterConfig, role_layout
from cascade_cli.console import print_warning
from cascade_cli.errors import CascadeUsageError

VISIBILITY_TIMEOUT = 120  # seconds the marker check waits for a free GPU node before giving up with a warning
_LOOK = "import os,sys; p=sys.argv[1]; print('visible' if os.path.exists(p) else 'missing', p, flush=True)"


def cluster_nodes(address: str) -> list[dict[str, Any]]:
    """Every node Ray knows at `address` (the dashboard), as ray.nodes() spells them."""
    from ray.util.state import list_nodes

    try:
        states = list_nodes(address=address, timeout=30, raise_on_missing_output=False)
    except Exception as error:  # noqa: BLE001 - any failure to reach it is the same one line
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise CascadeUsageError(
            f"cluster.ray_address: no Ray cluster answers at {address} ({first[:200]}); "
            "start one (`ray start --head --dashboard-host 0.0.0.0`) or fix the address"
        ) from None
    return [
        {
            "NodeManagerAddress": state.node_ip,
            "Alive": state.state == "ALIVE",
            "Resources": state.resources_total or {},
        }
        for state in states
    ]


def check_layout(cluster: ClusterConfig, nodes: list[dict[str, Any]]) -> None:
    from cascade_cli.engines.openrlhf.ray_launch import too_small

    count, per_node = role_layout(cluster, None)
    problem = too_small(nodes, str(cluster.gpu_resource), count, per_node)
    if problem:
        raise CascadeUsageError(problem)


def check_visible(cluster: ClusterConfig, run_dir: Path, ray: str) -> None:
    """Submit a one-line job onto a GPU node that looks for a marker file under run_dir."""
    marker = run_dir / f".cascade-visible-{uuid.uuid4().hex[:8]}"
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text("written by `cascade recipe run` to check the cluster sees run_dir\n")
    resource = str(cluster.gpu_resource)
    placement = (
        ["--entrypoint-num-gpus", "0.01"]
        if resource == "GPU"
        else ["--entrypoint-resources", f'{{"{resource}": 0.01}}']
    )
    argv = [
        ray,
        "job",
        "submit",
        "--address",
        str(cluster.ray_address),
        *placement,
        "--",
        "python3",
        "-c",
        _LOOK,
        str(marker),
    ]
    try:
        result = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=VISIBILITY_TIMEOUT,
            env={**os.environ, "RAY_ADDRESS": ""},
        )
    except subprocess.TimeoutExpired:
        print_warning(
            f"run_dir: could not check that a GPU node sees {run_dir} (none free in {VISIBILITY_TIMEOUT} s)"
        )
        return
    finally:
        marker.unlink(missing_ok=True)
    if f"missing {marker}" in result.stdout:
        raise CascadeUsageError(
            f"run_dir: {run_dir} is not visible from the cluster's GPU nodes; put it on a file system every "
            "node mounts at the same path (NFS, Lustre, ...)"
        )
    if f"visible {marker}" not in result.stdout:
        last = ((result.stderr or result.stdout).strip().splitlines() or ["no output"])[-1]
        print_warning(f"run_dir: could not check that a GPU node sees {run_dir} ({last[:200]})")


def preflight(cluster: ClusterConfig, run_dir: Path, ray: str) -> None:
    """Ray reachable, enough nodes and GPUs, run_dir visible from a GPU node; raises one line otherwise."""
    check_layout(cluster, cluster_nodes(str(cluster.ray_address)))
    check_visible(cluster, run_dir, ray)
