"""Fields every stage has."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

from omegaconf import MISSING

from cascade_cli.config.checks import TEXT, Bound, Range, above, at_least, fraction, one_of
from cascade_cli.errors import CascadeUsageError
from cascade_cli.trackers import DEFAULT_REPORT_TO, TRACKERS

GRADIENT_CHECKPOINTING = ("true", "false", "auto")
ENGINES = ("local", "openrlhf")
LORA_SAVES = ("merged", "adapter", "both")
# How multi-node SFT / reward-model jobs start (engines/openrlhf/launch.py): a Ray driver starting one torchrun
# per node, an sbatch script (`recipe plan --launcher slurm`), or DeepSpeed's launcher over a hostfile + ssh.
LAUNCHERS = ("ray", "slurm", "hostfile")
SEEDS = at_least(0)  # numpy seeds must be non-negative


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
    # Multi-node SFT / reward model: ray (a submitted driver starts one torchrun per node), slurm (`recipe plan
    # --launcher slurm` writes sbatch scripts) or hostfile (DeepSpeed's launcher, ssh between nodes).
    launcher: str = "ray"
    # The Ray resource a node's GPUs are counted in: GPU (OpenRLHF's RL trainer always asks for GPU; a custom
    # name lets a CPU test cluster stand in for GPUs).
    gpu_resource: str = "GPU"
    # torchrun's rendezvous port on the first node; 0: a free port there, picked at start.
    master_port: int = 29500
    # launcher hostfile: DeepSpeed's hostfile (`HOST slots=GPUS` per line), readable on the submitting node.
    hostfile: str = ""
    # launcher slurm: sbatch --partition (empty: the cluster's default).
    slurm_partition: str = ""
    # launcher slurm: sbatch --account (empty: the user's default).
    slurm_account: str = ""
    # launcher slurm: sbatch --time, the job's wall-clock limit (D-HH:MM:SS or HH:MM:SS).
    slurm_time: str = "48:00:00"
    # launcher slurm: a container image every srun task runs in (pyxis/enroot --container-image); empty: none.
    slurm_container: str = ""

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "ray_address": TEXT, "runtime_env_json": TEXT,
        "nodes": at_least(1), "gpus_per_node": at_least(1), "vllm_engines": at_least(1),
        "vllm_tensor_parallel_size": at_least(1),
        "actor_gpus": at_least(1), "ref_gpus": at_least(1), "critic_gpus": at_least(1), "reward_gpus": at_least(1),
        "launcher": one_of(*LAUNCHERS), "gpu_resource": TEXT, "master_port": Range(0, 65535), "hostfile": TEXT,
        "slurm_partition": TEXT, "slurm_account": TEXT, "slurm_time": TEXT, "slurm_container": TEXT,
    }

    def check(self) -> None:
        if self.runtime_env_json:
            try:
                value = json.loads(self.runtime_env_json)
            except json.JSONDecodeError as error:
                raise CascadeUsageError(
                    f"runtime_env_json: expected a JSON object, found {self.runtime_env_json!r} ({error.msg})"
                ) from None
            if not isinstance(value, dict):
                raise CascadeUsageError(f"runtime_env_json: expected a JSON object, found {type(value).__name__}")
        for url in map(str, self.reward_urls):
            if not url.startswith(("http://", "https://")) and not url.endswith(".py"):
                raise CascadeUsageError(
                    f"reward_urls: {url!r}: expected an http(s) URL of `cascade verify --serve` "
                    "(http://HOST:PORT/get_reward) or the reward_func .py file (`cascade verify --print-reward-func-path`)"
                )
        for key in ("actor_gpus", "ref_gpus", "critic_gpus", "reward_gpus"):
            role_layout(self, getattr(self, key), key)
        if self.launcher == "hostfile" and int(self.nodes) > 1 and not self.hostfile:
            raise CascadeUsageError(
                "hostfile: launcher hostfile with nodes > 1 needs DeepSpeed's hostfile (`HOST slots=GPUS` per line)"
            )
        if not str(self.gpu_resource).strip():
            raise CascadeUsageError("gpu_resource: expected a Ray resource name (GPU, or a custom one), found ''")


def role_layout(cluster: ClusterConfig, gpus: int | None, key: str = "") -> tuple[int, int]:
    """(num_nodes, num_gpus_per_node) for a role with `gpus` GPUs in all (None: the whole cluster). A plain
    function, as the OpenRLHF job builders also read a structured DictConfig of the cluster."""
    per_node = int(cluster.gpus_per_node)
    if gpus is None:
        return int(cluster.nodes), per_node
    if gpus <= per_node:
        return 1, gpus
    if gpus % per_node:
        raise CascadeUsageError(
            f"{key or 'a role'}: {gpus} GPUs must fill whole nodes of gpus_per_node={per_node} "
            f"(use a multiple of {per_node} or at most {per_node})"
        )
    return gpus // per_node, per_node


def role_gpus(cluster: ClusterConfig, gpus: int | None) -> int:
    nodes, per_node = role_layout(cluster, gpus)
    return nodes * per_node


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

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "name": TEXT, "engine": one_of(*ENGINES), "init": TEXT, "out": TEXT, "seed": SEEDS,
    }

    def check(self) -> None:
        """Checks across keys (config/checks.py runs them after every key's bound)."""


@dataclass
class LoRAConfig:
    """LoRA adapters (peft) on the trained model; merged into plain HF weights in the checkpoint unless `save`
    asks for the adapter too (or alone)."""

    # Adapter rank; 0: off (every weight trains). `lora.r=8` turns LoRA on (it usually wants ~10x the lr).
    r: int = 0
    # Scale of the adapter update (the update is multiplied by alpha / r).
    alpha: float = 16.0
    # Dropout on the adapters' input.
    dropout: float = 0.0
    # Layers that get adapters: all-linear (every linear layer but the LM head) or names, e.g. q_proj,v_proj.
    target_modules: str = "all-linear"
    # What the stage's OUT holds (local engine): merged (a plain HF model, adapters folded in) | adapter
    # (PEFT's adapter_config.json + adapter_model.safetensors alone: load with PeftModel.from_pretrained onto
    # the base; no later stage can start from it) | both (the merged model, and the adapter in OUT/adapter).
    save: str = "merged"

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "r": at_least(0, "0 (off) or a positive rank"), "alpha": above(0), "dropout": fraction(high_open=True),
        "target_modules": TEXT, "save": one_of(*LORA_SAVES),
    }

    def check(self) -> None:
        if self.r and not self.target_modules.strip(", "):
            raise CascadeUsageError("target_modules: expected all-linear or module names, found nothing")
        if self.save != "merged" and not self.r:
            raise CascadeUsageError(f"save: {self.save} needs adapters (lora.r > 0); found lora.r=0")


