"""Typed stage config -> the exact OpenRLHF 0.11.2 jobs (flags from its argparse; see flagset.py).

One builder per stage kind, each reading its config class's fields directly (the dataclass default is the
only default; the stage table, `cascade_cli.stage_kinds`, names each kind's builder; `stage_jobs` runs it):

- sft_jobs(SFTConfig), reward_model_jobs(RewardModelConfig): `ray job submit ... -- LAUNCHER
  openrlhf.cli.train_sft|train_rm <dotted flags>`, LAUNCHER by cluster.launcher (launch.py): on one node
  `deepspeed --num_nodes 1 --num_gpus G --module`, on several the Ray driver starting one torchrun per node;
- rlvr_jobs(RLVRConfig), rlhf_jobs(RLHFConfig): `ray job submit ... -- python3 -m openrlhf.cli.train_ppo_ray
  <dotted flags>`, one job per phase of the response-length schedule (config.grpo.resolve_phases), each
  phase starting from the previous phase's output.

Where a paper setting has no OpenRLHF flag, the job runs cascade's agent file (`--train.agent_func_path`,
engines/openrlhf/agent.py; the runner writes it per job from `OpenRLHFJob.agent`): rollout top-k, the
overlong-filter loss mask, group-level rewards from the reward service (RLHF's RM reward, IF-RL's RM bonus)
and the per-prompt outcomes that epoch-level filtering (epoch_jobs.py, one job per epoch) reads. Otherwise
the job talks to the service directly (`--reward.remote_url`, OpenRLHF's own executor).

The paper's GRPO (Nemotron-Cascade §4.1.2) maps to: group-normalised advantages (`group_norm`), strictly
on-policy (train batch = rollout batch x samples per prompt, one epoch per rollout: one optimizer step per
rollout batch), no KL (`--algo.kl.init_coef 0`), token-level loss (`--actor.loss_agg_mode token-mean`).

A config is the dataclass or its OmegaConf structured DictConfig (attribute access either way). Paths are
made absolute: a Ray job runs in its own working directory, and the cluster is expected to share the
filesystem that holds runs/ and the data.
"""

from __future__ import annotations

import math
import os
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cascade_cli.chat import CHAT_TEMPLATE, saved_template, template_is_chatml
from cascade_cli.config.checks import validate
from cascade_cli.config.common import StageConfig, role_layout
from cascade_cli.config.grpo import GRPOConfig, PhaseConfig, RLVRConfig, resolve_phases
from cascade_cli.config.rlhf import RLHFConfig
from cascade_cli.config.rm import RewardModelConfig
from cascade_cli.config.sft import SFTConfig
from cascade_cli.engines.openrlhf.cluster import submit_prefix
from cascade_cli.engines.openrlhf.extra_args import extra_args
from cascade_cli.engines.openrlhf.launch import entrypoint_placement, trainer_launcher
from cascade_cli.engines.openrlhf.logger_args import logger_args
from cascade_cli.engines.openrlhf.validate import validate_args
from cascade_cli.errors import CascadeUsageError
from cascade_cli.models.real import cache_target, is_real_spec
from cascade_cli.models.resolve import default_cache_dir
from cascade_cli.models.tiny import is_tiny_spec, tiny_seed
from cascade_cli.serve.auth import TOKEN_ENV, TOKEN_REF, url_with_token_ref

DATA_DIR = "openrlhf_data"
DATA_FILE = "train.jsonl"
# Our `loss_aggregation` (RLHF's stabiliser: sequence) -> OpenRLHF's --actor.loss_agg_mode.
LOSS_AGG_MODES = {"token": "token-mean", "sequence": "seq-mean-token-mean"}
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@dataclass
class OpenRLHFJob:
    """One OpenRLHF run: `submit` (the `ray job submit ... --` prefix) + `entrypoint` (what runs there)."""

    name: str
    cli: str  # train_sft | train_rm | train_ppo_ray
    submit: list[str]
    entrypoint: list[str]  # launcher + module + args
    args: list[str]  # the OpenRLHF flags alone (what its argparse reads)
    init: str
    output_dir: str
    notes: list[str] = field(default_factory=list)  # settings OpenRLHF cannot express exactly
    # The agent file (--train.agent_func_path) the runner writes before submitting: path -> its settings.
    agent: tuple[str, dict[str, Any]] | None = None

    @property
    def argv(self) -> list[str]:
        return [*self.submit, *self.entrypoint]

    def shell(self) -> str:
        return " ".join(map(_shell_word, self.argv))


