"""GRPO stage configs: `GRPOConfig` (shared by every GRPO stage) and `RLVRConfig` (`cascade rlvr --domain`).

Defaults follow the paper (Nemotron-Cascade §1.1, §1.4-1.7): strictly on-policy GRPO, token-level loss,
no KL, no entropy bonus, AdamW (0.9, 0.95), 8 rollouts per prompt, top-p 0.95. Sizes (steps, batch,
response length, LR) are small so the embedded tiny model trains on a CPU; recipes scale them up.
RLHF subclasses `GRPOConfig` (reward = a reward model's score, `mode: half`).
"""

# ruff: noqa: UP045  (OmegaConf 2.3 reads `Optional[X]`, not `X | None`)
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Optional

from omegaconf import MISSING

from cascade_cli.config.checks import ANY_NUMBER, TEXT, Bound, Range, above, at_least, fraction, one_of
from cascade_cli.config.common import TrainerConfig, role_gpus
from cascade_cli.errors import CascadeUsageError
from cascade_cli.template_choice import TEMPLATE_CHOICES, check_openrlhf_template

# The paper's mode per RLVR domain: IF-RL in non-thinking mode, math / code / swe in thinking mode.
DOMAIN_MODES = {"if": "no_think", "math": "think", "code": "think", "swe": "think"}
PROMPT_MODES = ("think", "no_think", "half", "row")
ROLLOUT_DTYPES = ("auto", "float32", "bfloat16")
LOSS_AGGREGATIONS = ("token", "sequence")
DTYPES = ("auto", "float32", "bfloat16", "float16")
ROLLOUT_BACKENDS = ("auto", "hf", "vllm")
TEMPERATURES = above(0)  # GRPO needs samples that differ within a group


@dataclass
class PhaseConfig:
    """One part of a response-length schedule; unset keys fall back to the stage's top-level values."""

    # Optimizer steps of this phase.
    steps: int = MISSING
    # Response token limit in this phase (unset: the stage's max_response_len).
    max_response_len: Optional[int] = None
    # Sampling temperature in this phase (unset: the stage's temperature).
    temperature: Optional[float] = None
    # Overlong filtering in this phase (unset: the stage's overlong_filter).
    overlong_filter: Optional[bool] = None

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "steps": at_least(1), "max_response_len": at_least(1), "temperature": TEMPERATURES,
    }


@dataclass
class RolloutConfig:
    # auto | hf | vllm. auto: hf for small models; vllm on a GPU, and on a CPU when the stage's rollout tokens
    # pay back vLLM's engine start.
    backend: str = "auto"
    # vLLM engine dtype: auto (bf16 where the device computes bf16 natively, else float32) | float32 | bfloat16
    dtype: str = "auto"
    max_batch_size: int = 512  # sequences per hf generation batch
    # Verify finished chunks of groups in a background thread while the next chunk generates.
    chunk_prompts: int = 0  # prompts per generation chunk; 0 = the whole step at once (no overlap)

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "backend": one_of(*ROLLOUT_BACKENDS), "dtype": one_of(*ROLLOUT_DTYPES), "max_batch_size": at_least(1),
        "chunk_prompts": at_least(0),
    }


