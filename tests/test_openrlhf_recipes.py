"""recipes/nemotron8b.yaml and recipes/nemotron14b.yaml hold the paper's numbers (tests/data/paper_numbers.yaml),
and `cascade recipe plan` prints the whole OpenRLHF command sequence for them."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from cascade_cli.engines.openrlhf import flagset, launch
from cascade_cli.recipe.loader import load_recipe

REPO = Path(__file__).resolve().parents[1]
PAPER = OmegaConf.to_container(OmegaConf.load(REPO / "tests" / "data" / "paper_numbers.yaml"))
RECIPES = ("nemotron8b", "nemotron14b")


def recipe_stages(name: str) -> dict:
    raw = OmegaConf.to_container(OmegaConf.load(REPO / "recipes" / f"{name}.yaml"), resolve=False)
    return raw


@pytest.mark.parametrize("name", RECIPES)
def test_recipe_numbers_are_the_papers(name):
    recipe = recipe_stages(name)
    expected = PAPER[name]
    assert recipe["model"] == expected["model"]
    stages = recipe["stages"]
    training = [stage for stage, values in stages.items() if values["kind"] != "prepare_data"]
    assert training == list(expected["stages"]), "the cascade's stages, in the paper's order"
    for stage, numbers in expected["stages"].items():
        values = stages[stage]
        assert values.get("engine") == "openrlhf", stage
        phases = values.get("phases") or []
        for key, want in numbers.items():
            if key == "total_steps":
                got = sum(phase["steps"] for phase in phases)
            elif key.startswith(("first_", "last_")):
                position, _, field = key.partition("_")
                got = phases[0 if position == "first" else -1].get(field, values.get(field))
            else:
                got = values.get(key)
            assert got == want, f"{name}: stages.{stage}.{key}: recipe {got!r}, paper {want!r}"


@pytest.mark.parametrize("name", RECIPES)
def test_recipe_uses_released_datasets_and_cluster_variables(name):
    recipe = recipe_stages(name)
    sources = {values["source"] for values in recipe["stages"].values() if values["kind"] == "prepare_data"}
    for hub_id in (
        "nvidia/Nemotron-Cascade-SFT-Stage-1",
        "nvidia/Nemotron-Cascade-SFT-Stage-2",
        "nvidia/Nemotron-Cascade-RL-Instruction-Following",
        "nvidia/Nemotron-Cascade-RL-Math",
        "nvidia/Nemotron-Cascade-RL-SWE",
    ):
        assert hub_id in sources
    cluster = recipe["defaults"]["cluster"]
    assert (
        cluster["nodes"] * cluster["gpus_per_node"]
        == cluster["vllm_engines"] * cluster["vllm_tensor_parallel_size"]
    )


@pytest.mark.parametrize("name", RECIPES)
def test_recipe_plan_prints_the_whole_openrlhf_sequence(name, cli):
    result = cli(["recipe", "plan", f"recipes/{name}.yaml"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    submits = [shlex.split(line) for line in lines if line.startswith("ray job submit")]
    expected = PAPER[name]["stages"]
    recipe = recipe_stages(name)["stages"]
    jobs_per_stage = {stage: max(1, len(recipe[stage].get("phases", []))) for stage in expected}
    assert len(submits) == sum(jobs_per_stage.values())
    for argv in submits:  # every emitted command parses with OpenRLHF's own argparse + validation
        module, args = launch.split_entrypoint(argv[argv.index("--") + 1 :])
        flagset.parse_like_openrlhf(module.rsplit(".", 1)[1], args)
    conversions = [line for line in lines if line.startswith("python3 -m cascade_cli.engines.openrlhf.data")]
    assert len(conversions) == len(expected)

    def stage_of(argv: list[str]) -> str:
        data_flag = "--data.prompt_dataset" if "--data.prompt_dataset" in argv else "--data.dataset"
        return Path(argv[argv.index(data_flag) + 1]).parents[1].name

    def value(argv: list[str], flag: str) -> str:
        return argv[argv.index(flag) + 1]

    assert [stage_of(argv) for argv in submits] == [s for s in expected for _ in range(jobs_per_stage[s])]
    # The math schedule is consecutive jobs chained by checkpoint; the next stage starts from its output.
    math_jobs = [argv for argv in submits if stage_of(argv) == "math_rl"]
    phases = expected["math_rl"]["phases"]
    assert [int(value(argv, "--rollout.max_new_tokens")) for argv in math_jobs] == [
        p["max_response_len"] for p in phases
    ]
    assert [float(value(argv, "--rollout.temperature")) for argv in math_jobs] == [
        p["temperature"] for p in phases
    ]
    for before, after in zip(math_jobs, math_jobs[1:], strict=False):
        assert value(after, "--actor.model_name_or_path") == value(before, "--ckpt.output_dir")
    code = next(argv for argv in submits if stage_of(argv) == "code_rl")
    assert value(code, "--actor.model_name_or_path") == value(math_jobs[-1], "--ckpt.output_dir")
    rlhf = next(argv for argv in submits if stage_of(argv) == "rlhf")
    sft_32k = next(argv for argv in submits if stage_of(argv) == "sft_32k")
    assert value(rlhf, "--actor.model_name_or_path") == value(sft_32k, "--ckpt.output_dir")
    # RLHF's reward is the reward service's RM (`--reward-model`), reached through cascade's agent file, which
    # the plan writes right before the job; no stage leaves a paper setting as a note.
    agent = value(rlhf, "--train.agent_func_path")
    writes = [shlex.split(line) for line in lines if line.startswith("python3 -m cascade_cli.engines.openrlhf.agent_file")]
    settings = next(json.loads(argv[4]) for argv in writes if argv[3] == agent)
    assert settings["reward_options"]["code_switch_penalty"] and settings["reward_urls"]
    assert not [line for line in lines if line.startswith("# note:")]


def test_recipe_run_dispatches_openrlhf_stages_to_the_engine(tmp_path, cli):
    """`engine: openrlhf` in a recipe reaches run_openrlhf_stage through the kind registry (dry run here)."""
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"name: r\nmodel: Qwen/Qwen3-8B-Base\nrun_dir: {tmp_path / 'run'}\nstages:\n"
        "  sft:\n    kind: sft\n    engine: openrlhf\n    dry_run: true\n    data: rows.jsonl\n    max_seq_len: 16384\n"
    )
    result = cli(["recipe", "run", str(recipe)])
    assert result.exit_code == 0, result.output
    assert "deepspeed --num_nodes 1 --num_gpus 8 --module openrlhf.cli.train_sft" in result.stdout
    assert "--data.max_len 16384" in result.stdout
    recipe.write_text(recipe.read_text().replace("engine: openrlhf", "engine: slurm"))
    result = cli(["recipe", "run", str(recipe)])
    assert result.exit_code == 2 and "stages.sft.engine: expected one of local, openrlhf; found 'slurm'" in result.output


def test_training_commands_take_engine_and_dry_run(cli, tmp_path):
    result = cli(
        [
            "rlvr",
            "--domain",
            "math",
            "--init",
            "Qwen/Qwen3-8B-Base",
            "--data",
            tmp_path / "m.jsonl",
            "--out",
            tmp_path / "math_rl",
            "--engine",
            "openrlhf",
            "--dry-run",
            "cluster.reward_urls=[http://10.0.0.5:5000/get_reward]",
            "steps=10",
            "max_response_len=24576",
        ]
    )
    assert result.exit_code == 0, result.output
    submit = next(line for line in result.stdout.splitlines() if line.startswith("ray job submit"))
    assert "openrlhf.cli.train_ppo_ray" in submit and "--rollout.max_new_tokens 24576" in submit
    assert (
        "--reward.remote_url http://10.0.0.5:5000/get_reward" in submit
        and not (tmp_path / "math_rl").exists()
    )
    result = cli(
        [
            "sft",
            "--init",
            "Qwen/Qwen3-8B-Base",
            "--data",
            tmp_path / "s.jsonl",
            "--out",
            tmp_path / "sft",
            "--engine",
            "openrlhf",
            "--dry-run",
        ]
    )
    assert result.exit_code == 0 and "openrlhf.cli.train_sft" in result.stdout
    result = cli(
        [
            "rlvr",
            "--domain",
            "math",
            "--init",
            "Qwen/Qwen3-8B-Base",
            "--data",
            tmp_path / "m.jsonl",
            "--out",
            tmp_path / "math_rl",
            "--engine",
            "openrlhf",
            "--dry-run",
        ]
    )
    assert result.exit_code == 2 and "missing reward source" in result.output
    result = cli(
        ["sft", "--init", "tiny", "--data", tmp_path / "s.jsonl", "--out", tmp_path / "sft", "--dry-run"]
    )
    assert result.exit_code == 2 and "only engine openrlhf has a dry run" in result.output


@pytest.mark.parametrize("name", RECIPES)
def test_every_stage_argv_equals_its_typed_config(name):
    """Each OpenRLHF job of the recipe carries its stage config's values (lr, betas, prompts_per_step x steps,
    response lengths, temperatures, ...), read from the config class the recipe loader built."""
    from test_openrlhf_argv import assert_argv_follows_config

    recipe = load_recipe(str(REPO / "recipes" / f"{name}.yaml"))
    stages = [stage for stage in recipe.stages if stage.config.engine == "openrlhf"]
    assert {stage.kind.kind for stage in stages} == {"sft", "reward_model", "rlhf", "rlvr"}
    for stage in stages:
        assert type(stage.config) is stage.kind.config_class()
        assert_argv_follows_config(stage.config)