@dataclass
class OpenRLHFOptions:
    """engine openrlhf: what cascade does not set itself. Ignored by the local engine (with a warning)."""

    # OpenRLHF flags passed to the stage's jobs as written, after cascade's own (a flag given twice: the later
    # wins), each checked against OpenRLHF 0.11.2's flag table of the job's CLI (train_sft, train_rm,
    # train_ppo_ray), e.g. [--vllm.gpu_memory_utilization, "0.7", --ds.zero_stage, "3"].
    extra_args: list[str] = field(default_factory=list)


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
    openrlhf: OpenRLHFOptions = field(default_factory=OpenRLHFOptions)
    # Recompute each layer's activations in backward (~1/3 more compute, far less memory): true | false |
    # auto (on when one micro-batch's activations would need over a quarter of the RAM / GPU memory).
    gradient_checkpointing: str = "auto"
    # Keep trainer_state/ (model, optimizer, RNGs: three times the model's size under AdamW) once the stage
    # completes, for `cascade push --include-trainer-state`. Off: a completed stage is its checkpoint, and a
    # rerun of it, same config, trains nothing; its state only ever served a resume.
    keep_trainer_state: bool = False
    # Experiment trackers for metrics, config and sampled rollouts: tensorboard (OUT/tensorboard), wandb
    # (OUT/wandb, offline unless WANDB_MODE / WANDB_API_KEY), mlflow ($MLFLOW_TRACKING_URI, else OUT/mlruns);
    # [] for metrics.jsonl alone.
    report_to: list[str] = field(default_factory=lambda: list(DEFAULT_REPORT_TO))
    # A raw `data` (a file, a folder of Hub shards or a hub id) is prepared on the fly into OUT/data by
    # prepare-data; this is its column mapping (prepare-data's --map), canonical name -> source column, e.g.
    # `--data-map prompt=question,answer=solution`.
    data_map: dict[str, str] = field(default_factory=dict)
    # More prepare-data keys for that preparation, e.g. `data_prepare.split=test data_prepare.limit=500`
    # (split, subset, limit, offset, format, holdout, ...; `cascade prepare-data --help` lists them).
    data_prepare: dict[str, Any] = field(default_factory=dict)

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "report_to": one_of(*TRACKERS),
        "lr": above(0), "weight_decay": at_least(0), "beta1": fraction(high_open=True),
        "beta2": fraction(high_open=True), "max_grad_norm": at_least(0),
        "gradient_checkpointing": one_of(*GRADIENT_CHECKPOINTING),
    }

    def __post_init__(self) -> None:
        # YAML's `true` arrives as the string "True" in this str key.
        self.gradient_checkpointing = str(self.gradient_checkpointing).lower()

    def check(self) -> None:
        super().check()
        if self.dry_run and self.engine != "openrlhf":
            raise CascadeUsageError(
                "dry_run: only engine openrlhf has a dry run (`cascade recipe plan` prints a local stage's command)"
            )
