"""Flags + `key=value` dotlist overrides -> a validated stage config object (shared by every command)."""

from __future__ import annotations

from typing import Any, TypeVar

from omegaconf import OmegaConf
from omegaconf.errors import ConfigKeyError, MissingMandatoryValue, OmegaConfBaseException, ValidationError

from cascade_cli.errors import CascadeUsageError

T = TypeVar("T")


def _explain(error: OmegaConfBaseException, where: str) -> str:
    key = getattr(error, "full_key", None) or ""
    message = str(error).splitlines()[0] if str(error) else type(error).__name__
    if isinstance(error, ConfigKeyError):
        return f"{where}: unknown key {key!r} ({message})"
    if isinstance(error, MissingMandatoryValue):
        return f"{where}: missing required key {key!r}"
    if isinstance(error, ValidationError):
        return f"{where}: key {key!r}: {message}"
    return f"{where}: {f'key {key!r}: ' if key else ''}{message}"


def parse_overrides(overrides: list[str]) -> Any:
    """`["lr=3e-4", "eval.limit=5"]` -> an OmegaConf node; anything not `key=value` is a usage error."""
    for item in overrides:
        key, sep, _ = item.partition("=")
        if not sep or not key.strip():
            raise CascadeUsageError(f"override {item!r}: expected key=value (for example lr=3e-4)")
    try:
        return OmegaConf.from_dotlist(list(overrides))
    except OmegaConfBaseException as error:
        raise CascadeUsageError(_explain(error, "overrides")) from None


def build_stage_config(config_cls: type[T], values: dict[str, Any], overrides: list[str]) -> T:
    """Merge `values` (command-line flags; None means "not given") and dotlist `overrides` (which win) onto
    the structured defaults of `config_cls`; returns a `config_cls` instance. Unknown keys, wrong types and
    missing required keys raise CascadeUsageError naming the key."""
    given = {key: value for key, value in values.items() if value is not None}
    schema = OmegaConf.structured(config_cls)
    try:
        merged = OmegaConf.merge(schema, given)
    except OmegaConfBaseException as error:
        raise CascadeUsageError(_explain(error, "options")) from None
    try:
        merged = OmegaConf.merge(merged, parse_overrides(overrides))
    except OmegaConfBaseException as error:
        raise CascadeUsageError(_explain(error, "overrides")) from None
    missing = sorted(OmegaConf.missing_keys(merged))
    if missing:
        raise CascadeUsageError(
            f"missing required key {missing[0]!r} (give it as a flag or {missing[0]}=...)"
        )
    try:
        return OmegaConf.to_object(merged)  # type: ignore[return-value]
    except OmegaConfBaseException as error:
        raise CascadeUsageError(_explain(error, "options")) from None
