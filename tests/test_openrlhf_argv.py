"""Every OpenRLHF command we emit is parsed by OpenRLHF 0.11.2's OWN argparse and validation statements,
built from its real `openrlhf/cli/*.py` source (flagset.parse_like_openrlhf), and bad input is refused
before submission."""

from __future__ import annotations

import ast
import dataclasses
import graphlib
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from cascade_cli.chat import CHAT_TEMPLATE
from cascade_cli.config.common import ClusterConfig
from cascade_cli.config.grpo import PhaseConfig, RLVRConfig
from cascade_cli.config.rlhf import RLHFConfig
from cascade_cli.config.rm import RewardModelConfig
from cascade_cli.config.sft import SFTConfig
from cascade_cli.engines.openrlhf import flagset, jobs
from cascade_cli.engines.openrlhf.validate import validate_args
from cascade_cli.errors import CascadeRunError, CascadeUsageError
from cascade_cli.stage_kinds import build_openrlhf_jobs as build_jobs
from cascade_cli.stage_kinds import run_config

pytest.importorskip("openrlhf", reason="the real OpenRLHF source: pip install --no-deps openrlhf==0.11.2")


def rm_stage(tmp_path: Path, **values: Any) -> RewardModelConfig:
    base = {"engine": "openrlhf", "init": "Qwen/Qwen2.5-72B-Instruct", "out": str(tmp_path / "rm"), "data": "p.jsonl"}
    return RewardModelConfig(**{**base, **values})


def cluster(**values: Any) -> ClusterConfig:
    base = {
        "nodes": 2,
        "gpus_per_node": 8,
        "vllm_engines": 16,
        "reward_urls": ["http://10.0.0.5:5000/get_reward"],
    }
    return ClusterConfig(**{**base, **values})


def rl_stage(tmp_path: Path, **values: Any) -> RLVRConfig | RLHFConfig:
    """A math RLVR stage (an RLHF one with kind="rlhf") on a 2 x 8 GPU cluster with the reward service."""
    base = {
        "engine": "openrlhf",
        "init": "Qwen/Qwen3-8B-Base",
        "out": str(tmp_path / "math_rl"),
        "name": "math_rl",
        "data": "data.jsonl",
        "prompts_per_step": 128,
        "max_prompt_len": 2048,
        "max_response_len": 8192,
        "lr": 2e-6,
        "cluster": cluster(),
    }
    if values.get("kind") == "rlhf":
        return RLHFConfig(**{**base, "reward_model": "runs/x/rm", **values})
    return RLVRConfig(**{**base, "domain": "math", **values})


def parse(job) -> Any:
    try:
        return flagset.parse_like_openrlhf(job.cli, job.args)
    except SystemExit as error:  # argparse's way to refuse a flag
        pytest.fail(f"OpenRLHF's argparse refused {job.name}: exit {error.code}: {job.args}")


def test_shipped_flag_set_equals_the_installed_source():
    assert flagset.shipped_flag_sets() == json.loads(json.dumps(flagset.installed_flag_sets()))
    assert flagset.shipped_flag_sets()["openrlhf_version"] == flagset.OPENRLHF_VERSION


