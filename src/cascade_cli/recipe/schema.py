"""The recipe file: `model`, `defaults`, `eval`, `stages: {name: {kind, ...}}` in order; and a loaded recipe
(`Recipe`, its `RecipeStage`s), what loader.py builds and lineage.py, plan.py and runner.py read."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import MISSING

from cascade_cli.errors import CascadeUsageError
from cascade_cli.stage_kinds import StageKind


@dataclass
class RecipeConfig:
    # Recipe name (run_dir and the model card use it).
    name: str = "cascade"
    # One paragraph on what the recipe trains (shown by `recipe list`).
    description: str = ""
    model: str = MISSING  # `tiny`, `tiny:SEED`, `smollm2-135m`, `gguf:FILE.gguf`, a local HF checkpoint, or a hub id
    # Where the stages, evals, run.json and the report go.
    run_dir: str = "runs/${name}"
    # Seed every stage starts from unless it sets its own.
    seed: int = 0
    # License of the trained model (model card).
    license: str = "apache-2.0"
    datasets: list[str] = field(default_factory=list)  # for the model card
    # Keys applied to every stage whose kind has them (e.g. engine, seed, cluster); a stage's own keys win.
    defaults: dict[str, Any] = field(default_factory=dict)
    # Evaluation after every stage: after_each_stage, benchmarks, k, max_tokens, ... (EvalConfig).
    eval: dict[str, Any] = field(default_factory=dict)
    # Stage name -> {kind, engine?, init?, data, ...}, run in this order.
    stages: dict[str, Any] = MISSING


@dataclass
class RecipeStage:
    """One stage of a loaded recipe: its name, its kind and its resolved config."""

    name: str
    kind: StageKind
    config: Any  # the kind's config dataclass, fully resolved

    @property
    def out(self) -> str:
        return self.config.out


@dataclass
class Recipe:
    """A loaded recipe: the file, its top-level keys, its stages in order and the eval block."""

    path: Path
    recipe: RecipeConfig
    stages: list[RecipeStage]
    resolved: dict[str, Any]  # the whole recipe after overrides, defaults and interpolation
    eval: Any = None  # EvalConfig

    @property
    def evaluates(self) -> bool:
        return bool(self.eval is not None and self.eval.after_each_stage and self.eval.benchmarks)

    def stage(self, name: str) -> RecipeStage:
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise CascadeUsageError(
            f"{self.path}: no stage named {name!r} (stages: {', '.join(s.name for s in self.stages)})"
        )
