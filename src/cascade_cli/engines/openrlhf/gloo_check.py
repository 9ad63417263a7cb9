"""A CPU stand-in for OpenRLHF's non-Ray trainers: checks that a launcher's processes form one job.

Run by torchrun in place of `openrlhf.cli.train_sft` (same flags), each process joins one torch.distributed
group over gloo (TCP, no GPU needed), all-reduces its rank + 1 and prints what it sees:

    gloo_check rank=R node_rank=N local_rank=L world_size=W master=ADDR:PORT host=HOST sum=S expected=E

and process 0 writes `--ckpt.output_dir`/config.json with every rank's host. A wrong rank, world size or
master address either hangs the rendezvous (torchrun's timeout ends it) or gives a wrong sum (exit 1).
CASCADE_GLOO_CHECK_FAIL_RANK=R makes node R's processes fail with a message (tests of failure reporting).

Run without torchrun (in the place of openrlhf.cli.train_ppo_ray, a Ray job), it instead counts the Ray
cluster's alive nodes, prints `ray_check nodes=N expected=E` (E: --actor.num_nodes) and fails below E.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from datetime import timedelta
from pathlib import Path


def _flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def main(argv: list[str] | None = None) -> int:
    import torch
    import torch.distributed as dist

    argv = sys.argv[1:] if argv is None else argv
    if "RANK" not in os.environ:
        return ray_check(argv)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    node_rank = int(os.environ.get("GROUP_RANK", "0"))
    master = f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
    if os.environ.get("CASCADE_GLOO_CHECK_FAIL_RANK") == str(node_rank):
        print(f"gloo_check: node {node_rank} fails on purpose (CASCADE_GLOO_CHECK_FAIL_RANK)", flush=True)
        return 3
    dist.init_process_group("gloo", timeout=timedelta(seconds=120))
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value)
    hosts: list[str | None] = [None] * world
    dist.all_gather_object(hosts, socket.gethostname())
    expected = world * (world + 1) / 2
    print(
        f"gloo_check rank={rank} node_rank={node_rank} local_rank={os.environ.get('LOCAL_RANK')} world_size={world} master={master} "
        f"host={socket.gethostname()} sum={value.item():g} expected={expected:g}",
        flush=True,
    )
    out = _flag(argv, "--ckpt.output_dir")
    if rank == 0 and out:
        Path(out).mkdir(parents=True, exist_ok=True)
        report = {
            "stand_in": "gloo_check",
            "world_size": world,
            "sum": value.item(),
            "hosts": hosts,
            "argv": argv,
        }
        (Path(out) / "config.json").write_text(json.dumps(report))
    dist.destroy_process_group()
    return 0 if value.item() == expected else 1


def ray_check(argv: list[str]) -> int:
    import ray

    ray.init()
    alive = [node for node in ray.nodes() if node["Alive"]]
    expected = int(_flag(argv, "--actor.num_nodes") or 1)
    print(f"ray_check nodes={len(alive)} expected={expected}", flush=True)
    out = _flag(argv, "--ckpt.output_dir")
    if out and len(alive) >= expected:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "config.json").write_text(
            json.dumps({"stand_in": "ray_check", "nodes": len(alive), "argv": argv})
        )
    return 0 if len(alive) >= expected else 1


if __name__ == "__main__":
    sys.exit(main())