def _shell_word(arg: str) -> str:
    """shlex.quote, except that `$CASCADE_REWARD_TOKEN` stays a reference the shell running the plan expands
    (`http://h:5000/"${CASCADE_REWARD_TOKEN}"/get_reward`): the token itself is never printed."""
    if TOKEN_REF not in arg:
        return shlex.quote(arg)
    return f'"${{{TOKEN_ENV}}}"'.join(shlex.quote(piece) if piece else "" for piece in arg.split(TOKEN_REF))


def model_ref(value: str) -> str:
    """A hub id stays as is; `tiny`/`tiny:SEED`, `smollm2-135m` and `gguf:PATH` are their cache directories
    (the runner builds them before submitting); anything else is a path, made absolute for the Ray job."""
    if is_tiny_spec(value):
        return str((default_cache_dir() / f"tiny-{tiny_seed(value)}").resolve())
    if is_real_spec(value):
        return str(cache_target(value, default_cache_dir()).resolve())
    if _HUB_ID.match(value) and not Path(value).exists():
        return value
    return str(Path(value).expanduser().resolve())


def stage_name(config: StageConfig) -> str:
    return config.name or config.kind


def stage_out(config: StageConfig) -> Path:
    if not config.out:
        raise CascadeUsageError(f"stage {stage_name(config)}: out: missing output directory")
    return Path(config.out).expanduser().resolve()


def converted_data_path(config: StageConfig) -> Path:
    """Where the runner writes the stage's data in OpenRLHF's format (inside the stage's output)."""
    return stage_out(config) / DATA_DIR / DATA_FILE


def phase_data_path(config: GRPOConfig, index: int) -> Path:
    """The prompts of one RL phase: exactly steps x prompts_per_step rows (data.write_phase_files)."""
    return stage_out(config) / DATA_DIR / f"phase{index}.jsonl"


def phase_samples(config: GRPOConfig) -> list[int]:
    """Prompts each RL phase consumes: its steps x prompts_per_step (one rollout batch per step)."""
    return [phase.steps * config.prompts_per_step for phase in resolve_phases(config)]


def _float(value: float) -> str:
    return repr(float(value))


def _ckpt_args(out: Path, save_every: int) -> list[str]:
    """HF weights into `out` (the next stage's init), DeepSpeed state beside them; save_every 0: at the end."""
    return [
        "--ckpt.output_dir", str(out),
        "--ckpt.path", str(out / "ds_checkpoints"),
        "--ckpt.save_hf",
        "--ckpt.save_steps", str(save_every or -1),
    ]


# ---- sft / reward_model: one deepspeed job ----


def _template_args(model: str) -> list[str]:
    """`--data.tokenizer_chat_template` ours, except for a local init whose saved template is not ChatML."""
    own = saved_template(model) if Path(model).is_dir() else None
    return [] if own and not template_is_chatml(own) else ["--data.tokenizer_chat_template", CHAT_TEMPLATE]


def _memory_args(config: StageConfig, checkpointing_flag: str) -> list[str]:
    """`gradient_checkpointing` (auto: on, as clusters train long sequences) and `lora.*` as OpenRLHF flags."""
    args = [] if config.gradient_checkpointing == "false" else [checkpointing_flag]
    lora = config.lora
    if lora.r > 0:
        args += ["--ds.lora.rank", str(lora.r), "--ds.lora.alpha", str(int(lora.alpha)),
                 "--ds.lora.dropout", _float(lora.dropout),
                 "--ds.lora.target_modules", *lora.target_modules.replace(",", " ").split()]
    return args