def test_sft_command_is_parsed_by_openrlhf(tmp_path):
    config = SFTConfig(
        engine="openrlhf",
        data="d.jsonl",
        init="Qwen/Qwen3-8B-Base",
        out=str(tmp_path / "sft"),
        max_seq_len=16384,
        batch_size=256,
        lr=5e-5,
        cluster=cluster(nodes=4),
    )
    [job] = build_jobs(config)
    args = parse(job)
    # 4 nodes on Ray: the launcher driver starts one torchrun per node (engines/openrlhf/launch.py).
    assert job.entrypoint[: job.entrypoint.index("--") + 2] == [
        "python3",
        "-m",
        "cascade_cli.engines.openrlhf.ray_launch",
        "--nodes",
        "4",
        "--gpus-per-node",
        "8",
        "--gpu-resource",
        "GPU",
        "--master-port",
        "29500",
        "--module",
        "openrlhf.cli.train_sft",
        "--",
        "--model.model_name_or_path",
    ]
    assert job.argv[:3] == ["ray", "job", "submit"] and job.argv[job.argv.index("--") + 1] == "python3"
    assert args.model.model_name_or_path == "Qwen/Qwen3-8B-Base"
    assert args.data.max_len == 16384 and args.train.batch_size == 256 and args.adam.lr == 5e-5
    assert args.data.multiturn and args.data.apply_chat_template and args.data.input_key == "messages"
    assert args.data.dataset == str(tmp_path / "sft" / "openrlhf_data" / "train.jsonl")
    assert args.ckpt.output_dir == str(tmp_path / "sft") and args.ckpt.save_hf
    assert tuple(args.adam.betas) == (0.9, 0.95) and args.min_lr_ratio == 0.0
    assert args.data.tokenizer_chat_template == CHAT_TEMPLATE


def test_reward_model_command_is_parsed_by_openrlhf(tmp_path):
    [job] = build_jobs(rm_stage(tmp_path, batch_size=256, max_seq_len=8192))
    args = parse(job)
    assert job.entrypoint[6] == "openrlhf.cli.train_rm"
    assert (args.data.prompt_key, args.data.chosen_key, args.data.rejected_key) == (
        "prompt",
        "chosen",
        "rejected",
    )
    assert args.train.batch_size == 256 and args.data.max_len == 8192 and args.train.max_epochs == 1


def test_rlvr_command_is_the_papers_grpo(tmp_path):
    config = RLVRConfig(
        engine="openrlhf",
        init="runs/x/if_rl",
        out=str(tmp_path / "math_rl"),
        name="math_rl",
        data="d.jsonl",
        domain="math",
        steps=100,
        prompts_per_step=128,
        group_size=8,
        max_response_len=24576,
        temperature=1.0,
        top_p=0.95,
        lr=2e-6,
        cluster=cluster(),
    )
    [job] = build_jobs(config)
    args = parse(job)
    assert job.entrypoint[:3] == ["python3", "-m", "openrlhf.cli.train_ppo_ray"]
    assert job.argv[:4] == ["ray", "job", "submit", "--address"] and "--runtime-env-json" in job.argv
    assert args.actor.model_name_or_path == str(Path("runs/x/if_rl").resolve())
    assert args.algo.advantage.estimator == "group_norm" and args.algo.kl.init_coef == 0
    assert args.actor.loss_agg_mode == "token-mean" and not args.algo.kl.use_loss
    # Strictly on-policy: one optimizer step per rollout batch.
    assert args.train.batch_size == args.rollout.batch_size * args.rollout.n_samples_per_prompt == 1024
    assert args.train.max_epochs == 1
    assert args.rollout.max_new_tokens == 24576 and args.data.max_len == config.max_prompt_len + 24576
    assert args.rollout.temperature == 1.0 and args.rollout.top_p == 0.95 and args.actor.adam.lr == 2e-6
    assert args.reward.remote_url == ["http://10.0.0.5:5000/get_reward"]
    assert (args.data.input_key, args.data.label_key, args.data.apply_chat_template) == (
        "prompt",
        "label",
        True,
    )
    assert args.data.max_samples == 100 * 128 and args.train.num_episodes == 1
    assert args.data.prompt_dataset == str(tmp_path / "math_rl" / "openrlhf_data" / "phase0.jsonl")
    # Every role's GPUs come from the cluster config, not OpenRLHF's default of 8 per node on 1 node.
    for role in ("actor", "ref", "reward", "critic"):
        assert (getattr(args, role).num_nodes, getattr(args, role).num_gpus_per_node) == (2, 8)
    assert args.train.colocate_all and args.vllm.num_engines == 16 and args.vllm.tensor_parallel_size == 1
    assert args.reward.stop_properly_penalty_coef == 0.0  # truncated responses get reward 0 (filter off)
    from transformers import SchedulerType

    assert SchedulerType(args.actor.lr_scheduler)  # a name transformers' get_scheduler knows


