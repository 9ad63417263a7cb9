"""Typed stage config -> the exact OpenRLHF 0.11.2 jobs (flags from its argparse; see flagset.py).

One builder per stage kind, each reading its config class's fields directly (the dataclass default is the
only default; the stage table, `cascade_cli.stages`, names each kind's builder; `stage_jobs` runs it):

- sft_jobs(SFTConfig), reward_model_jobs(RewardModelConfig): `ray job submit ... -- deepspeed --num_nodes N
  --num_gpus G --module openrlhf.cli.train_sft|train_rm <dotted flags>`;
- rlvr_jobs(RLVRConfig), rlhf_jobs(RLHFConfig): `ray job submit ... -- python3 -m openrlhf.cli.train_ppo_ray
  <dotted flags>`, one job per phase of the response-length schedule (config.grpo.resolve_phases), each
  phase starting from the previous phase's output.

The paper's GRPO (Nemotron-Cascade §4.1.2) maps to: group-normalised advantages (`group_norm`), strictly
on-policy (train batch = rollout batch x samples per prompt, one epoch per rollout: one optimizer step per
rollout batch), no KL (`--algo.kl.init_coef 0`), token-level loss (`--actor.loss_agg_mode token-mean`).

A config is the dataclass or its OmegaConf structured DictConfig (attribute access either way). Paths are
made absolute: a Ray job runs in its own working directory, and the cluster is expected to share the
filesystem that holds runs/ and the data.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cascade_cli.chat import CHAT_TEMPLATE, saved_template, template_is_chatml
from cascade_cli.config.common import StageConfig
from cascade_cli.config.grpo import GRPOConfig, PhaseConfig, RLVRConfig, resolve_phases
from cascade_cli.config.rlhf import RLHFConfig
from cascade_cli.config.rm import RewardModelConfig
from cascade_cli.config.sft import SFTConfig
from cascade_cli.engines.openrlhf.cluster import role_layout, submit_prefix
from cascade_cli.engines.openrlhf.validate import check_cluster, check_rl_cluster, validate_args
from cascade_cli.errors import CascadeUsageError
from cascade_cli.real_models import cache_target, is_real_spec
from cascade_cli.tiny import default_cache_dir, is_tiny_spec, tiny_seed

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

    @property
    def argv(self) -> list[str]:
        return [*self.submit, *self.entrypoint]

    def shell(self) -> str:
        return shlex.join(self.argv)


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


def _deepspeed_job(
    config: SFTConfig | RewardModelConfig, cli: str, global_batch: int, save_every: int, data_args: list[str]
) -> OpenRLHFJob:
    """The flags SFT and the reward model share (fields both classes have), then the kind's `data_args`."""
    check_cluster(config)
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
        "--model.gradient_checkpointing_enable",
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
    if config.tensorboard:
        args += ["--logger.tensorboard_dir", str(out / "tensorboard")]
    args += data_args
    if config.max_steps:
        args += ["--data.max_samples", str(config.max_steps * global_batch)]
    nodes, per_node = role_layout(config.cluster, None)
    launcher = ["deepspeed", "--num_nodes", str(nodes), "--num_gpus", str(per_node), "--module", f"openrlhf.cli.{cli}"]
    validate_args(cli, args)
    return OpenRLHFJob(
        name=stage_name(config),
        cli=cli,
        submit=submit_prefix(config.cluster),
        entrypoint=[*launcher, *args],
        args=args,
        init=str(config.init),
        output_dir=str(out),
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
    resolved = []
    for url in map(str, cluster_urls):
        if url.startswith(("http://", "https://")):
            resolved.append(url)
        elif url.endswith(".py"):
            resolved.append(str(Path(url).expanduser().resolve()))
        else:
            raise CascadeUsageError(
                f"cluster.reward_urls: {url!r}: expected an http(s) URL of `cascade verify --serve` "
                "(http://HOST:PORT/get_reward) or the reward_func .py file (`cascade verify --print-reward-func-path`)"
            )
    return ["--reward.remote_url", ",".join(resolved)]


def _missing_reward(config: GRPOConfig, wanted: str) -> CascadeUsageError:
    return CascadeUsageError(
        f"stage {stage_name(config)}: {wanted}: missing reward source; start the reward service "
        "(`cascade verify --serve`) and set cluster.reward_urls=[http://HOST:PORT/get_reward], or point it at "
        "the reward_func file (`cascade verify --print-reward-func-path`)"
    )


def _rl_args(config: GRPOConfig, phase: PhaseConfig, index: int, init: str, out: Path, reward: list[str]) -> list[str]:
    cluster = config.cluster
    prompts, group = config.prompts_per_step, config.group_size
    actor_nodes, actor_per_node = role_layout(cluster, cluster.actor_gpus)
    args = [
        "--actor.model_name_or_path", model_ref(init),
        "--data.prompt_dataset", str(phase_data_path(config, index)),
        "--data.input_key", "prompt",
        "--data.label_key", "label",
        "--data.apply_chat_template",
        "--data.max_len", str(config.max_prompt_len + phase.max_response_len),
        "--data.max_samples", str(phase.steps * prompts),
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
        "--actor.gradient_checkpointing_enable",
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
    if config.tensorboard:
        args += ["--logger.tensorboard_dir", str(out / "tensorboard")]
    return args


def _rl_notes(config: GRPOConfig, phase: PhaseConfig, reward_notes: list[str]) -> list[str]:
    notes = []
    if phase.overlong_filter:
        notes.append(
            "overlong_filter: OpenRLHF 0.11.2 has no loss mask for truncated responses; they keep the "
            "verifier's reward (usually 0) instead of being filtered out"
        )
    notes += reward_notes
    if config.top_k > 0:
        notes.append(f"top_k={config.top_k}: OpenRLHF 0.11.2's rollout has no top-k flag; sampling uses top-p only")
    if config.epoch_filter:
        notes.append("epoch_filter: no OpenRLHF equivalent; filter the prompts between phases instead")
    return notes


def _rl_jobs(config: GRPOConfig, reward: list[str], reward_notes: list[str]) -> list[OpenRLHFJob]:
    """One train_ppo_ray job per phase; a phase's output is the next one's init, the last is the stage's out."""
    schedule = resolve_phases(config)
    out = stage_out(config)
    jobs = []
    init = str(config.init)
    for index, phase in enumerate(schedule):
        phase_out = out if index == len(schedule) - 1 else out / "phases" / f"{index}_{phase.max_response_len}"
        args = _rl_args(config, phase, index, init, phase_out, reward)
        validate_args("train_ppo_ray", args)
        jobs.append(
            OpenRLHFJob(
                name=f"{stage_name(config)}/phase{index}" if len(schedule) > 1 else stage_name(config),
                cli="train_ppo_ray",
                submit=submit_prefix(config.cluster),
                entrypoint=["python3", "-m", "openrlhf.cli.train_ppo_ray", *args],
                args=args,
                init=init,
                output_dir=str(phase_out),
                notes=_rl_notes(config, phase, reward_notes),
            )
        )
        init = str(phase_out)  # the next phase continues from this one's HF weights
    return jobs


def rlvr_jobs(config: RLVRConfig) -> list[OpenRLHFJob]:
    """GRPO on the verifiers' reward: the reward service or the reward_func file (cluster.reward_urls)."""
    check_rl_cluster(config)
    if not config.cluster.reward_urls:
        raise _missing_reward(config, "cluster.reward_urls")
    return _rl_jobs(config, remote_reward(config.cluster.reward_urls), [])


def rlhf_jobs(config: RLHFConfig) -> list[OpenRLHFJob]:
    """GRPO on reward-model scores: the reward service when cluster.reward_urls is set, else OpenRLHF's own
    reward-model role on `reward_model`."""
    check_rl_cluster(config)
    notes = []
    if config.reward_shaping != "none":
        notes.append(f"reward_shaping={config.reward_shaping}: no OpenRLHF 0.11.2 equivalent; rewards are used as scored")
    if config.cluster.reward_urls:
        return _rl_jobs(config, remote_reward(config.cluster.reward_urls), notes)
    if not config.reward_model:
        raise _missing_reward(config, "cluster.reward_urls or reward_model")
    rm_note = (
        "reward: OpenRLHF's reward-model role scores the whole response (thinking included), not the text "
        "after </think>, and applies no code-switching penalty (the paper's RLHF reward)"
    )
    return _rl_jobs(config, ["--reward.model_name_or_path", model_ref(str(config.reward_model))], [rm_note, *notes])


JobBuilder = Callable[[Any], list[OpenRLHFJob]]


def stage_jobs(config: StageConfig, builder: JobBuilder) -> list[OpenRLHFJob]:
    """Every OpenRLHF job of a stage, in order (an RL stage: one per phase of its length schedule), from the
    kind's builder (`cascade_cli.stages` names it: sft_jobs, reward_model_jobs, rlvr_jobs, rlhf_jobs)."""
    if not config.init:
        raise CascadeUsageError(f"stage {stage_name(config)}: init: missing input checkpoint")
    return builder(config)
