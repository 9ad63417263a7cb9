"""The recipe file: `model`, `defaults`, `eval`, `stages: {name: {kind, ...}}` in order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING


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
