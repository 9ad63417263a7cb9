"""Turn plain mappings into stage-config dataclasses, with errors that name the key and its source."""

from __future__ import annotations

from typing import Any, TypeVar

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, MissingMandatoryValue, OmegaConfBaseException, ValidationError

from cascade_cli.config.checks import validate
from cascade_cli.errors import CascadeUsageError

T = TypeVar("T")


def describe_error(error: OmegaConfBaseException, where: str, prefix: str = "") -> str:
    """`where: prefix.key: what went wrong` from an OmegaConf exception."""
    key = getattr(error, "full_key", None) or getattr(error, "key", None) or ""
    full_key = f"{prefix}.{key}" if prefix and key else (prefix or str(key))
    message = str(getattr(error, "msg", None) or error).splitlines()[0]
    if isinstance(error, ConfigKeyError):
        message = f"unknown key {str(key)!r} ({message})"
    elif isinstance(error, MissingMandatoryValue):
        message = "missing required value"
    elif isinstance(error, ValidationError) and "is not a ListConfig" in message:
        message = "expected a list, e.g. [a,b] (quoted on a shell line: 'key=[a,b]')"
    elif isinstance(error, ValidationError) and "is not a DictConfig" in message:
        message = "expected a mapping, e.g. {a: 1} (quoted on a shell line: 'key={a: 1}')"
    elif isinstance(error, ValidationError):
        message = f"wrong type: {message}"
    location = f"{where}: " if where else ""
    return f"{location}{full_key}: {message}" if full_key else f"{location}{message}"


def structure(config_cls: type[T], values: dict[str, Any] | DictConfig, where: str = "", prefix: str = "") -> T:
    """Validate `values` against `config_cls` (unknown keys, types, missing required keys, then every key's
    bound and the class's own checks: config/checks.py) and build it."""
    try:
        merged = OmegaConf.merge(OmegaConf.structured(config_cls), values)
        missing = sorted(OmegaConf.missing_keys(merged))
        if missing:
            full = f"{prefix}.{missing[0]}" if prefix else missing[0]
            location = f"{where}: " if where else ""
            raise CascadeUsageError(f"{location}{full}: missing required value")
        try:
            config = OmegaConf.to_object(merged)
            validate(config)
            return config  # type: ignore[return-value]
        except CascadeUsageError as error:  # a bound or a check of the config class
            location = f"{where}: " if where else ""
            raise CascadeUsageError(f"{location}{prefix + '.' if prefix else ''}{error}") from None
    except OmegaConfBaseException as error:
        raise CascadeUsageError(describe_error(error, where, prefix)) from None


def parse_overrides(overrides: list[str], where: str = "overrides") -> DictConfig:
    """`key=value` dotlist (OmegaConf grammar: lists `[a,b]`, dicts `{k: v}`) with a clear error."""
    for item in overrides:
        if "=" not in item:
            raise CascadeUsageError(f"{where}: expected key=value, found {item!r}")
    try:
        return OmegaConf.from_dotlist(list(overrides))
    except OmegaConfBaseException as error:
        raise CascadeUsageError(f"{where}: {str(error).splitlines()[0]}") from None


def to_plain(config: Any) -> dict[str, Any]:
    """A stage config as a plain dict (for manifests and fingerprints)."""
    return OmegaConf.to_container(OmegaConf.structured(config), resolve=True)  # type: ignore[return-value]
