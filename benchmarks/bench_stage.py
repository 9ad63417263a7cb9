"""A local stage without an OUT, for the benchmarks that time a trainer's parts outside the lifecycle."""

from __future__ import annotations

from typing import Any

from cascade_cli.engines.local.train.stage import Stage
from cascade_cli.models.resolve import resolve


def bare_stage(config: Any) -> Stage:
    """The stage of `config` with only its init resolved: a fresh start, nothing written."""
    return Stage(config, resolve(config.init or "", "init"))