@dataclass
class GRPOConfig(TrainerConfig):
    # Canonical RL rows (prompt + label): a .jsonl/.parquet file or a prepare-data directory.
    data: str = MISSING
    eval_data: Optional[str] = None  # held-out rows: greedy accuracy before and after the stage
    eval_max_new_tokens: Optional[int] = None  # default: the last phase's max_response_len
    # Held-out rows scored before and after (unset: all of eval_data).
    eval_limit: Optional[int] = None
    # Prompt mode: think | no_think | half (half of each batch each way, RLHF) | row (each row's "mode").
    # Unset: the domain's paper default (if -> no_think; math, code, swe -> think).
    mode: Optional[str] = None
    # Prompt template: auto (a checkpoint cascade trained: cascade's ChatML + mode flags; any other model: its
    # own, no flag) | model (its own) | cascade. Engine openrlhf renders with cascade's (auto or cascade).
    chat_template: str = "auto"
    # Schedule: `steps` optimizer steps, or the sum of `phases[].steps` when phases are given.
    steps: int = 40
    # Response-length schedule: a list of {steps, max_response_len, temperature, overlong_filter}.
    phases: list[PhaseConfig] = field(default_factory=list)
    # Prompts sampled per optimizer step (each gets group_size responses).
    prompts_per_step: int = 16
    # Responses per prompt (the GRPO group the advantage is normalised in).
    group_size: int = 8
    # Prompt token limit (longer prompts keep their last tokens).
    max_prompt_len: int = 1024
    # Response token limit (new tokens per rollout).
    max_response_len: int = 64
    # Rollout sampling temperature.
    temperature: float = 1.0
    # Rollout nucleus sampling (1.0: off).
    top_p: float = 0.95
    # Rollout top-k sampling (-1: off).
    top_k: int = -1
    # Truncated responses: masked out of the loss (True), else kept with reward `truncated_reward`
    # (the paper: 0; unset = the verifier's score as is, as RLHF does with its reward model).
    overlong_filter: bool = False
    # Reward of a truncated response when overlong_filter is off (null: its score as is).
    truncated_reward: Optional[float] = 0.0
    # Batch-level (DAPO) dynamic filtering: drop all-correct / all-wrong groups, refill from the data.
    dynamic_filter: bool = False
    dynamic_filter_max_rounds: int = 4  # generation rounds per step before training on what was kept
    # A round draws the missing prompts / the recent fraction of groups kept, at most this many times the
    # missing count (1: only the missing ones); kept groups beyond prompts_per_step are not trained on.
    dynamic_filter_oversample: float = 4.0
    # Epoch-level filtering: after each epoch drop 0% / 100% prompts; re-add them with these probabilities.
    epoch_filter: bool = False
    # Chance to re-add a dropped 0%-solved prompt in the next epoch.
    epoch_filter_hard_p: float = 0.1
    # Chance to re-add a dropped 100%-solved prompt in the next epoch.
    epoch_filter_easy_p: float = 0.01
    # Added to a group's reward std before dividing (all-equal groups get advantage 0).
    adv_eps: float = 1e-6
    kl_coef: float = 0.0  # > 0: k3 KL to the frozen initial policy
    # token: sum over the step's tokens / their count (paper default); sequence: each response's token
    # mean, then the mean over responses (RLHF stabiliser).
    loss_aggregation: str = "token"
    entropy_coef: float = 0.0  # > 0: entropy bonus
    train_micro_batch: int = 32  # sequences per forward/backward (gradient accumulation, one step)
    logprob_chunk_tokens: int = 1024  # positions per LM-head chunk of the log-probs (memory ~ chunk x vocab)
    # auto: bf16 weights on a GPU; on a CPU fp32 weights, with bf16 autocast for 50M+ parameter models where
    # the CPU has native bf16 | float32 | bfloat16 | float16 (weights, no autocast). A reward model (RLHF,
    # if_rm_bonus) scores under bf16 autocast where it pays with auto, in fp32 with any other value.
    dtype: str = "auto"
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    # Rewards: the verifier registry (the same path as `cascade verify`).
    # Verifier worker processes.
    verify_workers: int = 1
    # Options of the stage's verifier (`cascade verify -O DOMAIN.KEY=VALUE`), e.g. {all_tests: true} for code,
    # {reward: fraction} for if.
    verifier_options: dict[str, Any] = field(default_factory=dict)
    # Bookkeeping.
    save_every: int = 0  # write trainer_state/ every N steps (0: only at the end)
    resume: bool = True  # continue from OUT/trainer_state when present
    # Rollouts per step (sampled, seeded) written with prompt, answer, reward and verdict to
    # OUT/rollouts.jsonl and to the report_to trackers as a table; 0: none.
    log_rollouts: int = 4

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "data": TEXT, "eval_data": TEXT, "eval_max_new_tokens": at_least(1), "eval_limit": at_least(1),
        "mode": one_of(*PROMPT_MODES), "chat_template": one_of(*TEMPLATE_CHOICES), "steps": at_least(1), "prompts_per_step": at_least(1),
        "group_size": at_least(2, "at least 2 responses per prompt (the group the advantage compares)"),
        "max_prompt_len": at_least(1), "max_response_len": at_least(1), "temperature": TEMPERATURES,
        "top_p": Range(0, 1, low_open=True), "top_k": at_least(-1),
        "truncated_reward": ANY_NUMBER, "dynamic_filter_max_rounds": at_least(1),
        "dynamic_filter_oversample": at_least(1), "epoch_filter_hard_p": fraction(), "epoch_filter_easy_p": fraction(),
        "adv_eps": above(0), "kl_coef": at_least(0), "loss_aggregation": one_of(*LOSS_AGGREGATIONS),
        "entropy_coef": at_least(0), "train_micro_batch": at_least(1), "logprob_chunk_tokens": at_least(1),
        "dtype": one_of(*DTYPES), "verify_workers": at_least(1), "save_every": at_least(0),
        "log_rollouts": at_least(0),
    }

    def check(self) -> None:
        if self.engine == "openrlhf":
            check_openrlhf_template(self.chat_template)
            check_openrlhf_layout(self)


