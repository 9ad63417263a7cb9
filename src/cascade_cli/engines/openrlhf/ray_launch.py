"""The Ray driver of a multi-node non-Ray trainer job (`cluster.launcher: ray`; launch.py builds its command):

    ray job submit ... -- python3 -m cascade_cli.engines.openrlhf.ray_launch --nodes N --gpus-per-node G \\
        --gpu-resource GPU --master-port P --module openrlhf.cli.train_sft -- <OpenRLHF flags>

A Ray job's entrypoint runs on one node, so this driver does what a hostfile + ssh would: it checks the cluster
has N alive nodes with G of `--gpu-resource` each (one line and exit 2 if not, before anything starts),
reserves one bundle of G per node in a STRICT_SPREAD placement group, places one NodeProcess actor in each
bundle, takes bundle 0's node address as the master, and starts `torchrun --node_rank R ...` on every node.
Their output comes back through the actors (polled, not Ray's log forwarding, which deduplicates lines across
processes) and is printed as `[node R] line`. The first node to exit non-zero ends the job: its exit code,
its last lines, the other nodes stopped.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from cascade_cli.engines.openrlhf.launch import RAY_DRIVER, torchrun_argv

POLL_SECONDS = 0.5
TAIL_LINES = 200
RECAP_LINES = 20  # what the failure recap repeats: the job's last log lines then hold it whole
WAIT_REPORT_SECONDS = 60  # while the placement group waits for busy GPUs, say so this often


class NodeProcess:
    """One node's torchrun (a Ray actor pinned to one bundle): started once, its output drained by polls."""

    def __init__(self) -> None:
        self.process: subprocess.Popen | None = None
        self.lines: deque[str] = deque(maxlen=100_000)
        self.reader: threading.Thread | None = None
        self.lock = threading.Lock()

    def address(self) -> str:
        import ray

        return ray.util.get_node_ip_address()

    def free_port(self) -> int:
        with socket.socket() as sock:
            sock.bind(("", 0))
            return sock.getsockname()[1]

    def start(self, argv: list[str]) -> None:
        # The node's own torchrun (beside this Python when it is not on PATH, as in a venv the node runs).
        found = shutil.which(argv[0]) or str(Path(sys.executable).with_name(argv[0]))
        self.process = subprocess.Popen(
            [found, *argv[1:]],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            start_new_session=True,  # its own process group: stop() ends torchrun and its workers together
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            with self.lock:
                self.lines.append(line.rstrip("\n"))

    def poll(self) -> tuple[list[str], int | None]:
        """The lines printed since the last poll, and the exit code once the process ended and was read."""
        with self.lock:
            lines = list(self.lines)
            self.lines.clear()
        assert self.process is not None and self.reader is not None
        done = self.process.poll() is not None and not self.reader.is_alive()
        return lines, (self.process.returncode if done else None)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, signal.SIGTERM)
                self.process.wait(timeout=30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                os.killpg(self.process.pid, signal.SIGKILL)


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="python3 -m " + __spec__.name if __spec__ else "ray_launch")
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--gpus-per-node", type=int, required=True)
    parser.add_argument("--gpu-resource", default="GPU")
    parser.add_argument("--master-port", type=int, default=29500, help="0: a free port on the master node")
    parser.add_argument("--module", required=True, help="the trainer module, e.g. openrlhf.cli.train_sft")
    split = argv.index("--") if "--" in argv else len(argv)
    return parser.parse_args(argv[:split]), argv[split + 1 :]


def fitting_nodes(nodes: list[dict[str, Any]], resource: str, per_node: int) -> list[str]:
    """Addresses of the alive nodes with at least `per_node` of `resource` in all."""
    return [
        node["NodeManagerAddress"]
        for node in nodes
        if node.get("Alive") and node.get("Resources", {}).get(resource, 0) >= per_node
    ]


def too_small(nodes: list[dict[str, Any]], resource: str, count: int, per_node: int) -> str | None:
    """One line when the cluster cannot hold `count` nodes x `per_node` `resource`, else None."""
    fitting = fitting_nodes(nodes, resource, per_node)
    if len(fitting) >= count:
        return None
    alive = [node for node in nodes if node.get("Alive")]
    have = ", ".join(
        f"{node['NodeManagerAddress']}: {node.get('Resources', {}).get(resource, 0):g}" for node in alive
    )
    return (
        f"cluster.nodes: {count} nodes with {per_node} {resource} each asked; the Ray cluster has "
        f"{len(fitting)} such node(s) ({resource} per alive node: {have or 'no alive node'})"
    )


