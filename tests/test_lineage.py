"""Lineage (`best:BENCHMARK`): resolved from a run's evaluation results, printed by `recipe plan` as paths,
checked at load time; `cascade report` stars each benchmark's best stage."""

from __future__ import annotations

import json
from pathlib import Path

from cascade_cli.recipe import lineage
from cascade_cli.recipe.loader import load_recipe
from cascade_cli.recipe.runner import stage_fingerprints

# stage -> (tiny_if, tiny_math, tiny_code, tiny_swe) scores of a made-up run of recipes/tiny.yaml
SCORES = {
    "base": (9.4, 0.0, 0.0, 0.0),
    "sft": (20.0, 30.0, 68.0, 1.0),
    "rlhf": (25.0, 31.0, 60.0, 1.0),
    "if_rl": (40.0, 31.0, 28.9, 1.0),
    "math_rl": (38.0, 45.0, 30.0, 1.0),
    "code_rl": (40.0, 44.0, 57.0, 2.0),  # ties if_rl on tiny_if: the later stage wins
    "swe_rl": (39.0, 43.0, 55.0, 6.0),
    "distill": (99.0, 99.0, 99.0, 99.0),  # the stage itself: never its own teacher
}
BENCHMARKS = ("tiny_if", "tiny_math", "tiny_code", "tiny_swe")


def write_results(run_dir: Path, stages: dict[str, tuple[float, ...]] = SCORES) -> None:
    for stage, scores in stages.items():
        folder = run_dir / "eval" / stage
        folder.mkdir(parents=True, exist_ok=True)
        benchmarks = {name: {"score": score, "primary": "avg@4"} for name, score in zip(BENCHMARKS, scores, strict=True)}
        (folder / "results.json").write_text(json.dumps({"benchmarks": benchmarks}))


def test_best_benchmark_resolves_to_the_best_earlier_stage_and_plan_prints_the_paths(tmp_path, cli):
    run_dir = tmp_path / "run"
    write_results(run_dir)
    # The recipe's code teacher is its code RL stage; best:tiny_code here exercises an earlier stage winning.
    result = cli(["recipe", "plan", "tiny", f"run_dir={run_dir}", "--only", "distill",
                  "stages.distill.teachers.code=best:tiny_code"])
    assert result.exit_code == 0, result.output
    assert f"teachers.if = best:tiny_if -> {run_dir}/code_rl (stage code_rl, tiny_if 40.0)" in result.output
    assert f"teachers.math = best:tiny_math -> {run_dir}/math_rl (stage math_rl, tiny_math 45.0)" in result.output
    assert f"teachers.code = best:tiny_code -> {run_dir}/sft (stage sft, tiny_code 68.0)" in result.output
    command = next(line for line in result.output.splitlines() if line.startswith("cascade distill"))
    assert f"--teachers if={run_dir}/code_rl --teachers math={run_dir}/math_rl" in command
    assert f"--teachers code={run_dir}/sft --teachers swe={run_dir}/swe_rl" in command
    assert "best:" not in command


def test_without_results_plan_keeps_the_reference_and_run_stops_with_exit_2(tmp_path, cli):
    run_dir = tmp_path / "empty"
    result = cli(["recipe", "plan", "tiny", f"run_dir={run_dir}", "--only", "distill"])
    assert result.exit_code == 0, result.output
    assert "teachers.if = best:tiny_if: resolved when the run reaches this stage" in result.output
    assert "--teachers if=best:tiny_if" in result.output
    ran = cli(["recipe", "run", "tiny", f"run_dir={run_dir}", "--only", "distill"])
    assert ran.exit_code == 2
    message = " ".join(ran.output.split())
    assert (f"stages.distill.teachers.if: best:tiny_if: no stage before distill has tiny_if results in {run_dir}/eval "
            "(run the earlier stages first)") in message
    ran = cli(["recipe", "run", "tiny", f"run_dir={run_dir}", "--only", "distill", "eval.after_each_stage=false"])
    assert ran.exit_code == 2 and "(eval.after_each_stage is off)" in " ".join(ran.output.split())


def test_a_reference_to_a_benchmark_the_recipe_does_not_evaluate_fails_at_load(cli):
    result = cli(["recipe", "validate", "tiny", "stages.distill.teachers.math=best:gsm8k"])
    assert result.exit_code == 2
    assert "stages.distill.teachers.math: best:gsm8k: expected one of eval.benchmarks" in " ".join(result.output.split())
    # Without the evaluations the recipe loads (its other stages run) and stops at the stage that needs them.
    assert cli(["recipe", "validate", "tiny", "eval.after_each_stage=false"]).exit_code == 0


