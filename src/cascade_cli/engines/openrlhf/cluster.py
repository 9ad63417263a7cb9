"""The cluster block -> where each OpenRLHF role runs: the `ray job submit` prefix and each role's
(num_nodes, num_gpus_per_node)."""

from __future__ import annotations

import json

from cascade_cli.config.common import ClusterConfig
from cascade_cli.errors import CascadeUsageError

DEFAULT_RUNTIME_ENV = {"env_vars": {"TOKENIZERS_PARALLELISM": "true", "NCCL_DEBUG": "WARN"}}


def runtime_env(cluster: ClusterConfig) -> str:
    """`cluster.runtime_env_json` as compact JSON (unset: DEFAULT_RUNTIME_ENV)."""
    text = cluster.runtime_env_json
    if not text:
        return json.dumps(DEFAULT_RUNTIME_ENV, separators=(",", ":"))
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise CascadeUsageError(f"cluster.runtime_env_json: expected a JSON object, found {text!r} ({error.msg})") from None
    if not isinstance(value, dict):
        raise CascadeUsageError(f"cluster.runtime_env_json: expected a JSON object, found {type(value).__name__}")
    return json.dumps(value, separators=(",", ":"))


def submit_prefix(cluster: ClusterConfig) -> list[str]:
    return ["ray", "job", "submit", "--address", str(cluster.ray_address), "--runtime-env-json", runtime_env(cluster), "--"]


def role_layout(cluster: ClusterConfig, gpus: int | None) -> tuple[int, int]:
    """(num_nodes, num_gpus_per_node) for a role with `gpus` GPUs in all (None: the whole cluster)."""
    per_node = int(cluster.gpus_per_node)
    if gpus is None:
        return int(cluster.nodes), per_node
    if gpus <= per_node:
        return 1, gpus
    if gpus % per_node:
        raise CascadeUsageError(
            f"cluster: a role with {gpus} GPUs must fill whole nodes of gpus_per_node={per_node} "
            f"(use a multiple of {per_node} or at most {per_node})"
        )
    return gpus // per_node, per_node


def role_gpus(cluster: ClusterConfig, gpus: int | None) -> int:
    nodes, per_node = role_layout(cluster, gpus)
    return nodes * per_node