def check_openrlhf_layout(config: GRPOConfig) -> None:
    """An RL stage's roles fit the cluster, and OpenRLHF's colocation assertions hold (they would fail after
    minutes of start-up on the cluster)."""
    cluster = config.cluster
    total = int(cluster.nodes) * int(cluster.gpus_per_node)
    actor = role_gpus(cluster, cluster.actor_gpus)
    vllm = int(cluster.vllm_engines) * int(cluster.vllm_tensor_parallel_size)
    if actor > total:
        raise CascadeUsageError(f"cluster.actor_gpus: {actor} GPUs asked, the cluster has {total}")
    uses_rm = config.kind == "rlhf" and not cluster.reward_urls
    if uses_rm and config.dynamic_filter:
        raise CascadeUsageError(
            "cluster.reward_urls: dynamic_filter needs the reward service (OpenRLHF filters on remote rewards "
            "only); set cluster.reward_urls or dynamic_filter=false"
        )
    samples = config.prompts_per_step * config.group_size
    if samples < actor:
        raise CascadeUsageError(
            f"prompts_per_step: prompts_per_step x group_size = {samples} samples per step is fewer than the "
            f"{actor} actor GPUs (OpenRLHF asserts at least one sample per GPU)"
        )
    if cluster.colocate_all:
        if vllm != actor:
            raise CascadeUsageError(
                "cluster.colocate_all: colocate_all needs vllm_engines x vllm_tensor_parallel_size == actor GPUs "
                f"(OpenRLHF asserts it); found {cluster.vllm_engines} x {cluster.vllm_tensor_parallel_size} = "
                f"{vllm} for {actor} actor GPUs"
            )
        return
    needed = {"actor": actor, "vllm": vllm}
    if config.kl_coef > 0:
        needed["ref"] = role_gpus(cluster, cluster.ref_gpus)
    if uses_rm:
        needed["reward"] = role_gpus(cluster, cluster.reward_gpus)
    if sum(needed.values()) > total:
        parts = " + ".join(f"{role} {gpus}" for role, gpus in needed.items())
        raise CascadeUsageError(
            f"cluster: the roles need {parts} = {sum(needed.values())} GPUs without colocate_all; the cluster has "
            f"{cluster.nodes} x {cluster.gpus_per_node} = {total} (set actor_gpus / vllm_engines, or colocate_all=true)"
        )


def missing_reward(wanted: str) -> CascadeUsageError:
    return CascadeUsageError(
        f"{wanted}: missing reward source; start the reward service "
        "(`cascade verify --serve`) and set cluster.reward_urls=[http://HOST:PORT/get_reward], or point it at "
        "the reward_func file (`cascade verify --print-reward-func-path`)"
    )


