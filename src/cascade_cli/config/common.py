"""Fields every stage has."""

from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import MISSING

from cascade_cli.errors import CascadeUsageError

GRADIENT_CHECKPOINTING = ("true", "false", "auto")


@dataclass
class ClusterConfig:
    """Where an `openrlhf` stage runs. Ignored by the local engine."""

    # Ray dashboard address that `ray job submit` talks to.
    ray_address: str = "http://127.0.0.1:8265"
    # Nodes in the Ray cluster.
    nodes: int = 1
    # GPUs on each node.
    gpus_per_node: int = 8
    # GPUs for the actor (policy) training; null: every GPU of the cluster.
    actor_gpus: int | None = None
    # GPUs for the reference model; null: OpenRLHF's layout (shared with the actor when colocated).
    ref_gpus: int | None = None
    # GPUs for a critic (GRPO has none); null: OpenRLHF's layout.
    critic_gpus: int | None = None
    # GPUs for a reward model served by OpenRLHF; null: OpenRLHF's layout.
    reward_gpus: int | None = None
    vllm_engines: int = 8  # colocate_all: vllm_engines x vllm_tensor_parallel_size must equal the actor GPUs
    # GPUs per vLLM engine (tensor parallel).
    vllm_tensor_parallel_size: int = 1
    # Actor, reference and vLLM engines share the GPUs, sleeping in turn (--train.colocate_all).
    colocate_all: bool = True
    # Ray runtime env of the job as a JSON object (pip, env_vars, working_dir); empty: none.
    runtime_env_json: str = ""
    # Reward service URLs (`cascade verify --serve`, http://HOST:PORT/get_reward) the job scores with.
    reward_urls: list[str] = field(default_factory=list)


@dataclass
class StageConfig:
    """Common stage keys. `init` defaults to the previous stage's `out`; `out` to RUN_DIR/STAGE_NAME."""

    kind: str = MISSING
    # Stage name (a recipe sets the stage's key); shown in logs, manifests and job ids.
    name: str = ""
    # local (this process) or openrlhf (OpenRLHF jobs on a Ray cluster; see cluster.*).
    engine: str = "local"
    # Start model: tiny, tiny:SEED, smollm2-135m, gguf:FILE.gguf, a checkpoint directory or a hub id
    # (recipe: the previous stage's out).
    init: str | None = None
    # Output directory (recipe: RUN_DIR/STAGE_NAME).
    out: str | None = None
    # Random seed (data order, sampling, the tiny model's init).
    seed: int = 0
    # Print the commands the stage would run (engine openrlhf) and stop.
    dry_run: bool = False
    restart: bool = False  # start over even when OUT holds a run with another config
    cluster: ClusterConfig = field(default_factory=ClusterConfig)


@dataclass
class LoRAConfig:
    """LoRA adapters (peft) on the trained model; merged into plain HF weights in every checkpoint."""

    # Adapter rank; 0: off (every weight trains). `lora.r=8` turns LoRA on (it usually wants ~10x the lr).
    r: int = 0
    # Scale of the adapter update (the update is multiplied by alpha / r).
    alpha: float = 16.0
    # Dropout on the adapters' input.
    dropout: float = 0.0
    # Layers that get adapters: all-linear (every linear layer but the LM head) or names, e.g. q_proj,v_proj.
    target_modules: str = "all-linear"

    def __post_init__(self) -> None:
        if self.r < 0:
            raise CascadeUsageError(f"lora.r: expected 0 (off) or a positive rank, found {self.r}")
        if self.r and self.alpha <= 0:
            raise CascadeUsageError(f"lora.alpha: expected a positive number, found {self.alpha}")
        if not 0 <= self.dropout < 1:
            raise CascadeUsageError(f"lora.dropout: expected a value in [0, 1), found {self.dropout}")
        if self.r and not self.target_modules.strip(", "):
            raise CascadeUsageError("lora.target_modules: expected all-linear or module names, found nothing")


@dataclass
class TrainerConfig(StageConfig):
    """Keys every training stage shares: AdamW (the paper's betas 0.9, 0.95) and gradient clipping."""

    # Learning rate (SFT and the reward model: the peak of the warmup + cosine schedule; GRPO: constant).
    lr: float = 1e-5
    weight_decay: float = 0.0  # AdamW weight decay
    # AdamW beta1.
    beta1: float = 0.9
    # AdamW beta2.
    beta2: float = 0.95
    # Gradient clipping norm (0: off).
    max_grad_norm: float = 1.0
    lora: LoRAConfig = field(default_factory=LoRAConfig)
    # Recompute each layer's activations in backward (~1/3 more compute, far less memory): true | false |
    # auto (on when one micro-batch's activations would need over a quarter of the RAM / GPU memory).
    gradient_checkpointing: str = "auto"

    def __post_init__(self) -> None:
        setting = str(self.gradient_checkpointing).lower()
        if setting not in GRADIENT_CHECKPOINTING:
            raise CascadeUsageError(
                f"gradient_checkpointing: expected true, false or auto, found {self.gradient_checkpointing!r}"
            )
        self.gradient_checkpointing = setting
