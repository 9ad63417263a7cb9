"""Fields every stage has."""

from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import MISSING


@dataclass
class ClusterConfig:
    """Where an `openrlhf` stage runs. Ignored by the local engine."""

    ray_address: str = "http://127.0.0.1:8265"
    nodes: int = 1
    gpus_per_node: int = 8
    actor_gpus: int | None = None
    ref_gpus: int | None = None
    critic_gpus: int | None = None
    reward_gpus: int | None = None
    vllm_engines: int = 8  # colocate_all: vllm_engines x vllm_tensor_parallel_size must equal the actor GPUs
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
    init: str | None = None
    out: str | None = None
    seed: int = 0
    dry_run: bool = False
    restart: bool = False  # start over even when OUT holds a run with another config
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