def _deepspeed_job(
    config: SFTConfig | RewardModelConfig, cli: str, global_batch: int, save_every: int, data_args: list[str]
) -> OpenRLHFJob:
    """The flags SFT and the reward model share (fields both classes have), then the kind's `data_args`."""
    out = stage_out(config)
    args = [
        "--model.model_name_or_path", model_ref(str(config.init)),
        "--data.dataset", str(converted_data_path(config)),
        "--data.max_len", str(config.max_seq_len),
        "--train.batch_size", str(global_batch),
        *_ckpt_args(out, save_every),
        "--train.seed", str(config.seed),
        "--train.max_epochs", str(max(1, math.ceil(config.epochs))),
        "--train.micro_batch_size", "1",
        *_memory_args(config, "--model.gradient_checkpointing_enable"),
        "--adam.lr", _float(config.lr),
        "--adam.betas", _float(config.beta1), _float(config.beta2),
        "--adam.weight_decay", _float(config.weight_decay),
        "--lr_warmup_ratio", _float(config.warmup_ratio),
        "--min_lr_ratio", _float(config.min_lr / config.lr if config.lr else 0.0),
        "--max_norm", _float(config.max_grad_norm),
        "--data.apply_chat_template",
        # Our template (ChatML + /think, /no_think) unless the init carries a non-ChatML one of its own (rows
        # carry their flags). OpenRLHF saves the tokenizer with it, so RL stages render prompts the same way.
        *_template_args(model_ref(str(config.init))),
    ]
    logging, notes = logger_args(config, out, stage_name(config))
    args += logging + data_args
    if config.max_steps:
        args += ["--data.max_samples", str(config.max_steps * global_batch)]
    launcher = trainer_launcher(config.cluster, cli)
    args += extra_args(config)  # openrlhf.extra_args, as written: after ours, so a repeated flag is theirs
    validate_args(cli, args)
    return OpenRLHFJob(
        name=stage_name(config),
        cli=cli,
        submit=submit_prefix(config.cluster, entrypoint_placement(config.cluster)),
        entrypoint=[*launcher, *args],
        args=args,
        init=str(config.init),
        output_dir=str(out),
        notes=notes,
    )


def sft_jobs(config: SFTConfig) -> list[OpenRLHFJob]:
    # Every assistant turn carries loss (as the local SFT does): the whole conversation under `messages`.
    data_args = ["--data.input_key", "messages", "--data.multiturn"]
    if config.packing:
        data_args += ["--ds.packing_samples"]
    return [_deepspeed_job(config, "train_sft", config.batch_size * config.grad_accum, config.save_every, data_args)]


def reward_model_jobs(config: RewardModelConfig) -> list[OpenRLHFJob]:
    data_args = ["--data.prompt_key", "prompt", "--data.chosen_key", "chosen", "--data.rejected_key", "rejected"]
    return [_deepspeed_job(config, "train_rm", config.batch_size, 0, data_args)]  # the RM saves at the end only


# ---- rlvr / rlhf: one train_ppo_ray job per phase ----


def remote_reward(cluster_urls: list[str]) -> list[str]:
    """`--reward.remote_url`: the reward service URLs and/or the reward_func file (absolute)."""
    return ["--reward.remote_url", ",".join(reward_sources(cluster_urls))]


def reward_sources(cluster_urls: list[str]) -> list[str]:
    """cluster.reward_urls (checked by ClusterConfig): http(s) URLs of the reward service, or reward_func .py
    files (made absolute). With CASCADE_REWARD_TOKEN set, each service URL carries the token as its first path
    segment, written as `$CASCADE_REWARD_TOKEN`: a printed plan expands it when run (OpenRLHFJob.shell), the
    runner puts the value in where it submits (serve/auth.py: expand_token_ref, with_token_env), the agent reads
    its environment."""
    token = os.environ.get(TOKEN_ENV) or None
    return [
        url_with_token_ref(url, token) if url.startswith(("http://", "https://")) else str(Path(url).expanduser().resolve())
        for url in map(str, cluster_urls)
    ]


