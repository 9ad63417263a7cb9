"""Lineage: a stage key may name a checkpoint by what it scored, `best:BENCHMARK`.

    teachers: {if: "best:ifeval", math: "best:gsm8k"}   # in a distill stage

`best:BENCHMARK` is the checkpoint of the stage before this one (the recipe's `base` model included) with
the best score on BENCHMARK in this run's evaluations (RUN_DIR/eval/STAGE/results.json; a tie goes to the
later stage, as `cascade report` stars it). Loading checks that BENCHMARK is one of the recipe's
`eval.benchmarks`; `recipe run` resolves it when it reaches the stage (the earlier stages' evaluations after
each stage are done by then; with them off the stage stops there, exit 2), and `recipe plan` prints the path
when the run directory already holds those results. A value is `best:` as a whole string: a top-level key
(`init`) or a value of a mapping key (`teachers.if`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cascade_cli.errors import CascadeUsageError
from cascade_cli.recipe.schema import Recipe, RecipeStage

PREFIX = "best:"


def references(stage: RecipeStage) -> Iterator[tuple[str, str | None, str]]:
    """(key, mapping key or None, benchmark) of every `best:BENCHMARK` value of the stage's config."""
    for field in dataclasses.fields(stage.config):
        value = getattr(stage.config, field.name)
        items = value.items() if isinstance(value, dict) else [(None, value)]
        for inner, item in items:
            if isinstance(item, str) and item.startswith(PREFIX):
                yield field.name, inner, item.removeprefix(PREFIX)


def _key(key: str, inner: str | None) -> str:
    return f"{key}.{inner}" if inner is not None else key


def candidates(recipe: Recipe, stage: RecipeStage) -> dict[str, str]:
    """Stage name -> checkpoint of what `best:` may name for `stage`: base, then every policy stage before it."""
    named = {"base": recipe.recipe.model} if recipe.eval.include_base else {}
    for earlier in recipe.stages[: recipe.stages.index(stage)]:
        if earlier.kind.produces_model:
            named[earlier.name] = earlier.out
    return named


def check_references(recipe: Recipe) -> None:
    """At load time: each `best:BENCHMARK` names one of the recipe's benchmarks (a run with the evaluations
    off loads, and stops at the stage that needs them: `resolve`)."""
    for stage in recipe.stages:
        for key, inner, benchmark in references(stage):
            where = f"{recipe.path}: stages.{stage.name}.{_key(key, inner)}: {PREFIX}{benchmark}"
            if benchmark not in recipe.eval.benchmarks:
                raise CascadeUsageError(f"{where}: expected one of eval.benchmarks "
                                        f"({', '.join(recipe.eval.benchmarks)}), found {benchmark!r}")
            if not candidates(recipe, stage):
                raise CascadeUsageError(f"{where}: no stage before {stage.name} makes a checkpoint to name")


def best_checkpoint(recipe: Recipe, stage: RecipeStage, benchmark: str) -> tuple[str, str, float] | None:
    """(stage name, checkpoint, score) of the best candidate evaluated on `benchmark`; None before any is."""
    # Imported here, not at the top: the evaluation package is heavy and `recipe validate` needs none of it.
    from cascade_cli.evaluation.report import best_stage, stage_eval_dir

    named = candidates(recipe, stage)
    scores: dict[str, float] = {}
    for name in named:
        results = stage_eval_dir(recipe.recipe.run_dir, name) / "results.json"
        if results.is_file():
            summary = json.loads(results.read_text()).get("benchmarks", {}).get(benchmark)
            if summary is not None:
                scores[name] = float(summary.get("score", 0.0))
    best = best_stage(scores, list(named))
    return None if best is None else (best, named[best], scores[best])


def resolve(recipe: Recipe, stage: RecipeStage, *, strict: bool = True) -> tuple[RecipeStage, list[str]]:
    """`stage` with each `best:BENCHMARK` replaced by its checkpoint, and one line per replacement saying what
    it chose. `strict`: a benchmark without results yet is a usage error; else the value stays as it is."""
    changes: dict[str, Any] = {}
    notes = []
    for key, inner, benchmark in references(stage):
        found = best_checkpoint(recipe, stage, benchmark)
        name = _key(key, inner)
        if found is None:
            if strict:
                why = "run the earlier stages first" if recipe.evaluates else "eval.after_each_stage is off"
                raise CascadeUsageError(
                    f"stages.{stage.name}.{name}: {PREFIX}{benchmark}: no stage before {stage.name} has "
                    f"{benchmark} results in {Path(recipe.recipe.run_dir) / 'eval'} ({why})"
                )
            notes.append(f"{name} = {PREFIX}{benchmark}: resolved when the run reaches this stage")
            continue
        best, path, score = found
        if inner is None:
            changes[key] = path
        else:
            changes[key] = {**changes.get(key, getattr(stage.config, key)), inner: path}
        notes.append(f"{name} = {PREFIX}{benchmark} -> {path} (stage {best}, {benchmark} {score:.1f})")
    if not changes:
        return stage, notes
    return dataclasses.replace(stage, config=dataclasses.replace(stage.config, **changes)), notes
