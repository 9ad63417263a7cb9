"""recipes/smol.yaml and recipes/smol-if.yaml: they validate and plan, and a shortened smol run (a few rows
and one or two steps per stage, every stage kind, the four real benchmarks on two problems each) completes on
the real SmolLM2-135M-Instruct and writes the report.

The model is the embedded `smollm2-135m` (converted once into the cascade cache by conftest's `smollm2_dir`).
The shortened run is `slow`: every stage kind on the real model takes a few minutes on two cores."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from cascade_cli.manifest import read_manifest
from cascade_cli.recipe.loader import load_recipe

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("real_gains", ROOT / "benchmarks" / "real_gains.py")
real_gains = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(real_gains)
# One or two steps of every stage on a few rows: the shape of the real run, in about a minute.
SHORT = [
    "stages.data_sft_math.limit=6",
    "stages.data_sft_code.keep_ids=[601-604]",
    "stages.data_sft.limit=6",
    "stages.data_pref.limit=24",
    "stages.data_pref.holdout=6",
    "stages.data_chat.limit=60",
    "stages.data_chat.holdout=2",
    "stages.data_if_seed.limit=4",
    "stages.data_if.limit=10",
    "stages.data_if.holdout=2",
    "stages.data_math.offset=6",
    "stages.data_math.limit=12",
    "stages.data_math.holdout=2",
    "stages.data_code.keep_ids=[511-520]",
    "stages.data_code.holdout=2",
    "stages.sft.max_steps=2",
    "stages.sft.batch_size=2",
    "stages.sft.max_seq_len=256",
    "stages.sft.eval_limit=2",
    "stages.sft.eval_max_new_tokens=8",
    "stages.rm.max_steps=2",
    "stages.rm.batch_size=4",
    "stages.rm.micro_batch=4",
    "stages.rm.max_seq_len=128",
    *(f"stages.{name}.{key}" for name in ("rlhf", "if_rl", "math_rl", "code_rl")
      for key in ("steps=1", "prompts_per_step=2", "group_size=2", "max_response_len=8", "eval_limit=2",
                  "eval_max_new_tokens=8")),
    "stages.rlhf.rm_max_len=256",
    "eval.limit=2",
    "eval.max_tokens=8",
]  # fmt: skip


@pytest.fixture
def smol_model(smollm2_dir: Path) -> Path:
    return smollm2_dir


@pytest.mark.parametrize("name", ["smol", "smol-if", "smol-if-rm"])
def test_smol_recipes_validate_and_plan(cli, name: str, shared_data: Path):
    assert cli(["recipe", "validate", str(ROOT / "recipes" / f"{name}.yaml")]).exit_code == 0
    result = cli(["recipe", "plan", str(ROOT / "recipes" / f"{name}.yaml")])
    assert result.exit_code == 0, result.output
    assert "cascade rlvr --domain if" in result.output and "shared:real/prompts/" in result.output
    assert "--benchmarks ifeval" in result.output
    if name == "smol-if-rm":  # IF-RL with the bonus, scored by the reward model the recipe trains first
        assert "cascade rlhf rm --init smollm2-135m" in result.output
        assert "if_rm_bonus=true reward_model=runs/smol-if-rm/rm" in result.output


def test_smol_recipe_stages_and_splits():
    recipe = load_recipe(str(ROOT / "recipes" / "smol.yaml"))
    kinds = [stage.kind.kind for stage in recipe.stages if stage.kind.kind != "prepare_data"]
    assert kinds == ["sft", "reward_model", "rlhf", "rlvr", "rlvr", "rlvr"]
    assert [stage.config.domain for stage in recipe.stages if stage.kind.kind == "rlvr"] == ["if", "math", "code"]
    assert recipe.recipe.model == "smollm2-135m"
    assert list(recipe.eval.benchmarks) == ["ifeval", "gsm8k", "mbpp", "humaneval"]
    sources = {stage.name: stage.config.source for stage in recipe.stages if stage.kind.kind == "prepare_data"}
    assert not any("test.jsonl" in source and "gsm8k" in source for source in sources.values())  # GSM8K test: eval only
    code_ids = {stage.name: list(stage.config.keep_ids) for stage in recipe.stages if "mbpp" in getattr(stage.config, "source", "")}
    assert code_ids == {"data_sft_code": ["601-800"], "data_code": ["511-600", "801-974"]}  # never 11-510


@pytest.mark.slow
def test_shortened_smol_run_on_the_real_model(cli, tmp_path: Path, smol_model: Path, shared_data: Path):
    run_dir = tmp_path / "smol"
    overrides = [f"model={smol_model}", f"run_dir={run_dir}", *SHORT]
    result = cli(["recipe", "run", str(ROOT / "recipes" / "smol.yaml"), *overrides])
    assert result.exit_code == 0, result.output
    run = json.loads((run_dir / "run.json").read_text())
    assert all(run["stages"][name]["status"] == "completed" for name in run["stage_order"])
    assert read_manifest(run_dir / "rm")["metrics"]["heldout_pairs"] == 6
    if_rows = [json.loads(line) for line in (run_dir / "data_if" / "data.jsonl").read_text().splitlines()]
    assert if_rows and all(row["domain"] == "if" and row["label"]["instruction_id_list"] for row in if_rows)
    for stage in ("base", "sft", "rlhf", "if_rl", "math_rl", "code_rl"):
        results = json.loads((run_dir / "eval" / stage / "results.json").read_text())
        assert set(results["benchmarks"]) == {"ifeval", "gsm8k", "mbpp", "humaneval"}
    assert (run_dir / "report.md").is_file()
    # benchmarks/real_gains.py reads the same outputs: per-problem scores, intervals, the RM's accuracy
    table = real_gains.seed_table(run_dir)
    assert table["stages"][0] == "base" and table["stages"][-1] == "code_rl"
    ifeval = table["benchmarks"]["ifeval"]
    assert ifeval[0]["n"] == 2 and ifeval[1]["ci"][0] <= ifeval[1]["score"] <= ifeval[1]["ci"][1]
    assert "delta" in ifeval[1] and "heldout_accuracy" in table["facts"]["rm"]
    real_gains.plot({0: table}, tmp_path / "gains.png", "shortened smol")
    assert (tmp_path / "gains.png").stat().st_size > 10_000


def test_real_gains_plots_every_benchmark_and_seed(tmp_path: Path):
    def rows(scores: list[float]) -> list[dict]:
        return [{"stage": stage, "n": 541, "score": score, "ci": [score - 3, score + 3]}
                for stage, score in zip(["base", "if_rl"], scores, strict=True)]

    tables = {seed: {"stages": ["base", "if_rl"], "benchmarks": {"ifeval": rows([17.9, 20.0 + seed]),
                                                                 "ifbench": rows([10.7, 11.0])}}
              for seed in (0, 1)}
    real_gains.plot(tables, tmp_path / "gains.png", "smol-if")
    from PIL import Image

    with Image.open(tmp_path / "gains.png") as image:
        assert image.width > 3 * image.height  # two benchmarks and the response lengths side by side


def test_real_gains_gives_the_held_out_reward_change_an_interval(tmp_path: Path):
    """An RL stage's heldout_rows.jsonl (each held-out row's greedy reward before and after) gives the mean
    change with a paired 95% bootstrap interval, in the reward's own units."""
    stage = tmp_path / "rlhf"
    stage.mkdir()
    (stage / "cascade_stage.json").write_text(json.dumps({"kind": "rlhf", "metrics": {"heldout_n": 4}}))
    rows = [{"reward_before": b, "reward_after": a} for b, a in ((0.0, 0.5), (0.1, 0.4), (-0.2, 0.3), (0.3, 0.3))]
    (stage / "heldout_rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    change = real_gains.stage_facts(tmp_path, "rlhf")["heldout_reward_change"]
    mean, interval = change.split(" ", 1)
    assert mean == "+0.325"  # (0.5 + 0.3 + 0.5 + 0.0) / 4
    low, high = (float(x) for x in interval.strip("[]").split(", "))
    assert 0.0 <= low < 0.325 < high <= 0.5


@pytest.mark.slow
def test_shortened_smol_if_rm_run_trains_the_reward_model_then_if_rl_with_its_bonus(
    cli, tmp_path: Path, smol_model: Path, shared_data: Path
):
    run_dir = tmp_path / "smol-if-rm"
    short = [
        "stages.data_pref.limit=24", "stages.data_pref.holdout=6", "stages.data_if_seed.limit=4",
        "stages.data_if.limit=10", "stages.data_if.holdout=2", "stages.rm.max_steps=2", "stages.rm.batch_size=4",
        "stages.rm.micro_batch=4", "stages.rm.max_seq_len=128", "stages.if_rl.steps=1",
        "stages.if_rl.prompts_per_step=2", "stages.if_rl.group_size=2", "stages.if_rl.max_response_len=8",
        "stages.if_rl.eval_limit=2", "stages.if_rl.eval_max_new_tokens=8", "stages.if_rl.dynamic_filter=false",
        "eval.limit=2", "eval.max_tokens=8",
    ]  # fmt: skip
    result = cli(["recipe", "run", str(ROOT / "recipes" / "smol-if-rm.yaml"), f"model={smol_model}",
                  f"run_dir={run_dir}", *short])  # fmt: skip
    assert result.exit_code == 0, result.output
    run = json.loads((run_dir / "run.json").read_text())
    assert all(run["stages"][name]["status"] == "completed" for name in run["stage_order"])
    manifest = read_manifest(run_dir / "if_rl")
    assert manifest["config"]["if_rm_bonus"] is True and manifest["config"]["reward_model"] == str(run_dir / "rm")
    assert "hack_flags" in run["report"] and (run_dir / "report.md").is_file()
