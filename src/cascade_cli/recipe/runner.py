"""`recipe run`: run stages in order, record `RUN_DIR/run.json`, skip stages already done with the same inputs.

A stage is skipped when run.json says it completed with the same resolved config fingerprint and the same
input fingerprints, and its output still exists. A stage run.json recorded with another config or inputs
starts over (`restart=true`; the changed keys are printed: editing the recipe was the user's decision); an
interrupted stage with the same config runs with `restart=false`, so its trainer resumes it. `--from STAGE`
reruns from a stage on and `--only` runs one, both starting the stages they select over; so does `--restart`.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from rich.table import Table

from cascade_cli.config.diff import RUNTIME_KEYS, class_defaults, config_diff, flatten
from cascade_cli.config.structure import to_plain
from cascade_cli.console import console, print_done, print_skip
from cascade_cli.errors import CascadeRunError, CascadeUsageError
from cascade_cli.manifest import MANIFEST_NAME, config_fingerprint, fingerprint_path, read_manifest
from cascade_cli.recipe import lineage
from cascade_cli.recipe.schema import Recipe, RecipeStage

RUN_MANIFEST = "run.json"
INPUT_KEYS = ("init", "data", "reward_model", "eval_data", "source", "teachers")


def input_fingerprint(value: str) -> str:
    """A cheap, stable fingerprint: a checkpoint's manifest, a data card, a file's bytes, else the string."""
    path = Path(value)
    if not path.exists():
        return f"ref:{value}"
    for marker in (MANIFEST_NAME, "data_card.json"):
        if path.is_dir() and (path / marker).is_file():
            return fingerprint_path(path / marker)
    return fingerprint_path(path)


def stage_values(stage: RecipeStage) -> dict[str, Any]:
    """The stage's config as recorded in run.json: `restart` says how to run it, not what it computes."""
    config = to_plain(stage.config)
    config.pop("restart", None)
    return config


def _inputs(key: str, value: Any) -> dict[str, Any]:
    """KEY -> value, or KEY.NAME / KEY.INDEX -> item for a mapping or a list of inputs (distill's teachers, data)."""
    if isinstance(value, dict):
        return {f"{key}.{name}": item for name, item in value.items()}
    if isinstance(value, list):
        return {f"{key}.{index}": item for index, item in enumerate(value)}
    return {key: value}


def stage_fingerprints(stage: RecipeStage) -> tuple[str, dict[str, str]]:
    config = stage_values(stage)
    inputs = {
        name: input_fingerprint(value)
        for key in INPUT_KEYS
        for name, value in _inputs(key, config.get(key)).items()
        if isinstance(value, str) and value
    }
    return config_fingerprint(config), inputs


def _read_run_manifest(run_dir: Path) -> dict[str, Any]:
    path = run_dir / RUN_MANIFEST
    if not path.exists():
        return {"stages": {}}
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise CascadeUsageError(f"{path}: malformed run manifest ({error.msg}); delete it to start over") from None


def _write_run_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    tmp = run_dir / (RUN_MANIFEST + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, default=str) + "\n")
    tmp.replace(run_dir / RUN_MANIFEST)


def select_stages(recipe: Recipe, from_stage: str | None, only: str | None) -> list[RecipeStage]:
    if from_stage and only:
        raise CascadeUsageError("--from and --only cannot be used together")
    if only:
        return [recipe.stage(only)]
    if from_stage:
        start = recipe.stages.index(recipe.stage(from_stage))
        return recipe.stages[start:]
    return list(recipe.stages)


# What a recipe stage may change and stay done: the trainers' runtime keys, except its `out` (elsewhere is
# another checkpoint).
RECIPE_RUNTIME_KEYS = tuple(key for key in RUNTIME_KEYS if key != "out")


def is_up_to_date(record: dict[str, Any] | None, stage: RecipeStage, fingerprints: tuple[str, dict[str, str]]) -> bool:
    if not record or record.get("status") != "completed" or "config_fingerprint" not in record:
        return False
    return not changed_keys(record, stage, fingerprints) and Path(stage.out).exists()


def changed_keys(record: dict[str, Any] | None, stage: RecipeStage, fingerprints: tuple[str, dict[str, str]]) -> list[str]:
    """What differs from the run run.json recorded, by the rule of config/diff.py (runtime keys and keys added
    to cascade since, at their defaults, are no change): `key: old -> new` per config key, `key (input
    changed)` per input; [] when nothing was recorded or nothing changed."""
    if not record or "config_fingerprint" not in record:
        return []
    changes = []
    if record["config_fingerprint"] != fingerprints[0]:
        recorded, now = record.get("config") or {}, stage_values(stage)
        if not recorded:
            changes.append("config (keys not recorded)")
        else:
            before, after = flatten(recorded), flatten(now)
            keys = config_diff(recorded, now, RECIPE_RUNTIME_KEYS, class_defaults(stage.config))
            changes += [f"{key}: {before.get(key)!r} -> {after.get(key)!r}" for key in keys]
    old_inputs = record.get("input_fingerprints") or {}
    changes += [
        f"{key} (input changed)"
        for key in sorted(set(old_inputs) | set(fingerprints[1]))
        if old_inputs.get(key) != fingerprints[1].get(key)
    ]
    return changes


def _evaluate(recipe: Recipe, name: str, model: str, record: dict[str, Any], run_dir: Path) -> None:
    """Evaluate one checkpoint into RUN_DIR/eval/NAME/, unless done already for the same eval config."""
    from cascade_cli.evaluation import evaluate_stage, stage_eval_dir

    fingerprint = config_fingerprint(to_plain(recipe.eval))
    results = stage_eval_dir(run_dir, name) / "results.json"
    if record.get("eval_fingerprint") == fingerprint and results.is_file() and record.get("eval") == "completed":
        print_skip(f"eval of {name}: done, same eval config")
        return
    console.rule(f"eval {name}")
    started = time.time()
    evaluate_stage(run_dir, name, model, recipe.eval)
    record.update(eval="completed", eval_fingerprint=fingerprint, eval_seconds=round(time.time() - started, 2))


