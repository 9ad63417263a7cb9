"""The recipe file: `model`, `defaults`, `eval`, `stages: {name: {kind, ...}}` in order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING


@dataclass
class RecipeConfig:
    name: str = "cascade"
    description: str = ""
    model: str = MISSING  # `tiny`, `tiny:SEED`, a local HF checkpoint, or a hub id
    run_dir: str = "runs/${name}"
    seed: int = 0
    license: str = "apache-2.0"
    datasets: list[str] = field(default_factory=list)  # for the model card
    # Keys applied to every stage whose kind has them (e.g. engine, seed, cluster); a stage's own keys win.
    defaults: dict[str, Any] = field(default_factory=dict)
    eval: dict[str, Any] = field(default_factory=dict)
    stages: dict[str, Any] = MISSING