def node_resources(resource: str, per_node: int) -> dict[str, Any]:
    """The actor's demand inside its bundle (GPU through num_gpus, so Ray sets CUDA_VISIBLE_DEVICES)."""
    if resource == "GPU":
        return {"num_cpus": 0, "num_gpus": per_node}
    return {"num_cpus": 0, "resources": {resource: per_node}}


def wait_for(placement_group: Any, count: int, per_node: int, resource: str) -> None:
    import ray

    started = time.time()
    while True:
        ready, _ = ray.wait([placement_group.ready()], timeout=WAIT_REPORT_SECONDS)
        if ready:
            return
        print(
            f"waiting for {count} nodes with {per_node} free {resource} each "
            f"({int(time.time() - started)} s; other jobs hold them)",
            flush=True,
        )


def recap(lines: list[str]) -> list[str]:
    """A failed node's last lines without torchrun's own traceback (its launcher's frames, which hide the
    worker's error above them); the ChildFailedError summary that follows it stays."""
    end = next((k for k in range(len(lines) - 1, -1, -1) if "ChildFailedError" in lines[k]), None)
    if end is not None:
        start = next(
            (k for k in range(end, -1, -1) if lines[k].startswith("Traceback (most recent call last)")), end
        )
        lines = lines[:start] + lines[end + 1 :]
    return lines[-RECAP_LINES:]


def follow(actors: list[Any], addresses: list[str]) -> int:
    """Print every node's lines as `[node R]` until all exit 0 (-> 0) or one fails (-> its exit code)."""
    import ray

    tails = [deque(maxlen=TAIL_LINES) for _ in actors]
    finished: dict[int, int] = {}
    while True:
        polls = [actor.poll.remote() for actor in actors]
        for rank, poll in enumerate(polls):
            try:
                lines, code = ray.get(poll)
            except ray.exceptions.RayActorError as error:
                print(f"node {rank} ({addresses[rank]}) was lost: {str(error).splitlines()[0]}", flush=True)
                return 1
            for line in lines:
                tails[rank].append(line)
                print(f"[node {rank}] {line}", flush=True)
            if code is not None and rank not in finished:
                finished[rank] = code
                if code != 0:
                    print(f"node {rank} ({addresses[rank]}) failed; its last lines:", flush=True)
                    for line in recap(list(tails[rank])):
                        print(f"[node {rank}] {line}", flush=True)
                    print(
                        f"node {rank} ({addresses[rank]}) exited with code {code}; the other nodes are stopped",
                        flush=True,
                    )
                    return code
        if len(finished) == len(actors):
            return 0
        time.sleep(POLL_SECONDS)


def launch(options: argparse.Namespace, trainer_args: list[str]) -> int:
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    count, per_node, resource = options.nodes, options.gpus_per_node, options.gpu_resource
    ray.init(address=os.environ.get("RAY_ADDRESS") or "auto", log_to_driver=False, configure_logging=False)
    problem = too_small(ray.nodes(), resource, count, per_node)
    if problem:
        print(problem, flush=True)
        return 2
    group = placement_group([{resource: per_node} for _ in range(count)], strategy="STRICT_SPREAD")
    actors: list[Any] = []
    try:
        wait_for(group, count, per_node, resource)
        # By its module's name (not __main__), so every node imports the class from its own cascade install.
        node_process = importlib.import_module(RAY_DRIVER).NodeProcess
        remote = ray.remote(node_process)
        actors = [
            remote.options(
                max_concurrency=4,
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    placement_group=group, placement_group_bundle_index=rank
                ),
                **node_resources(resource, per_node),
            ).remote()
            for rank in range(count)
        ]
        addresses = ray.get([actor.address.remote() for actor in actors])
        port = options.master_port or ray.get(actors[0].free_port.remote())
        print(
            f"{count} nodes x {per_node} {resource}: {', '.join(addresses)}; master {addresses[0]}:{port}",
            flush=True,
        )
        ray.get(
            [
                actor.start.remote(
                    [
                        *torchrun_argv(count, per_node, rank, addresses[0], port, options.module),
                        *trainer_args,
                    ]
                )
                for rank, actor in enumerate(actors)
            ]
        )
        return follow(actors, addresses)
    finally:
        for actor in actors:
            with contextlib.suppress(Exception):  # a lost node has nothing left to stop
                ray.get(actor.stop.remote(), timeout=60)
        remove_placement_group(group)


def _stop_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # `ray job stop`: unwind, so launch() stops every node's torchrun


def main(argv: list[str] | None = None) -> int:
    options, trainer_args = parse(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    return launch(options, trainer_args)


if __name__ == "__main__":
    sys.exit(main())
