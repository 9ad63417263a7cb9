"""Flags + `key=value` dotlist overrides -> a validated stage config object (shared by every command)."""

from __future__ import annotations

from typing import Any, TypeVar

from omegaconf import OmegaConf

from cascade_cli.config.structure import parse_overrides, structure

T = TypeVar("T")


def build_stage_config(config_cls: type[T], values: dict[str, Any], overrides: list[str], where: str = "") -> T:
    """Merge `values` (command-line flags; None means "not given") and dotlist `overrides` (which win) onto
    the structured defaults of `config_cls`; returns a `config_cls` instance. Unknown keys, wrong types and
    missing required keys raise CascadeUsageError naming the key."""
    given = OmegaConf.create({key: value for key, value in values.items() if value is not None})
    merged = OmegaConf.merge(given, parse_overrides(overrides, where=f"{where}: overrides" if where else "overrides"))
    return structure(config_cls, merged, where=where)