@dataclass
class RLVRConfig(GRPOConfig):
    """`cascade rlvr --domain {if,math,code,swe}`: GRPO on a rule-based verifier's reward."""

    kind: str = "rlvr"
    # if | math | code | swe: picks the verifier that scores each response.
    domain: str = MISSING
    # IF-RL of the thinking models: a passing response also gets sigmoid(group z-score of the reward model's
    # score); local engine: the model at reward_model scores the answers; openrlhf: the reward service does
    # (`cascade verify --serve --reward-model CKPT`).
    if_rm_bonus: bool = False
    # Reward-model checkpoint (RLHF's, `${stages.rm.out}` in a recipe) for if_rm_bonus on the local engine.
    reward_model: Optional[str] = None
    rm_batch_size: int = 32  # sequences per reward-model forward (if_rm_bonus, local engine)
    rm_max_len: int = 4096  # longer (prompt + answer) texts keep their last rm_max_len tokens (if_rm_bonus)
    # Your own reward instead of the domain's verifier: FILE.py:FUNCTION with OpenRLHF's reward_func
    # signature, batched (FUNCTION(queries, prompts, labels) -> n rewards); the domain still picks the mode.
    reward_func: Optional[str] = None
    # none: call reward_func in the trainer's process | process: in a worker process with a timeout (a hang or
    # crash scores the batch 0 and the run goes on) | sandbox: in the code verifier's bubblewrap sandbox (no
    # network, no host files but the runtime, site-packages and the reward file; a timeout and a memory limit),
    # e.g. `cascade rlvr ... --reward-func my_reward.py:score reward_func_isolation=sandbox`.
    reward_func_isolation: str = "none"
    # Seconds a reward_func call may take under isolation process or sandbox.
    reward_func_timeout_s: float = 60.0
    # isolation=sandbox: the sandboxed process's memory (address space, MiB), as the code verifier's memory_mb.
    reward_func_memory_mb: int = 4096

    BOUNDS: ClassVar[dict[str, Bound]] = {
        "domain": one_of(*DOMAIN_MODES), "reward_model": TEXT, "rm_batch_size": at_least(1),
        "rm_max_len": at_least(1), "reward_func": TEXT, "reward_func_isolation": one_of("none", "process", "sandbox"),
        "reward_func_timeout_s": above(0), "reward_func_memory_mb": at_least(64),
    }  # fmt: skip

    def check(self) -> None:
        super().check()
        if self.if_rm_bonus and self.domain != "if":
            raise CascadeUsageError(f"if_rm_bonus: only for domain if; found domain {self.domain!r}")
        if self.reward_model and not (self.if_rm_bonus and self.engine == "local"):
            raise CascadeUsageError(
                "reward_model: read only by if_rm_bonus on the local engine (engine openrlhf: the reward service "
                "loads it, `cascade verify --serve --reward-model CKPT`)"
            )
        if self.if_rm_bonus and self.engine == "local" and not self.reward_model:
            raise CascadeUsageError(
                "if_rm_bonus: the local engine needs reward_model=CKPT (RLHF's reward model, `${stages.rm.out}` "
                "in a recipe)"
            )
        if self.reward_func:
            path, _ = parse_reward_func(self.reward_func)
            if self.engine == "local" and not path.is_file():
                raise CascadeUsageError(f"reward_func: {path}: file not found")
            if self.if_rm_bonus:
                raise CascadeUsageError("if_rm_bonus: the RM bonus adds to the IF verifier's reward, not to reward_func")
        if self.engine == "openrlhf" and not self.cluster.reward_urls:
            if self.reward_func:
                raise CascadeUsageError(
                    "cluster.reward_urls: on engine openrlhf the reward service serves reward_func: start "
                    f"`cascade verify --serve --reward-func {self.reward_func}"
                    + ("" if self.reward_func_isolation == "none" else f" --reward-func-isolation {self.reward_func_isolation}")
                    + "` and set "
                    "cluster.reward_urls=[http://HOST:PORT/get_reward]"
                )
            raise missing_reward("cluster.reward_urls")


def parse_reward_func(spec: str) -> tuple[Path, str]:
    """"FILE.py:NAME" -> (file, NAME); "FILE.py" -> (file, reward_func), OpenRLHF's name for it."""
    path, sep, name = str(spec).rpartition(":")
    if not (sep and path and name.isidentifier()):
        path, name = str(spec), "reward_func"
    if not path.endswith(".py"):
        raise CascadeUsageError(f"reward_func: expected FILE.py or FILE.py:FUNCTION, found {spec!r}")
    return Path(path), name


def resolve_phases(config: GRPOConfig) -> list[PhaseConfig]:
    """The response-length schedule with every key set: each of `phases` with its unset keys taken from the
    stage's top-level values, or (no `phases`) one phase of `steps`. Every engine reads the schedule here."""
    if not config.phases:
        return [PhaseConfig(config.steps, config.max_response_len, config.temperature, config.overlong_filter)]
    return [
        PhaseConfig(
            phase.steps,
            config.max_response_len if phase.max_response_len is None else phase.max_response_len,
            config.temperature if phase.temperature is None else phase.temperature,
            config.overlong_filter if phase.overlong_filter is None else phase.overlong_filter,
        )
        for phase in config.phases
    ]
