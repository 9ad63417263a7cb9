"""`openrlhf.extra_args`: OpenRLHF flags passed through to the jobs as written, parsed by OpenRLHF 0.11.2's own
argparse (built from its real source), and refused with a did-you-mean when OpenRLHF has no such flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from cascade_cli.config.build import build_stage_config
from cascade_cli.config.grpo import RLVRConfig
from cascade_cli.config.sft import SFTConfig
from cascade_cli.engines.openrlhf import flagset
from cascade_cli.engines.openrlhf.extra_args import check_flags
from cascade_cli.errors import CascadeUsageError
from cascade_cli.stage_kinds import build_openrlhf_jobs, get_kind

pytest.importorskip("openrlhf", reason="the real OpenRLHF source: pip install --no-deps openrlhf==0.11.2")


def _sft(tmp_path: Path, *overrides: str) -> SFTConfig:
    values = {
        "engine": "openrlhf",
        "init": "Qwen/Qwen3-8B-Base",
        "data": "d.jsonl",
        "out": str(tmp_path / "sft"),
    }
    return build_stage_config(SFTConfig, values, list(overrides), where="sft")


def _rlvr(tmp_path: Path, *overrides: str) -> RLVRConfig:
    values = {
        "engine": "openrlhf",
        "init": "Qwen/Qwen3-8B-Base",
        "data": "d.jsonl",
        "out": str(tmp_path / "rl"),
        "domain": "math",
    }
    urls = "cluster.reward_urls=[http://10.0.0.5:5000/get_reward]"
    return build_stage_config(RLVRConfig, values, [urls, *overrides], where="rlvr")


def test_extra_args_reach_the_sft_job_as_written_and_openrlhf_parses_them(tmp_path):
    config = _sft(tmp_path, "openrlhf.extra_args=[--ds.zero_stage 3,--adam.lr=2e-6,--data.max_samples,500]")
    get_kind("sft").check(config)
    (job,) = build_openrlhf_jobs(config)
    assert job.args[-5:] == ["--ds.zero_stage", "3", "--adam.lr=2e-6", "--data.max_samples", "500"]
    args = flagset.parse_like_openrlhf(job.cli, job.args)  # OpenRLHF's own parser and assertions
    assert args.ds.zero_stage == 3 and args.data.max_samples == 500
    assert args.adam.lr == 2e-6  # given twice: the later (the user's) wins, as argparse does


def test_extra_args_reach_every_rl_job(tmp_path):
    config = _rlvr(tmp_path, "openrlhf.extra_args=[--vllm.gpu_memory_utilization,0.6]")
    get_kind("rlvr").check(config)
    for job in build_openrlhf_jobs(config):
        assert job.args[-2:] == ["--vllm.gpu_memory_utilization", "0.6"]
        assert flagset.parse_like_openrlhf(job.cli, job.args).vllm.gpu_memory_utilization == 0.6


def test_unknown_flag_is_refused_with_a_did_you_mean(tmp_path):
    config = _rlvr(tmp_path, "openrlhf.extra_args=[--vllm.gpu_memory_utilisation,0.6]")
    with pytest.raises(CascadeUsageError) as caught:
        get_kind("rlvr").check(config)
    assert str(caught.value) == (
        "openrlhf.extra_args: --vllm.gpu_memory_utilisation is not a flag of openrlhf.cli.train_ppo_ray (0.11.2); "
        "did you mean --vllm.gpu_memory_utilization?"
    )
    with pytest.raises(CascadeUsageError, match="is not a flag of openrlhf.cli.train_sft"):
        check_flags("train_sft", ["--vllm.gpu_memory_utilization", "0.6"])  # a PPO flag on the SFT CLI


def test_bad_values_and_stray_words_are_refused(tmp_path):
    with pytest.raises(CascadeUsageError, match=r"openrlhf.extra_args: .*--ds.zero_stage.*invalid int value"):
        check_flags("train_sft", ["--ds.zero_stage", "three"])
    with pytest.raises(CascadeUsageError, match=r"expected a --flag first; found '3'"):
        check_flags("train_sft", ["3", "--ds.zero_stage"])


def test_cli_exits_2_on_a_typo(tmp_path, cli):
    result = cli(
        ["sft", "--init", "tiny", "--data", tmp_path / "d.jsonl", "--out", tmp_path / "o", "--engine", "openrlhf",
         "--dry-run", "openrlhf.extra_args=[--ds.zero_stag,3]"]
    )  # fmt: skip
    assert result.exit_code == 2
    assert "did you mean --ds.zero_stage?" in result.output