def test_dynamic_filtering_and_reward_func_file(tmp_path):
    reward_file = tmp_path / "reward_func.py"
    config = rl_stage(
        tmp_path, domain="if", dynamic_filter=True, cluster=cluster(reward_urls=[str(reward_file)])
    )
    [job] = build_jobs(config)
    args = parse(job)
    assert args.algo.dynamic_filtering_enable and tuple(args.algo.dynamic_filtering_range) == (0.0, 1.0)
    assert args.reward.remote_url == [str(reward_file)]


def test_length_schedule_is_consecutive_jobs_chained_by_checkpoint(tmp_path):
    schedule = [PhaseConfig(190, 24576, 1.0, True), PhaseConfig(240, 32768, 1.0, False), PhaseConfig(70, 40960, 0.8, False)]
    jobs = build_jobs(rl_stage(tmp_path, phases=schedule))
    parsed = [parse(job) for job in jobs]
    assert [a.rollout.max_new_tokens for a in parsed] == [24576, 32768, 40960]
    assert [a.rollout.temperature for a in parsed] == [1.0, 1.0, 0.8]
    assert [a.data.max_samples for a in parsed] == [190 * 128, 240 * 128, 70 * 128]
    assert [Path(a.data.prompt_dataset).name for a in parsed] == [
        "phase0.jsonl",
        "phase1.jsonl",
        "phase2.jsonl",
    ]
    assert parsed[0].actor.model_name_or_path == "Qwen/Qwen3-8B-Base"
    assert parsed[1].actor.model_name_or_path == jobs[0].output_dir == parsed[0].ckpt.output_dir
    assert parsed[2].actor.model_name_or_path == jobs[1].output_dir
    assert jobs[-1].output_dir == str(tmp_path / "math_rl")  # the stage's out: the next stage's init
    # Overlong filtering only in the first phase: cascade's agent masks truncated responses out of the loss
    # there (its file is written by the runner); later phases score them 0 through OpenRLHF's own flag.
    assert parsed[0].reward.stop_properly_penalty_coef is None and parsed[0].reward.remote_url == ["agent"]
    assert jobs[0].agent[0] == parsed[0].train.agent_func_path and jobs[0].agent[1]["overlong_filter"] is True
    assert jobs[0].agent[1]["reward_urls"] == ["http://10.0.0.5:5000/get_reward"]
    assert parsed[1].reward.stop_properly_penalty_coef == 0.0 and jobs[1].agent is None
    assert parsed[1].reward.remote_url == ["http://10.0.0.5:5000/get_reward"]
    assert not any(job.notes for job in jobs)


def test_tiny_init_is_its_cache_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("CASCADE_CACHE", str(tmp_path / "cache"))
    [job] = build_jobs(rl_stage(tmp_path, init="tiny:3"))
    assert parse(job).actor.model_name_or_path == str(tmp_path / "cache" / "models" / "tiny-3")


