"""`cascade prepare-data`: sources -> canonical rows (+ data card)."""

from __future__ import annotations

from dataclasses import dataclass, field

from omegaconf import MISSING

from cascade_cli.config.common import StageConfig


@dataclass
class PrepareDataConfig(StageConfig):
    kind: str = "prepare_data"
    # tiny:DOMAIN (math|code|if|pref|general|sft), a local json/jsonl/parquet file, or a hub dataset id.
    source: str = MISSING
    domain: str | None = None
    split: str = "train"
    limit: int | None = None
    n: int = 1000  # rows for tiny:* sources
    mode: str | None = None
    map: dict[str, str] = field(default_factory=dict)
    holdout: int = 0  # rows written to heldout.jsonl instead of data.jsonl