def run_recipe(
    recipe: Recipe, from_stage: str | None = None, only: str | None = None, restart: bool = False
) -> dict[str, Any]:
    """Run the selected stages (and the recipe's evals and report); returns the run manifest.
    `restart`: start every selected stage over."""
    run_dir = Path(recipe.recipe.run_dir)
    manifest = _read_run_manifest(run_dir)
    manifest.update(
        recipe=str(recipe.path),
        name=recipe.recipe.name,
        model=recipe.recipe.model,
        stage_order=[stage.name for stage in recipe.stages],
        resolved=recipe.resolved,
    )
    records: dict[str, Any] = manifest.setdefault("stages", {})
    selected = select_stages(recipe, from_stage, only)
    forced = {stage.name for stage in selected} if (from_stage or only or restart) else set()
    if recipe.evaluates and recipe.eval.include_base and not (from_stage or only):
        _evaluate(recipe, "base", recipe.recipe.model, manifest.setdefault("base", {}), run_dir)
        _write_run_manifest(run_dir, manifest)
    for stage in selected:
        stage = lineage.resolve(recipe, stage)[0]  # `best:BENCHMARK` -> the checkpoint, from the evals so far
        fingerprints = stage_fingerprints(stage)
        if stage.name not in forced and is_up_to_date(records.get(stage.name), stage, fingerprints):
            print_skip(f"stage {stage.name} ({stage.kind.kind}): completed, same inputs")
            if recipe.evaluates and stage.kind.produces_model:
                _evaluate(recipe, stage.name, stage.out, records[stage.name], run_dir)
                _write_run_manifest(run_dir, manifest)
            continue
        console.rule(f"stage {stage.name} ({stage.kind.kind})")
        changes = changed_keys(records.get(stage.name), stage, fingerprints)
        if changes:
            console.print(f"stage {stage.name} changed since its last run: {'; '.join(changes)}; starting it over")
        config = dataclasses.replace(stage.config, restart=stage.name in forced or bool(changes))
        started = time.time()
        records[stage.name] = {
            "kind": stage.kind.kind, "out": stage.out, "status": "running", "started": started, "restart": config.restart,
            "config_fingerprint": fingerprints[0], "input_fingerprints": fingerprints[1], "config": stage_values(stage),
        }
        _write_run_manifest(run_dir, manifest)
        try:
            metrics = stage.kind.run(config)
        except (CascadeUsageError, CascadeRunError) as error:
            records[stage.name].update(status="failed", error=str(error), finished=time.time())
            _write_run_manifest(run_dir, manifest)
            raise type(error)(f"stage {stage.name}: {error}") from None
        except BaseException as error:
            records[stage.name].update(status="failed", error=repr(error), finished=time.time())
            _write_run_manifest(run_dir, manifest)
            raise
        records[stage.name].update(
            status="completed",
            finished=time.time(),
            seconds=round(stage_seconds(stage.out, time.time() - started), 2),
            metrics=metrics,
        )
        _write_run_manifest(run_dir, manifest)
        if recipe.evaluates and stage.kind.produces_model:
            _evaluate(recipe, stage.name, stage.out, records[stage.name], run_dir)
            _write_run_manifest(run_dir, manifest)
    if recipe.evaluates and any((run_dir / "eval").glob("*/results.json")):  # `--only DATA_STAGE`: none yet
        from cascade_cli.evaluation import write_report

        report = write_report(run_dir, max_regression=recipe.eval.max_regression)
        manifest["report"] = {key: report[key] for key in ("markdown", "plot", "regressions", "hack_flags", "best")}
        _write_run_manifest(run_dir, manifest)
        print_done(f"{report['markdown']}  plot: {report['plot']}", label="report:")
    console.print(timing_table(manifest, [stage.name for stage in selected]))
    return manifest


def stage_seconds(out: str | Path, this_run_s: float) -> float:
    """A stage's time: a local trainer's manifest counts every segment of a resumed stage (`elapsed_s`), so a
    run cut off and resumed reports the whole stage, not its last segment; else this run's wall time."""
    try:
        manifest = read_manifest(out) or {}
    except CascadeUsageError:  # unreadable: the recipe's own clock is still a true time for this run
        manifest = {}
    elapsed = manifest.get("timings", {}).get("elapsed_s")
    return max(this_run_s, elapsed) if isinstance(elapsed, (int, float)) else this_run_s


def timing_table(manifest: dict[str, Any], names: list[str]) -> Table:
    """Where this run's time went: each stage's seconds and its evaluation's, from run.json (this run's only;
    a skipped stage shows the seconds it took when it ran)."""
    table = Table(title="time per stage (s)", title_justify="left")
    for column in ("stage", "train", "eval"):
        table.add_column(column, justify="left" if column == "stage" else "right")
    records = {"base": manifest.get("base", {}), **manifest.get("stages", {})}
    totals = [0.0, 0.0]
    for name in ["base", *names]:
        record = records.get(name, {})
        seconds = [record.get("seconds"), record.get("eval_seconds")]
        if seconds == [None, None]:
            continue
        totals = [total + (value or 0.0) for total, value in zip(totals, seconds, strict=True)]
        table.add_row(name, *("" if value is None else f"{value:,.0f}" for value in seconds))
    table.add_row("total", *(f"{total:,.0f}" for total in totals), style="bold")
    return table