def test_rlhf_with_our_reward_model_and_kl(tmp_path):
    config = rl_stage(
        tmp_path,
        kind="rlhf",
        reward_model="runs/x/rm",
        kl_coef=1e-3,
        cluster=cluster(
            reward_urls=[],
            colocate_all=False,
            nodes=5,
            actor_gpus=16,
            ref_gpus=8,
            reward_gpus=8,
            vllm_engines=4,
        ),
    )
    [job] = build_jobs(config)
    args = parse(job)
    assert (
        args.reward.model_name_or_path == str(Path("runs/x/rm").resolve()) and args.reward.remote_url is None
    )
    assert args.algo.kl.init_coef == 1e-3 and args.algo.kl.use_loss and args.algo.kl.estimator == "k3"
    assert (args.actor.num_nodes, args.actor.num_gpus_per_node) == (2, 8)
    assert (args.ref.num_nodes, args.reward.num_gpus_per_node) == (1, 8)
    # OpenRLHF's own RM role cannot score the answer alone: the note names the service that does.
    assert any("--reward-model CKPT" in note for note in job.notes)
    assert args.actor.loss_agg_mode == "token-mean"
    # The paper's RLHF reward through the service: the agent sends the stage's shaping and code-switch settings.
    [job] = build_jobs(rl_stage(tmp_path, kind="rlhf", loss_aggregation="sequence", reward_shaping="zscore_tanh"))
    args = parse(job)
    assert args.actor.loss_agg_mode == "seq-mean-token-mean" and args.train.agent_func_path == job.agent[0]
    assert job.agent[1]["reward_options"] == {"code_switch_penalty": True, "code_switch_margin": 10.0, "shaping": "zscore_tanh"}
    assert not job.notes
    with pytest.raises(CascadeUsageError, match="need cascade's agent and the reward service"):
        build_jobs(rl_stage(tmp_path, kind="rlhf", reward_model="rm", top_k=20, cluster=cluster(reward_urls=[])))


def test_unknown_and_ill_typed_flags_are_refused_like_openrlhf_does():
    for bad in (
        ["--actor.bogus_flag", "1"],
        ["--rollout.batch_size", "many"],
        ["--actor.loss_agg_mode", "seq-sum"],
    ):
        with pytest.raises(CascadeUsageError, match="openrlhf.cli.train_ppo_ray"):
            validate_args("train_ppo_ray", bad)
        with pytest.raises(SystemExit):  # and OpenRLHF's own parser refuses the same argv
            flagset.parse_like_openrlhf("train_ppo_ray", bad)
    # The pre-0.10.2 flat spelling is gone in 0.11.2.
    with pytest.raises(CascadeUsageError, match="unrecognized arguments: --pretrain"):
        validate_args("train_sft", ["--pretrain", "x"])


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"cluster": cluster(reward_urls=[])}, "missing reward source"),
        ({"cluster": cluster(reward_urls=["10.0.0.5:5000"])}, "expected an http"),
        ({"cluster": cluster(vllm_engines=4)}, "colocate_all needs vllm_engines"),
        ({"cluster": cluster(actor_gpus=32)}, "32 GPUs asked, the cluster has 16"),
        ({"cluster": cluster(actor_gpus=12)}, "must fill whole nodes"),
        (
            {"cluster": cluster(colocate_all=False, vllm_engines=8, actor_gpus=16)},
            "the roles need actor 16 \\+ vllm 8",
        ),
        ({"cluster": cluster(runtime_env_json="{not json")}, "runtime_env_json: expected a JSON object"),
        ({"init": None}, "init: missing"),
        ({"prompts_per_step": 1, "group_size": 8}, "8 samples per step is fewer than the 16 actor GPUs"),
        (
            {
                "kind": "rlhf",
                "reward_model": "rm",
                "dynamic_filter": True,
                "cluster": cluster(reward_urls=[]),
            },
            "dynamic_filter needs the reward service",
        ),
        ({"kind": "eval"}, "engine openrlhf runs kinds"),
    ],
)
def test_bad_input_is_refused_before_submission(tmp_path, values, message):
    with pytest.raises(CascadeUsageError, match=message):
        build_jobs(rl_stage(tmp_path, **values))


