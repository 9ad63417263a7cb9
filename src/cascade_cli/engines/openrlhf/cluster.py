"""The cluster block -> the `ray job submit` prefix (each role's (num_nodes, num_gpus_per_node):
`config.common.role_layout`)."""

from __future__ import annotations

import json

from cascade_cli.config.common import ClusterConfig

DEFAULT_RUNTIME_ENV = {"env_vars": {"TOKENIZERS_PARALLELISM": "true", "NCCL_DEBUG": "WARN"}}


def runtime_env(cluster: ClusterConfig) -> str:
    """`cluster.runtime_env_json` (a JSON object, checked by ClusterConfig) as compact JSON (unset:
    DEFAULT_RUNTIME_ENV)."""
    value = json.loads(cluster.runtime_env_json) if cluster.runtime_env_json else DEFAULT_RUNTIME_ENV
    return json.dumps(value, separators=(",", ":"))


def submit_prefix(cluster: ClusterConfig, placement: list[str] | None = None) -> list[str]:
    """`placement`: where Ray runs the entrypoint (launch.entrypoint_placement); none: anywhere (the head)."""
    return [
        "ray", "job", "submit", "--address", str(cluster.ray_address), "--runtime-env-json", runtime_env(cluster),
        *(placement or []), "--",
    ]