def _rl_args(
    config: GRPOConfig, phase: PhaseConfig, data: Path, steps: int, init: str, out: Path, reward: list[str]
) -> list[str]:
    cluster = config.cluster
    prompts, group = config.prompts_per_step, config.group_size
    actor_nodes, actor_per_node = role_layout(cluster, cluster.actor_gpus)
    args = [
        "--actor.model_name_or_path", model_ref(init),
        "--data.prompt_dataset", str(data),
        "--data.input_key", "prompt",
        "--data.label_key", "label",
        "--data.apply_chat_template",
        "--data.max_len", str(config.max_prompt_len + phase.max_response_len),
        "--data.max_samples", str(steps * prompts),
        "--rollout.max_new_tokens", str(phase.max_response_len),
        "--rollout.n_samples_per_prompt", str(group),
        "--rollout.batch_size", str(prompts),
        "--rollout.temperature", _float(phase.temperature),
        "--rollout.top_p", _float(config.top_p),
        # Strictly on-policy: the whole rollout batch is one training batch, seen once. The phase's file
        # holds exactly steps x prompts rows, so one episode is exactly `steps` optimizer steps.
        "--train.batch_size", str(prompts * group),
        "--train.max_epochs", "1",
        "--train.num_episodes", "1",
        "--train.seed", str(config.seed),
        "--algo.advantage.estimator", "group_norm",
        "--algo.kl.init_coef", _float(config.kl_coef),
        "--actor.loss_agg_mode", LOSS_AGG_MODES[config.loss_aggregation],
        "--actor.adam.lr", _float(config.lr),
        "--actor.adam.betas", _float(config.beta1), _float(config.beta2),
        "--actor.adam.weight_decay", _float(config.weight_decay),
        "--actor.max_norm", _float(config.max_grad_norm),
        "--actor.lr_scheduler", "constant",
        *_memory_args(config, "--actor.gradient_checkpointing_enable"),
        "--actor.num_nodes", str(actor_nodes),
        "--actor.num_gpus_per_node", str(actor_per_node),
        *reward,
        "--vllm.num_engines", str(cluster.vllm_engines),
        "--vllm.tensor_parallel_size", str(cluster.vllm_tensor_parallel_size),
        *_ckpt_args(out, config.save_every),
    ]
    # OpenRLHF defaults every role to 8 GPUs per node: set each one from the cluster config.
    for role, gpus in (("ref", cluster.ref_gpus), ("reward", cluster.reward_gpus), ("critic", cluster.critic_gpus)):
        nodes, per_node = role_layout(cluster, gpus) if gpus else (actor_nodes, actor_per_node)
        args += [f"--{role}.num_nodes", str(nodes), f"--{role}.num_gpus_per_node", str(per_node)]
    if config.kl_coef > 0:
        args += ["--algo.kl.use_loss", "--algo.kl.estimator", "k3"]
    if config.entropy_coef > 0:
        args += ["--actor.entropy_coef", _float(config.entropy_coef)]
    if cluster.colocate_all:
        args += ["--train.colocate_all", "--vllm.enable_sleep", "--ds.enable_sleep"]
    if config.dynamic_filter:
        args += ["--algo.dynamic_filtering_enable", "--algo.dynamic_filtering_range", "0", "1"]
    if not phase.overlong_filter and config.truncated_reward is not None:
        # >= 0 scales a truncated sample's reward (0: reward 0, the paper's setting); < 0 replaces it.
        coef = 0.0 if float(config.truncated_reward) == 0 else float(config.truncated_reward)
        args += ["--reward.stop_properly_penalty_coef", _float(coef)]
    return args


def needs_agent(config: GRPOConfig, phase: PhaseConfig) -> bool:
    """Settings only cascade's agent file expresses (agent.py): rollout top-k, the overlong loss mask,
    group-level rewards (RLHF through the service, IF-RL's RM bonus) and the outcomes epoch filtering reads."""
    return (
        config.top_k > 0
        or bool(phase.overlong_filter)
        or config.kind == "rlhf"
        or rm_bonus(config)
        or bool(config.epoch_filter)
    )


def rm_bonus(config: GRPOConfig) -> bool:
    """IF-RL's reward-model bonus (an RLVR field; RLHF's reward is the RM's anyway)."""
    return config.kind == "rlvr" and config.if_rm_bonus


def agent_path(config: GRPOConfig, tag: str) -> Path:
    return stage_out(config) / DATA_DIR / f"agent_{tag}.py"


def outcomes_dir(config: GRPOConfig, tag: str) -> Path:
    """Where the agent of job `tag` appends each rollout's (prompt_id, passed): epoch filtering reads it."""
    return stage_out(config) / "epoch_outcomes" / tag