def test_dry_run_prints_commands_without_torch_or_ray(tmp_path):
    script = textwrap.dedent(f"""
        import sys
        from cascade_cli.config.sft import SFTConfig
        from cascade_cli.stage_kinds import run_config
        result = run_config(SFTConfig(engine="openrlhf", dry_run=True, data="d.jsonl", init="Qwen/Qwen3-8B-Base",
                                      out={str(tmp_path / "sft")!r}))
        assert result["dry_run"], result
        heavy = sorted(name for name in ("torch", "ray", "openrlhf", "transformers") if name in sys.modules)
        assert not heavy, heavy
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("python3 -m cascade_cli.engines.openrlhf.data sft ")
    assert "deepspeed --num_nodes 1 --num_gpus 8 --module openrlhf.cli.train_sft" in lines[1]
    assert not (tmp_path / "sft").exists()  # a dry run writes nothing


def test_module_entry_points(tmp_path, capsys):
    """`python -m ...flagset` (check mode) and `python -m ...data` (what `recipe plan` prints) work."""
    from cascade_cli.engines.openrlhf import data

    assert flagset.main([]) == 0 and "up to date" in capsys.readouterr().out
    source = tmp_path / "rows.jsonl"
    source.write_text(
        json.dumps({"id": "1", "source": "t", "domain": "math", "mode": "think", "prompt": "1+1?", "label": {"answer": "2"}}) + "\n"
    )
    assert (
        data.main(
            ["rlvr", str(source), str(tmp_path / "out.jsonl"), "--mode", "no_think", "--phase-samples", "2,3"]
        )
        == 0
    )
    assert [len((tmp_path / f"phase{k}.jsonl").read_text().splitlines()) for k in (0, 1)] == [2, 3]
    row = json.loads((tmp_path / "out.jsonl").read_text())
    assert row["prompt"] == [{"role": "user", "content": "1+1? /no_think"}]
    assert json.loads(row["label"]) == {"answer": "2", "domain": "math"}


def test_rl_init_with_a_foreign_chat_template_is_flagged(tmp_path):
    from cascade_cli.engines.openrlhf.runner import init_template_warning
    from cascade_cli.models.tiny import build_tokenizer

    tokenizer = build_tokenizer()
    tokenizer.save_pretrained(tmp_path / "ours")
    assert init_template_warning(rl_stage(tmp_path, init=str(tmp_path / "ours"))) is None
    tokenizer.chat_template = "{{ messages[0]['content'] }}"
    tokenizer.save_pretrained(tmp_path / "foreign")
    assert "not cascade's" in init_template_warning(rl_stage(tmp_path, init=str(tmp_path / "foreign")))


def test_rerun_reuses_finished_phases_without_contacting_ray(tmp_path):
    """A stage rerun skips the jobs its manifest says finished with the same command and output; only the
    rest is submitted (here: none, so the unreachable Ray address is never contacted)."""
    from cascade_cli.manifest import read_manifest, write_manifest
    rows = tmp_path / "math.jsonl"
    row = {"id": "1", "source": "t", "domain": "math", "mode": "think", "prompt": "1+1?", "label": {"answer": "2"}}
    rows.write_text(json.dumps(row) + "\n")
    config = rl_stage(tmp_path, data=str(rows), phases=[PhaseConfig(2, 1024, 1.0, True), PhaseConfig(1, 2048, 0.8, False)],
                      cluster=cluster(ray_address="http://127.0.0.1:9"))
    jobs = build_jobs(config)
    finished = []
    for index, job in enumerate(jobs):
        Path(job.output_dir).mkdir(parents=True, exist_ok=True)
        (Path(job.output_dir) / "config.json").write_text("{}")
        finished.append({"name": job.name, "job_id": f"j{index}", "status": "SUCCEEDED", "command": job.argv,
                         "output_dir": job.output_dir})
    write_manifest(config.out, stage="math_rl", kind="rlvr", config={}, init=None, status="failed",
                   extra={"openrlhf_jobs": finished})
    metrics = run_config(config)
    assert metrics["job_ids"] == ["j0", "j1"] and read_manifest(config.out)["status"] == "completed"
    config.lr = 3e-6  # another command: the finished jobs no longer count, so it must reach Ray (and fail)
    with pytest.raises((CascadeRunError, CascadeUsageError), match="ray"):  # no server / no ray installed
        run_config(config)


# ---- argv follows the typed config's fields (and nothing else) ----

REWARD_CLUSTER = {"reward_urls": ["http://10.0.0.5:5000/get_reward"]}


def expected_flags(config: Any, index: int = 0) -> dict[str, Any]:
    """The OpenRLHF values (by argparse dest) that job `index` of `config` must carry, computed here from the
    config's own fields (an RL phase's unset keys from the stage's top-level ones)."""
    if config.kind in ("sft", "reward_model"):
        global_batch = config.batch_size * (config.grad_accum if config.kind == "sft" else 1)
        flags = {
            "data.max_len": config.max_seq_len,
            "train.batch_size": global_batch,
            "train.max_epochs": max(1, math.ceil(config.epochs)),
            "train.seed": config.seed,
            "adam.lr": config.lr,
            "adam.betas": [config.beta1, config.beta2],
            "adam.weight_decay": config.weight_decay,
            "lr_warmup_ratio": config.warmup_ratio,
            "min_lr_ratio": config.min_lr / config.lr,
            "max_norm": config.max_grad_norm,
            "data.max_samples": config.max_steps * global_batch if config.max_steps else None,
            "ckpt.save_steps": (config.save_every if config.kind == "sft" else 0) or -1,
        }
        if config.kind == "sft":
            flags["ds.packing_samples"] = config.packing
        return flags
    phase = config.phases[index] if config.phases else PhaseConfig(config.steps)
    max_response_len = config.max_response_len if phase.max_response_len is None else phase.max_response_len
    temperature = config.temperature if phase.temperature is None else phase.temperature
    overlong = config.overlong_filter if phase.overlong_filter is None else phase.overlong_filter
    truncated = None if overlong or config.truncated_reward is None else config.truncated_reward
    return {
        "data.max_len": config.max_prompt_len + max_response_len,
        "data.max_samples": phase.steps * config.prompts_per_step,
        "rollout.max_new_tokens": max_response_len,
        "rollout.temperature": temperature,
        "rollout.top_p": config.top_p,
        "rollout.batch_size": config.prompts_per_step,
        "rollout.n_samples_per_prompt": config.group_size,
        "train.batch_size": config.prompts_per_step * config.group_size,
        "train.seed": config.seed,
        "algo.kl.init_coef": config.kl_coef,
        "algo.kl.use_loss": config.kl_coef > 0,
        "actor.loss_agg_mode": {"token": "token-mean", "sequence": "seq-mean-token-mean"}[config.loss_aggregation],
        "actor.adam.lr": config.lr,
        "actor.adam.betas": [config.beta1, config.beta2],
        "actor.adam.weight_decay": config.weight_decay,
        "actor.max_norm": config.max_grad_norm,
        "actor.entropy_coef": config.entropy_coef if config.entropy_coef > 0 else None,
        "algo.dynamic_filtering_enable": config.dynamic_filter,
        "reward.stop_properly_penalty_coef": truncated,
        "ckpt.save_steps": config.save_every or -1,
        "vllm.num_engines": config.cluster.vllm_engines,
    }


def assert_argv_follows_config(config: Any) -> list[Any]:
    jobs = build_jobs(config)
    assert len(jobs) == max(1, len(getattr(config, "phases", None) or []))
    for index, job in enumerate(jobs):
        parsed = vars(validate_args(job.cli, job.args))
        got = {dest: parsed[dest] for dest in expected_flags(config, index)}
        assert got == expected_flags(config, index), f"{config.name or config.kind} job {index}"
    return jobs


# Every field the argv carries, each given a default no class has, to stand for "a dataclass default changed".
CHANGED_DEFAULTS: dict[type, dict[str, Any]] = {
    SFTConfig: {
        "lr": 3.3e-5, "beta1": 0.81, "beta2": 0.97, "weight_decay": 0.02, "warmup_ratio": 0.07, "min_lr": 1.1e-6,
        "max_grad_norm": 0.7, "max_seq_len": 777, "batch_size": 12, "grad_accum": 3, "epochs": 2.5, "seed": 11,
        "packing": True, "max_steps": 5, "save_every": 9,
    },
    RewardModelConfig: {
        "lr": 3.3e-6, "beta1": 0.81, "beta2": 0.97, "weight_decay": 0.02, "warmup_ratio": 0.07, "min_lr": 1.1e-7,
        "max_grad_norm": 0.7, "max_seq_len": 777, "batch_size": 12, "epochs": 2.5, "seed": 11, "max_steps": 5,
    },
    RLVRConfig: {
        "lr": 3.3e-6, "beta1": 0.81, "beta2": 0.97, "weight_decay": 0.02, "max_grad_norm": 0.7, "steps": 7,
        "prompts_per_step": 24, "group_size": 6, "max_prompt_len": 333, "max_response_len": 444,
        "temperature": 0.77, "top_p": 0.88, "kl_coef": 0.002, "entropy_coef": 0.01, "truncated_reward": -0.5,
        "dynamic_filter": True, "save_every": 3, "seed": 5, "loss_aggregation": "sequence",
    },
}
CHANGED_DEFAULTS[RLHFConfig] = {**CHANGED_DEFAULTS[RLVRConfig], "truncated_reward": 0.25}
REQUIRED = {"domain": "math", "reward_model": "runs/x/rm", "data": "d.jsonl", "init": "Qwen/Qwen3-8B-Base"}


def with_defaults(config_class: type, changes: dict[str, Any]) -> type:
    """`config_class` with other field defaults (what editing the dataclass would do)."""
    return dataclasses.make_dataclass(
        f"Changed{config_class.__name__}", [(key, Any, value) for key, value in changes.items()], bases=(config_class,)
    )


@pytest.mark.parametrize("config_class", list(CHANGED_DEFAULTS), ids=lambda c: c.__name__)
@pytest.mark.parametrize("changed", [False, True], ids=["defaults", "changed-defaults"])
def test_argv_carries_the_dataclass_defaults(tmp_path, config_class, changed):
    """Built from the class defaults, every flag equals its field; change the defaults and every flag follows
    (an argv that kept its own number for a field fails here)."""
    cls = with_defaults(config_class, CHANGED_DEFAULTS[config_class]) if changed else config_class
    names = {f.name for f in dataclasses.fields(cls)}
    required = {key: value for key, value in REQUIRED.items() if key in names}
    if issubclass(cls, RLVRConfig):  # its reward_model is if_rm_bonus's on the local engine, not required here
        required.pop("reward_model")
    config = cls(engine="openrlhf", out=str(tmp_path / "out"), cluster=ClusterConfig(**REWARD_CLUSTER), **required)
    if changed:
        base = config_class(**required)
        assert all(getattr(config, key) != getattr(base, key) for key in CHANGED_DEFAULTS[config_class])
    assert_argv_follows_config(config)


def test_phases_take_unset_keys_from_the_stage(tmp_path):
    phases = [PhaseConfig(2), PhaseConfig(3, max_response_len=999, overlong_filter=True), PhaseConfig(1, temperature=0.5)]
    config = rl_stage(tmp_path, phases=phases, temperature=0.9, max_response_len=555, truncated_reward=-1.0)
    jobs = assert_argv_follows_config(config)
    assert [job.name for job in jobs] == ["math_rl/phase0", "math_rl/phase1", "math_rl/phase2"]
    with pytest.raises(CascadeUsageError, match=r"phases\[1\].steps: expected an integer >= 1, found 0"):
        build_jobs(rl_stage(tmp_path, phases=[PhaseConfig(2), PhaseConfig(0)]))


def test_a_structured_dictconfig_builds_the_same_jobs(tmp_path):
    config = rl_stage(tmp_path, phases=[PhaseConfig(2), PhaseConfig(3, max_response_len=999)])
    structured = OmegaConf.structured(config)
    assert [job.argv for job in build_jobs(structured)] == [job.argv for job in build_jobs(config)]


# ---- module structure: one-way imports, configs read by attribute ----

PACKAGE = Path(jobs.__file__).parent
MODULES = sorted(path.stem for path in PACKAGE.glob("*.py") if path.stem != "__init__")
PREFIX = "cascade_cli.engines.openrlhf"


def imported_modules(path: Path) -> set[str]:
    """Every module `path` imports, at any depth (function-local imports included)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)  # `from pkg import module`
    return names


def test_engine_modules_import_one_way():
    graph = {
        module: {name.split(".")[3] for name in imported_modules(PACKAGE / f"{module}.py") if name.startswith(f"{PREFIX}.")}
        & set(MODULES)
        for module in MODULES
    }
    order = list(graphlib.TopologicalSorter(graph).static_order())  # raises CycleError on a cycle
    assert set(order) == set(MODULES)
    assert not graph["validate"] & {"jobs", "runner"} and not graph["cluster"] and not graph["flagset"]
    everything = set().union(*(imported_modules(PACKAGE / f"{module}.py") for module in MODULES))
    assert not [name for name in everything if name.startswith(("cascade_cli.engines.local", "cascade_cli.cli"))]


@pytest.mark.parametrize("module", MODULES)
def test_each_engine_module_imports_alone(module):
    src = str(Path(jobs.__file__).parents[3])
    result = subprocess.run(
        [sys.executable, "-c", f"import {PREFIX}.{module}"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": src},
    )
    assert result.returncode == 0, result.stderr


def test_configs_are_read_by_attribute_not_by_name():
    """No `getattr(config, "name", default)` (or a helper like it) anywhere that reads a stage config; flagset
    reads argparse objects only."""
    for module in MODULES:
        if module == "flagset":
            continue
        tree = ast.parse((PACKAGE / f"{module}.py").read_text())
        calls = [
            node.func.id
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr", "_get")
        ]
        assert not calls, f"{module}.py reads by name: {calls}"


def test_lora_and_checkpointing_settings_become_openrlhf_flags(tmp_path):
    from cascade_cli.config.common import LoRAConfig
    from cascade_cli.config.grpo import RLVRConfig
    from cascade_cli.config.sft import SFTConfig
    from cascade_cli.engines.openrlhf.jobs import rlvr_jobs, sft_jobs

    sft = SFTConfig(init="tiny", data=str(tmp_path / "d.jsonl"), out=str(tmp_path / "o"), engine="openrlhf")
    (plain,) = sft_jobs(sft)
    assert "--model.gradient_checkpointing_enable" in plain.args and "--ds.lora.rank" not in plain.args
    sft.lora, sft.gradient_checkpointing = LoRAConfig(r=8, alpha=32, target_modules="q_proj,v_proj"), "false"
    (adapted,) = sft_jobs(sft)
    assert "--model.gradient_checkpointing_enable" not in adapted.args
    at = adapted.args.index("--ds.lora.rank")
    assert adapted.args[at : at + 9] == ["--ds.lora.rank", "8", "--ds.lora.alpha", "32", "--ds.lora.dropout", "0.0",
                                         "--ds.lora.target_modules", "q_proj", "v_proj"]
    rl = RLVRConfig(domain="math", init="tiny", data=str(tmp_path / "d.jsonl"), out=str(tmp_path / "r"),
                    engine="openrlhf", lora=LoRAConfig(r=4))
    rl.cluster.reward_urls = ["http://127.0.0.1:5000/get_reward"]
    job = rlvr_jobs(rl)[0]
    assert "--actor.gradient_checkpointing_enable" in job.args
    assert job.args[job.args.index("--ds.lora.rank") + 1] == "4"
