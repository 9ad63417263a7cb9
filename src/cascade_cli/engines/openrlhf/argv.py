"""Stage config -> the exact OpenRLHF 0.11.2 commands (flags from its argparse; see flagset.py).

- sft / reward_model: `ray job submit ... -- deepspeed --num_nodes N --num_gpus G --module
  openrlhf.cli.train_sft|train_rm <dotted flags>`;
- rlvr / rlhf: `ray job submit ... -- python3 -m openrlhf.cli.train_ppo_ray <dotted flags>`, one job per
  phase of a response-length schedule, each phase starting from the previous phase's output.

The paper's GRPO (Nemotron-Cascade §4.1.2) maps to: group-normalised advantages (`group_norm`), strictly
on-policy (train batch = rollout batch x samples per prompt, one epoch per rollout: one optimizer step per
rollout batch), no KL (`--algo.kl.init_coef 0`), token-level loss (`--actor.loss_agg_mode token-mean`).

Configs are read by field name (SFTConfig, RLVRConfig and the RLHF / reward-model configs share them), so
this module does not import the config classes. Paths are made absolute: a Ray job runs in its own
working directory, and the cluster is expected to share the filesystem that holds runs/ and the data.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cascade_cli.chat import CHAT_TEMPLATE
from cascade_cli.engines.openrlhf.validate import check_cluster, validate_args
from cascade_cli.errors import CascadeUsageError
from cascade_cli.tiny import default_cache_dir, is_tiny_spec, tiny_seed

RL_KINDS = ("rlvr", "rlhf")
DEEPSPEED_KINDS = {"sft": "train_sft", "reward_model": "train_rm"}
DATA_DIR = "openrlhf_data"
DATA_FILE = "train.jsonl"
DEFAULT_RUNTIME_ENV = {"env_vars": {"TOKENIZERS_PARALLELISM": "true", "NCCL_DEBUG": "WARN"}}
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


def _get(config: Any, name: str, default: Any = None) -> Any:
    value = getattr(config, name, default)
    return default if value is None else value


def model_ref(value: str) -> str:
    """A hub id stays as is; `tiny`/`tiny:SEED` is its cache directory (the runner builds it before
    submitting); anything else is a path, made absolute for the Ray job."""
    if is_tiny_spec(value):
        return str((default_cache_dir() / f"tiny-{tiny_seed(value)}").resolve())
    if _HUB_ID.match(value) and not Path(value).exists():
        return value
    return str(Path(value).expanduser().resolve())


def stage_out(config: Any) -> Path:
    out = _get(config, "out")
    if not out:
        raise CascadeUsageError(f"stage {_get(config, 'name', '?')}: out: missing output directory")
    return Path(out).expanduser().resolve()


def converted_data_path(config: Any) -> Path:
    """Where the runner writes the stage's data in OpenRLHF's format (inside the stage's output)."""
    return stage_out(config) / DATA_DIR / DATA_FILE


def phase_data_path(config: Any, index: int) -> Path:
    """The prompts of one RL phase: exactly steps x prompts_per_step rows (data.write_phase_files)."""
    return stage_out(config) / DATA_DIR / f"phase{index}.jsonl"


def phase_samples(config: Any) -> list[int]:
    """Prompts each RL phase consumes: its steps x prompts_per_step (one rollout batch per step)."""
    return [phase.steps * int(_get(config, "prompts_per_step", 128)) for phase in phases(config)]


def _number(value: float | int) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def runtime_env(cluster: Any) -> str:
    text = _get(cluster, "runtime_env_json", "")
    if not text:
        return json.dumps(DEFAULT_RUNTIME_ENV, separators=(",", ":"))
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise CascadeUsageError(f"cluster.runtime_env_json: expected a JSON object, found {text!r} ({error.msg})") from None
    if not isinstance(value, dict):
        raise CascadeUsageError(f"cluster.runtime_env_json: expected a JSON object, found {type(value).__name__}")
    return json.dumps(value, separators=(",", ":"))


def submit_prefix(cluster: Any) -> list[str]:
    return ["ray", "job", "submit", "--address", str(cluster.ray_address), "--runtime-env-json", runtime_env(cluster), "--"]


def role_layout(cluster: Any, gpus: int | None) -> tuple[int, int]:
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


def _common_deepspeed_args(config: Any, out: Path) -> list[str]:
    lr = float(_get(config, "lr", 5e-6))
    args = [
        "--ckpt.output_dir", str(out),
        "--ckpt.path", str(out / "ds_checkpoints"),
        "--ckpt.save_hf",
        "--ckpt.save_steps", str(_get(config, "save_every", 0) or -1),
        "--train.seed", str(_get(config, "seed", 0)),
        "--train.max_epochs", str(max(1, math.ceil(float(_get(config, "epochs", 1.0))))),
        "--train.micro_batch_size", "1",
        "--model.gradient_checkpointing_enable",
        "--adam.lr", _number(lr),
        "--adam.betas", _number(float(_get(config, "beta1", 0.9))), _number(float(_get(config, "beta2", 0.95))),
        "--adam.weight_decay", _number(float(_get(config, "weight_decay", 0.0))),
        "--lr_warmup_ratio", _number(float(_get(config, "warmup_ratio", 0.03))),
        "--min_lr_ratio", _number(float(_get(config, "min_lr", 0.0)) / lr if lr else 0.0),
        "--max_norm", _number(float(_get(config, "max_grad_norm", 1.0))),
        "--data.apply_chat_template",
        # Our template (ChatML + /think, /no_think): the base model's own would differ. OpenRLHF saves the
        # tokenizer with it, so the RL stages that start from this output render prompts the same way.
        "--data.tokenizer_chat_template", CHAT_TEMPLATE,
    ]
    if _get(config, "tensorboard", False):
        args += ["--logger.tensorboard_dir", str(out / "tensorboard")]
    return args


def _deepspeed_job(config: Any, data_path: Path) -> OpenRLHFJob:
    kind = config.kind
    cli = DEEPSPEED_KINDS[kind]
    out = stage_out(config)
    cluster = config.cluster
    check_cluster(config)
    global_batch = int(_get(config, "batch_size", 128)) * int(_get(config, "grad_accum", 1))
    max_len = int(_get(config, "max_seq_len", 0) or _get(config, "max_len", 2048))
    args = [
        "--model.model_name_or_path", model_ref(str(config.init)),
        "--data.dataset", str(data_path),
        "--data.max_len", str(max_len),
        "--train.batch_size", str(global_batch),
        *_common_deepspeed_args(config, out),
    ]
    if kind == "sft":
        # Every assistant turn carries loss (as the local SFT does): the whole conversation under `messages`.
        args += ["--data.input_key", "messages", "--data.multiturn"]
        if _get(config, "packing", False):
            args += ["--ds.packing_samples"]
    else:
        args += ["--data.prompt_key", "prompt", "--data.chosen_key", "chosen", "--data.rejected_key", "rejected"]
    max_steps = _get(config, "max_steps")
    if max_steps:
        args += ["--data.max_samples", str(int(max_steps) * global_batch)]
    nodes, per_node = role_layout(cluster, None)
    launcher = ["deepspeed", "--num_nodes", str(nodes), "--num_gpus", str(per_node), "--module", f"openrlhf.cli.{cli}"]
    validate_args(cli, args)
    return OpenRLHFJob(
        name=str(_get(config, "name", kind) or kind),
        cli=cli,
        submit=submit_prefix(cluster),
        entrypoint=[*launcher, *args],
        args=args,
        init=str(config.init),
        output_dir=str(out),
    )


@dataclass(frozen=True)
class Phase:
    steps: int
    max_response_len: int
    temperature: float
    overlong_filter: bool


def phases(config: Any) -> list[Phase]:
    """The response-length schedule; a stage without `phases` is one phase of `steps`."""
    top = Phase(
        int(_get(config, "steps", 1)),
        int(_get(config, "max_response_len", 1024)),
        float(_get(config, "temperature", 1.0)),
        bool(_get(config, "overlong_filter", False)),
    )
    listed = _get(config, "phases", []) or []
    if not listed:
        return [top]
    return [
        Phase(
            int(phase.steps),
            int(_get(phase, "max_response_len", top.max_response_len)),
            float(_get(phase, "temperature", top.temperature)),
            bool(_get(phase, "overlong_filter", top.overlong_filter)),
        )
        for phase in listed
    ]


def reward_source(config: Any) -> list[str]:
    """`--reward.*` flags: the reward service / reward_func file, or (RLHF) a reward model checkpoint."""
    urls = [str(url) for url in (_get(config.cluster, "reward_urls", []) or [])]
    if urls:
        resolved = []
        for url in urls:
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
    reward_model = _get(config, "reward_model")
    if config.kind == "rlhf" and reward_model:
        return ["--reward.model_name_or_path", model_ref(str(reward_model))]
    wanted = "cluster.reward_urls or reward_model" if config.kind == "rlhf" else "cluster.reward_urls"
    raise CascadeUsageError(
        f"stage {_get(config, 'name', config.kind)}: {wanted}: missing reward source; start the reward service "
        "(`cascade verify --serve`) and set cluster.reward_urls=[http://HOST:PORT/get_reward], or point it at "
        "the reward_func file (`cascade verify --print-reward-func-path`)"
    )


def _rl_job(config: Any, data_path: Path, phase: Phase, index: int, init: str, out: Path) -> OpenRLHFJob:
    cluster = config.cluster
    prompts = int(_get(config, "prompts_per_step", 128))
    group = int(_get(config, "group_size", 8))
    kl = float(_get(config, "kl_coef", 0.0))
    actor_nodes, actor_per_node = role_layout(cluster, _get(cluster, "actor_gpus"))
    samples = phase.steps * prompts
    args = [
        "--actor.model_name_or_path", model_ref(init),
        "--data.prompt_dataset", str(data_path),
        "--data.input_key", "prompt",
        "--data.label_key", "label",
        "--data.apply_chat_template",
        "--data.max_len", str(int(_get(config, "max_prompt_len", 1024)) + phase.max_response_len),
        "--data.max_samples", str(samples),
        "--rollout.max_new_tokens", str(phase.max_response_len),
        "--rollout.n_samples_per_prompt", str(group),
        "--rollout.batch_size", str(prompts),
        "--rollout.temperature", _number(phase.temperature),
        "--rollout.top_p", _number(float(_get(config, "top_p", 1.0))),
        # Strictly on-policy: the whole rollout batch is one training batch, seen once. The phase's file
        # holds exactly steps x prompts rows, so one episode is exactly `steps` optimizer steps.
        "--train.batch_size", str(prompts * group),
        "--train.max_epochs", "1",
        "--train.num_episodes", "1",
        "--train.seed", str(_get(config, "seed", 0)),
        "--algo.advantage.estimator", "group_norm",
        "--algo.kl.init_coef", _number(kl),
        "--actor.loss_agg_mode", LOSS_AGG_MODES[str(_get(config, "loss_aggregation", "token"))],
        "--actor.adam.lr", _number(float(_get(config, "lr", 1e-6))),
        "--actor.adam.betas", _number(float(_get(config, "beta1", 0.9))), _number(float(_get(config, "beta2", 0.95))),
        "--actor.adam.weight_decay", _number(float(_get(config, "weight_decay", 0.0))),
        "--actor.max_norm", _number(float(_get(config, "max_grad_norm", 1.0))),
        "--actor.lr_scheduler", "constant",
        "--actor.gradient_checkpointing_enable",
        "--actor.num_nodes", str(actor_nodes),
        "--actor.num_gpus_per_node", str(actor_per_node),
        *reward_source(config),
        "--vllm.num_engines", str(int(cluster.vllm_engines)),
        "--vllm.tensor_parallel_size", str(int(cluster.vllm_tensor_parallel_size)),
        "--ckpt.output_dir", str(out),
        "--ckpt.path", str(out / "ds_checkpoints"),
        "--ckpt.save_hf",
        "--ckpt.save_steps", str(_get(config, "save_every", 0) or -1),
    ]
    # OpenRLHF defaults every role to 8 GPUs per node: set each one from the cluster config.
    for role, gpus in (("ref", "ref_gpus"), ("reward", "reward_gpus"), ("critic", "critic_gpus")):
        nodes, per_node = role_layout(cluster, _get(cluster, gpus)) if _get(cluster, gpus) else (actor_nodes, actor_per_node)
        args += [f"--{role}.num_nodes", str(nodes), f"--{role}.num_gpus_per_node", str(per_node)]
    if kl > 0:
        args += ["--algo.kl.use_loss", "--algo.kl.estimator", "k3"]
    entropy = float(_get(config, "entropy_coef", 0.0))
    if entropy > 0:
        args += ["--actor.entropy_coef", _number(entropy)]
    if _get(cluster, "colocate_all", False):
        args += ["--train.colocate_all", "--vllm.enable_sleep", "--ds.enable_sleep"]
    if _get(config, "dynamic_filter", False):
        args += ["--algo.dynamic_filtering_enable", "--algo.dynamic_filtering_range", "0", "1"]
    notes = []
    truncated = _get(config, "truncated_reward")
    if phase.overlong_filter:
        notes.append(
            "overlong_filter: OpenRLHF 0.11.2 has no loss mask for truncated responses; they keep the "
            "verifier's reward (usually 0) instead of being filtered out"
        )
    elif truncated is not None:
        # >= 0 scales a truncated sample's reward (0: reward 0, the paper's setting); < 0 replaces it.
        coef = 0.0 if float(truncated) == 0 else float(truncated)
        args += ["--reward.stop_properly_penalty_coef", _number(coef)]
    if "--reward.model_name_or_path" in args:
        notes.append(
            "reward: OpenRLHF's reward-model role scores the whole response (thinking included), not the text "
            "after </think>, and applies no code-switching penalty (the paper's RLHF reward)"
        )
    if str(_get(config, "reward_shaping", "none")) != "none":
        notes.append(f"reward_shaping={config.reward_shaping}: no OpenRLHF 0.11.2 equivalent; rewards are used as scored")
    if int(_get(config, "top_k", -1)) > 0:
        notes.append(f"top_k={config.top_k}: OpenRLHF 0.11.2's rollout has no top-k flag; sampling uses top-p only")
    if _get(config, "epoch_filter", False):
        notes.append("epoch_filter: no OpenRLHF equivalent; filter the prompts between phases instead")
    if _get(config, "tensorboard", False):
        args += ["--logger.tensorboard_dir", str(out / "tensorboard")]
    validate_args("train_ppo_ray", args)
    name = str(_get(config, "name", config.kind) or config.kind)
    return OpenRLHFJob(
        name=f"{name}/phase{index}" if len(phases(config)) > 1 else name,
        cli="train_ppo_ray",
        submit=submit_prefix(cluster),
        entrypoint=["python3", "-m", "openrlhf.cli.train_ppo_ray", *args],
        args=args,
        init=init,
        output_dir=str(out),
        notes=notes,
    )


def _rl_jobs(config: Any) -> list[OpenRLHFJob]:
    check_cluster(config)
    schedule = phases(config)
    out = stage_out(config)
    jobs = []
    init = str(config.init)
    for index, phase in enumerate(schedule):
        last = index == len(schedule) - 1
        phase_out = out if last else out / "phases" / f"{index}_{phase.max_response_len}"
        jobs.append(_rl_job(config, phase_data_path(config, index), phase, index, init, phase_out))
        init = str(phase_out)  # the next phase continues from this one's HF weights
    return jobs


def stage_jobs(config: Any) -> list[OpenRLHFJob]:
    """Every OpenRLHF job of a stage, in order (an RL stage: one per phase of its length schedule)."""
    kind = getattr(config, "kind", None)
    if not getattr(config, "init", None):
        raise CascadeUsageError(f"stage {_get(config, 'name', kind)}: init: missing input checkpoint")
    if kind in DEEPSPEED_KINDS:
        return [_deepspeed_job(config, converted_data_path(config))]
    if kind in RL_KINDS:
        return _rl_jobs(config)
    raise CascadeUsageError(
        f"stage {_get(config, 'name', kind)}: engine openrlhf runs kinds "
        f"{', '.join([*DEEPSPEED_KINDS, *RL_KINDS])}; found kind {kind!r}"
    )