def rl_job(
    config: GRPOConfig, phase: PhaseConfig, name: str, tag: str, data: Path, steps: int, init: str, out: Path
) -> OpenRLHFJob:
    """One train_ppo_ray job: `steps` rollout batches of the prompts in `data`, from `init` into `out`."""
    urls = [str(url) for url in config.cluster.reward_urls]
    agent, notes = None, []
    if not urls:  # RLHF on OpenRLHF's own reward-model role (rlhf_jobs allows it)
        reward, notes = ["--reward.model_name_or_path", model_ref(str(config.reward_model))], [RM_ROLE_NOTE]
    elif needs_agent(config, phase):
        settings = {
            "reward_urls": reward_sources(urls),
            "top_k": int(config.top_k),
            "top_p": float(config.top_p),
            "overlong_filter": bool(phase.overlong_filter),
            "reward_options": reward_options(config),
            "outcomes_dir": str(outcomes_dir(config, tag)) if config.epoch_filter else None,
        }
        agent = (str(agent_path(config, tag)), settings)
        reward = ["--train.agent_func_path", agent[0]]
    else:
        reward = remote_reward(urls)
    logging, logging_notes = logger_args(config, out, name)
    args = [*_rl_args(config, phase, data, steps, init, out, reward), *logging, *extra_args(config)]
    notes = notes + logging_notes
    if isinstance(config, RLVRConfig) and config.reward_func:  # the service must be started with it
        isolation = "" if config.reward_func_isolation == "none" else f" --reward-func-isolation {config.reward_func_isolation}"
        notes.append(f"reward_func: start the reward service as `cascade verify --serve --reward-func {config.reward_func}{isolation}`")
    validate_args("train_ppo_ray", args)
    return OpenRLHFJob(
        name=name,
        cli="train_ppo_ray",
        submit=submit_prefix(config.cluster),
        entrypoint=["python3", "-m", "openrlhf.cli.train_ppo_ray", *args],
        args=args,
        init=init,
        output_dir=str(out),
        notes=notes,
        agent=agent,
    )


def reward_options(config: GRPOConfig) -> dict[str, Any]:
    """The stage's reward settings the service applies to each request (rm_rewards.request_options)."""
    if config.kind == "rlhf":
        return {
            "code_switch_penalty": bool(config.code_switch_penalty),
            "code_switch_margin": float(config.code_switch_margin),
            "shaping": str(config.reward_shaping),
        }
    return {"if_rm": True} if rm_bonus(config) else {}


def phase_output(config: GRPOConfig, index: int, phase: PhaseConfig) -> Path:
    """A phase's output: the stage's out for the last phase (the next stage's init), else phases/K_LEN."""
    last = index == len(resolve_phases(config)) - 1
    return stage_out(config) if last else stage_out(config) / "phases" / f"{index}_{phase.max_response_len}"


def _rl_jobs(config: GRPOConfig) -> list[OpenRLHFJob]:
    """One train_ppo_ray job per phase; a phase's output is the next one's init, the last is the stage's out.
    (With epoch_filter the runner splits each phase into one job per epoch: epoch_jobs.py.)"""
    schedule = resolve_phases(config)
    jobs = []
    init = str(config.init)
    for index, phase in enumerate(schedule):
        name = f"{stage_name(config)}/phase{index}" if len(schedule) > 1 else stage_name(config)
        out = phase_output(config, index, phase)
        jobs.append(rl_job(config, phase, name, f"phase{index}", phase_data_path(config, index), phase.steps, init, out))
        init = str(out)  # the next phase continues from this one's HF weights
    return jobs


def rlvr_jobs(config: RLVRConfig) -> list[OpenRLHFJob]:
    """GRPO on the verifiers' reward: the reward service or the reward_func file (cluster.reward_urls; the
    config requires one on this engine)."""
    return _rl_jobs(config)


def rlhf_jobs(config: RLHFConfig) -> list[OpenRLHFJob]:
    """GRPO on reward-model scores: the reward service when cluster.reward_urls is set, else OpenRLHF's own
    reward-model role on `reward_model` (the config refuses what that role cannot do)."""
    return _rl_jobs(config)


RM_ROLE_NOTE = (
    "reward: OpenRLHF's reward-model role (cluster.reward_urls empty) scores the whole response one sample "
    "at a time: no text-after-</think>, code-switch penalty or reward shaping; the paper's reward is "
    "`cascade verify --serve --reward-model CKPT` at cluster.reward_urls"
)


JobBuilder = Callable[[Any], list[OpenRLHFJob]]


def stage_jobs(config: StageConfig, builder: JobBuilder) -> list[OpenRLHFJob]:
    """Every OpenRLHF job of a stage, in order (an RL stage: one per phase of its length schedule), from the
    kind's builder (`cascade_cli.stage_kinds` names it: sft_jobs, reward_model_jobs, rlvr_jobs, rlhf_jobs). The
    config's own checks run first (config/checks.py), as they do before every run."""
    try:
        validate(config)
    except CascadeUsageError as error:
        raise CascadeUsageError(f"stage {stage_name(config)}: {error}") from None
    if not config.init:
        raise CascadeUsageError(f"stage {stage_name(config)}: init: missing input checkpoint")
    return builder(config)
