"""Load a recipe: YAML + dotlist overrides -> defaults filled -> interpolations resolved -> stage configs.

Unknown keys, wrong types, unknown stage kinds and missing required keys fail here, naming the YAML path.
"""

from __future__ import annotations

import dataclasses
import difflib
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from cascade_cli.config.structure import describe_error, parse_overrides, structure
from cascade_cli.errors import CascadeUsageError
from cascade_cli.recipe.lineage import check_references
from cascade_cli.recipe.schema import Recipe, RecipeConfig, RecipeStage
from cascade_cli.stage_kinds import STAGE_KINDS, StageKind

__all__ = ["Recipe", "RecipeStage", "load_recipe"]

RECIPE_FIELDS = [f.name for f in dataclasses.fields(RecipeConfig)]


def builtin_recipe_dir() -> Path:
    return Path(__file__).resolve().parents[3] / "recipes"


def builtin_recipes() -> dict[str, Path]:
    directory = builtin_recipe_dir()
    return {path.stem: path for path in sorted(directory.glob("*.yaml"))} if directory.is_dir() else {}


def find_recipe(path_or_name: str) -> Path:
    path = Path(path_or_name)
    if path.is_file():
        return path
    builtins = builtin_recipes()
    name = path.stem if path.suffix in (".yaml", ".yml") and len(path.parts) <= 2 else path_or_name
    if name in builtins:
        return builtins[name]
    known = ", ".join(builtins) or "none"
    raise CascadeUsageError(f"{path_or_name}: recipe not found (not a file; built-in recipes: {known})")


def _load_yaml(path: Path) -> DictConfig:
    try:
        loaded = OmegaConf.load(path)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise CascadeUsageError(f"{path}: invalid YAML{where}: {problem}") from None
    except OmegaConfBaseException as error:
        raise CascadeUsageError(f"{path}: {str(error).splitlines()[0]}") from None
    if not isinstance(loaded, DictConfig):
        raise CascadeUsageError(f"{path}: expected a mapping at the top level, found a list")
    return loaded


def _fields_of(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def load_recipe(path_or_name: str, overrides: list[str] | None = None) -> Recipe:
    path = find_recipe(path_or_name)
    where = str(path)
    raw = _load_yaml(path)
    if overrides:
        raw = OmegaConf.merge(raw, parse_overrides(overrides, where=f"{where}: overrides"))
    for key in raw:
        if key not in RECIPE_FIELDS:
            raise CascadeUsageError(
                f"{where}: {key}: unknown top-level key (expected one of {', '.join(RECIPE_FIELDS)})"
            )
    for key, value in (("name", "cascade"), ("run_dir", "runs/${name}"), ("seed", 0)):
        if key not in raw:
            raw[key] = value  # stages interpolate these
    if "model" not in raw:
        raise CascadeUsageError(f"{where}: model: missing required key (e.g. `model: tiny`)")
    stages_raw = raw.get("stages")
    if not isinstance(stages_raw, DictConfig) or len(stages_raw) == 0:
        raise CascadeUsageError(f"{where}: stages: expected a mapping of stage name -> stage, in order")

    defaults = raw.get("defaults") or {}
    previous_model: str | None = None
    kinds: dict[str, StageKind] = {}
    for name in list(stages_raw.keys()):
        stage_raw = stages_raw[name]
        prefix = f"stages.{name}"
        if not isinstance(stage_raw, DictConfig):
            raise CascadeUsageError(f"{where}: {prefix}: expected a mapping with at least `kind`")
        kind_name = stage_raw.get("kind")
        if kind_name is None:
            others = [str(other) for other in stages_raw if other != name and "kind" in (stages_raw[other] or {})]
            close = difflib.get_close_matches(str(name), others, n=1)
            hint = f" (no stage {name!r} in this recipe: did you mean stages.{close[0]}?)" if close else ""
            raise CascadeUsageError(f"{where}: {prefix}.kind: missing required key{hint}")
        if kind_name not in STAGE_KINDS:
            raise CascadeUsageError(
                f"{where}: {prefix}.kind: unknown stage kind {kind_name!r} "
                f"(known kinds: {', '.join(STAGE_KINDS)})"
            )
        kind = STAGE_KINDS[kind_name]
        kinds[str(name)] = kind
        fields = _fields_of(kind.config_class())
        filled: dict[str, Any] = {"seed": "${seed}"} if "seed" in fields else {}
        filled.update({key: value for key, value in defaults.items() if key in fields})
        filled = OmegaConf.merge(OmegaConf.create(filled), stage_raw)
        filled.name = str(name)
        # An interpolation (`init: ${stages.sft.out}`) counts as set; resolving it here, outside the recipe, fails.
        if not OmegaConf.is_interpolation(filled, "out") and filled.get("out") is None:
            filled.out = f"${{run_dir}}/{name}"
        if kind.defaults_init and not OmegaConf.is_interpolation(filled, "init") and filled.get("init") is None:
            filled.init = previous_model if previous_model is not None else "${model}"
        stages_raw[name] = filled
        if kind.produces_model:
            previous_model = f"${{stages.{name}.out}}"

    unused = [key for key in defaults if not any(key in _fields_of(k.config_class()) for k in kinds.values())]
    if unused:
        raise CascadeUsageError(f"{where}: defaults.{unused[0]}: no stage in this recipe has this key")

    try:
        resolved: dict[str, Any] = OmegaConf.to_container(raw, resolve=True)  # type: ignore[assignment]
    except OmegaConfBaseException as error:
        raise CascadeUsageError(describe_error(error, where)) from None

    top = {key: value for key, value in resolved.items() if key != "stages"}
    recipe = structure(RecipeConfig, {**top, "stages": {}}, where=where)
    stages = [
        RecipeStage(
            name=name,
            kind=kinds[name],
            config=structure(kinds[name].config_class(), values, where=where, prefix=f"stages.{name}"),
        )
        for name, values in resolved["stages"].items()
    ]
    for stage in stages:  # what a run checks beyond the config class (a registry name): stages.py
        try:
            stage.kind.check(stage.config)
        except CascadeUsageError as error:
            raise CascadeUsageError(f"{where}: stages.{stage.name}.{error}") from None
    from cascade_cli.config.eval import EvalConfig

    eval_config = structure(EvalConfig, resolved.get("eval") or {}, where=where, prefix="eval")
    if eval_config.after_each_stage:
        _check_benchmark_names(eval_config.benchmarks, where)
    loaded = Recipe(path=path, recipe=recipe, stages=stages, resolved=resolved, eval=eval_config)
    check_references(loaded)  # `best:BENCHMARK` names an evaluated benchmark
    return loaded


def _check_benchmark_names(names: list[str], where: str) -> None:
    """Registered benchmark names must exist (a run would stop at its first evaluation); `KIND:FILE` and
    `hf:` specs are checked when they are read, as a stage may write the file first."""
    from cascade_cli.evaluation.benchmarks import resolve_benchmark

    for name in names:
        if ":" not in name:
            try:
                resolve_benchmark(name)
            except CascadeUsageError as error:
                raise CascadeUsageError(f"{where}: eval.benchmarks: {error}") from None