def test_resolved_teachers_and_data_are_inputs_of_the_stage_fingerprint(tmp_path):
    run_dir = tmp_path / "run"
    write_results(run_dir)
    recipe = load_recipe("tiny", [f"run_dir={run_dir}"])
    stage, notes = lineage.resolve(recipe, recipe.stage("distill"))
    assert stage.config.teachers["swe"] == f"{run_dir}/swe_rl" and len(notes) == 2  # if and math are best:
    inputs = stage_fingerprints(stage)[1]
    assert {"teachers.if", "teachers.swe", "data.0", "data.3", "eval_data.0", "init"} <= set(inputs)
    # Another best stage changes the stage's fingerprint (so `recipe run` trains it again).
    write_results(run_dir, {"math_rl": (50.0, 45.0, 30.0, 1.0)})
    moved = lineage.resolve(recipe, recipe.stage("distill"))[0]
    assert moved.config.teachers["if"] == f"{run_dir}/math_rl"
    assert stage_fingerprints(moved)[0] != stage_fingerprints(stage)[0]


def test_report_stars_each_benchmarks_best_stage(tmp_path, cli):
    run_dir = tmp_path / "run"
    stages = ("base", "sft", "if_rl", "code_rl")
    write_results(run_dir, {name: SCORES[name] for name in stages})
    (run_dir / "run.json").write_text(json.dumps({"stage_order": list(stages[1:])}))
    result = cli(["report", run_dir])
    assert result.exit_code == 0, result.output
    report = (run_dir / "report.md").read_text()
    rows = {line.split(" |")[0].removeprefix("| "): line for line in report.splitlines() if line.startswith("| tiny_")}
    assert rows["tiny_if (avg@4)"].count("★") == 1 and "40.0 (+0.0) ★" in rows["tiny_if (avg@4)"]
    assert "68.0 (+68.0) ★" in rows["tiny_code (avg@4)"]
    assert "- **tiny_if**: `code_rl` (40.0)" in report and "- **tiny_code**: `sft` (68.0)" in report


CHAINED = """
name: chained
model: tiny
seed: 0
stages:
  data_math: {kind: prepare_data, source: "tiny:math", n: 12, holdout: 4}
  math_rl: {kind: rlvr, domain: math, data: "${stages.data_math.out}", steps: 1, prompts_per_step: 2,
            group_size: 2, max_response_len: 8}
  distill: {kind: distill, teachers: {math: "best:tiny_math"}, data: ["${stages.data_math.out}"],
            eval_data: ["${stages.data_math.out}/heldout.jsonl"], steps: 2, prompts_per_step: 2, group_size: 2,
            max_response_len: 8, lr: 1e-3, warmup_steps: 0}
eval: {after_each_stage: true, benchmarks: [tiny_math], k: 1, limit: 2, max_tokens: 8}
"""


def test_a_recipe_run_chains_evaluations_into_the_distill_stages_teacher(tmp_path, cli):
    """A real run, no results written by hand: base and math_rl are evaluated, `best:tiny_math` resolves from
    those results to a checkpoint, distill trains from math_rl with it and is evaluated and starred in turn."""
    (tmp_path / "chained.yaml").write_text(CHAINED)
    run_dir = tmp_path / "run"
    result = cli(["recipe", "run", tmp_path / "chained.yaml", f"run_dir={run_dir}"])
    assert result.exit_code == 0, result.output
    scores = {stage: json.loads((run_dir / "eval" / stage / "results.json").read_text())["benchmarks"]["tiny_math"]
              ["score"] for stage in ("base", "math_rl")}  # fmt: skip
    best = "math_rl" if scores["math_rl"] >= scores["base"] else "base"  # a tie goes to the later stage
    manifest = json.loads((run_dir / "distill" / "cascade_stage.json").read_text())
    assert manifest["config"]["teachers"] == {"math": f"{run_dir}/{best}" if best != "base" else "tiny"}
    assert manifest["config"]["init"] == f"{run_dir}/math_rl" and manifest["status"] == "completed"
    metrics = [json.loads(line) for line in (run_dir / "distill" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2] and all("teacher_advantage" in m for m in metrics)
    report = (run_dir / "report.md").read_text()
    header = next(line for line in report.splitlines() if line.startswith("| Benchmark"))
    row = next(line for line in report.splitlines() if line.startswith("| tiny_math"))
    assert header.endswith("| math_rl | distill |") and row.count("★") == 1
