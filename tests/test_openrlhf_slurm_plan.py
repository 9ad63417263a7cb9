"""`cascade recipe plan --launcher slurm`: one sbatch script per OpenRLHF job of the paper recipes. Every script
passes `bash -n`; the OpenRLHF flags each one hands its trainer, read back by bash itself (the TRAINER_ARGS
array), pass OpenRLHF 0.11.2's own argparse and validation (flagset.parse_like_openrlhf, as the Ray plan's).
Running them under a real Slurm: tests/test_openrlhf_slurm_run.py."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from cascade_cli.chat import CHAT_TEMPLATE
from cascade_cli.engines.openrlhf import flagset, launch

pytest.importorskip("openrlhf", reason="the real OpenRLHF source: pip install --no-deps openrlhf==0.11.2")

REPO = Path(__file__).resolve().parents[1]
SLURM_KEYS = [
    "defaults.cluster.slurm_partition=gpu",
    "defaults.cluster.slurm_account=proj42",
    "defaults.cluster.slurm_time=2-00:00:00",
    "defaults.cluster.slurm_container=nvcr.io#nvidia/pytorch:25.02-py3",
]


def trainer_args(script: Path, token: str = "tok") -> list[str]:
    """The TRAINER_ARGS array as bash builds it (CASCADE_REWARD_TOKEN set, as where the script runs)."""
    line = next(line for line in script.read_text().splitlines() if line.startswith("TRAINER_ARGS=("))
    result = subprocess.run(
        ["bash", "-c", 'eval "$1"; printf "%s\\0" "${TRAINER_ARGS[@]}"', "bash", line],
        capture_output=True,
        text=True,
        check=True,
        env={"CASCADE_REWARD_TOKEN": token, "PATH": "/usr/bin:/bin"},
    )
    return result.stdout.split("\0")[:-1]


def trainer_module(script: Path) -> str:
    text = script.read_text()
    return re.search(r"(?:-m|python3 -m) (openrlhf\.cli\.\w+)", text.split("TRAINER_ARGS=(", 1)[1]).group(1)


@pytest.mark.parametrize("name", ["nemotron8b", "nemotron14b"])
def test_slurm_plan_scripts_parse_and_carry_openrlhf_commands(name, cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "plan"
    result = cli(
        [
            "recipe",
            "plan",
            str(REPO / "recipes" / f"{name}.yaml"),
            "--launcher",
            "slurm",
            "--out",
            str(out),
            *SLURM_KEYS,
        ]
    )
    assert result.exit_code == 0, result.output
    # The Ray plan of the same recipe: the same jobs, the same OpenRLHF flags.
    ray_plan = cli(["recipe", "plan", str(REPO / "recipes" / f"{name}.yaml")])
    submits = [
        shlex.split(line) for line in ray_plan.stdout.splitlines() if line.startswith("ray job submit")
    ]
    scripts = sorted(out.glob("*.sbatch"))
    jobs = [script for script in scripts if "TRAINER_ARGS=(" in script.read_text()]
    assert len(jobs) == len(submits) > 0
    for script in [*scripts, out / "submit.sh"]:
        check = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert check.returncode == 0, f"{script.name}: {check.stderr}"
    for script, submit in zip(jobs, submits, strict=True):
        module, args = trainer_module(script), trainer_args(script, token="")
        try:
            flagset.parse_like_openrlhf(module.rsplit(".", 1)[1], args)
        except SystemExit as error:
            pytest.fail(f"{script.name}: OpenRLHF's argparse refused it: exit {error.code}")
        assert (module, args) == launch.split_entrypoint(submit[submit.index("--") + 1 :]), script.name
        text = script.read_text()
        assert "#SBATCH --partition=gpu" in text and "#SBATCH --account=proj42" in text
        assert (
            "#SBATCH --time=2-00:00:00" in text
            and "--container-image='nvcr.io#nvidia/pytorch:25.02-py3'" in text
        )
        assert "#SBATCH --nodes=8" in text and "#SBATCH --gpus-per-node=8" in text
        if module == "openrlhf.cli.train_ppo_ray":  # a Ray cluster on the allocation, the job submitted to it
            assert "ray start --head" in text and 'ray start --block --address="$HEAD_IP:$RAY_PORT"' in text
            assert "ray job submit" in text and "torchrun" not in text
        else:  # one torchrun per node, the node rank from each srun task
            assert '--kill-on-bad-exit=1 --nodes="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 bash -c' in text
            assert 'exec torchrun --nnodes 8 --nproc_per_node 8 --node_rank "$SLURM_NODEID"' in text
            assert (
                args[args.index("--data.tokenizer_chat_template") + 1] == CHAT_TEMPLATE
            )  # intact through bash
    submit_lines = (out / "submit.sh").read_text()
    assert submit_lines.index(scripts[0].name) < submit_lines.index(scripts[-1].name)
    assert "--dependency=afterok:$previous" in submit_lines


def test_reward_token_stays_a_reference_the_job_expands(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CASCADE_REWARD_TOKEN", "s3cret")
    out = tmp_path / "plan"
    result = cli(
        [
            "recipe",
            "plan",
            str(REPO / "recipes" / "nemotron8b.yaml"),
            "--launcher",
            "slurm",
            "--out",
            str(out),
            "--only",
            "math_rl",
        ]
    )
    assert result.exit_code == 0, result.output
    scripts = sorted(out.glob("*.sbatch"))
    assert len(scripts) == 3  # math RL: one job per phase of its length schedule
    for script in scripts:  # the token is read where the job runs, never written into a script
        assert "s3cret" not in script.read_text() and "$CASCADE_REWARD_TOKEN" in script.read_text()


def test_slurm_needs_an_out_directory_and_recipe_run_refuses_it(cli, tmp_path):
    recipe = REPO / "recipes" / "nemotron8b.yaml"
    result = cli(["recipe", "plan", str(recipe), "--launcher", "slurm"])
    assert (
        result.exit_code == 2 and "--out: --launcher slurm writes one sbatch script per job" in result.output
    )
    result = cli(["recipe", "plan", str(recipe), "--launcher", "pbs"])
    assert (
        result.exit_code == 2
        and "--launcher: expected one of ray, slurm, hostfile, found 'pbs'" in result.output
    )
    data = tmp_path / "s.jsonl"
    data.write_text(
        '{"id": "1", "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}\n'
    )
    result = cli(
        [
            "sft",
            "--init",
            "Qwen/Qwen3-8B-Base",
            "--data",
            str(data),
            "--out",
            str(tmp_path / "sft"),
            "--engine",
            "openrlhf",
            "cluster.launcher=slurm",
            "cluster.nodes=2",
        ]
    )
    assert result.exit_code == 2 and "cascade recipe plan RECIPE --launcher slurm --out DIR" in result.output
    assert len(result.output.strip().splitlines()) == 1
