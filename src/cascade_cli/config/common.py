"""Fields every stage has."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from omegaconf import MISSING


@dataclass
class ClusterConfig:
    """Where an `openrlhf` stage runs. Ignored by the local engine."""

    ray_address: str = "http://127.0.0.1:8265"
    nodes: int = 1
    gpus_per_node: int = 8
    actor_gpus: Optional[int] = None
    ref_gpus: Optional[int] = None
    critic_gpus: Optional[int] = None
    reward_gpus: Optional[int] = None
    vllm_engines: int = 1
    vllm_tensor_parallel_size: int = 1
    colocate_all: bool = True
    runtime_env_json: str = ""
    reward_urls: list[str] = field(default_factory=list)


@dataclass
class StageConfig:
    """Common stage keys. `init` defaults to the previous stage's `out`; `out` to RUN_DIR/STAGE_NAME."""

    kind: str = MISSING
    name: str = ""
    engine: str = "local"
    init: Optional[str] = None
    out: Optional[str] = None
    seed: int = 0
    dry_run: bool = False
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
