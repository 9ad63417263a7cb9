"""A local stage without an OUT, for tests that train outside the lifecycle (no manifest, no trainer state)."""

from __future__ import annotations

from typing import Any

from cascade_cli.engines.local.train.stage import Stage
from cascade_cli.models.resolve import resolve


def bare_stage(config: Any) -> Stage:
    """The stage of `config` with only its init resolved: a fresh start, nothing written."""
    return Stage(config, resolve(config.init or "", "init"))
