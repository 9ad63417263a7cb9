"""Which keys differ between a stage's recorded config and its config now: the rule both the local
trainers' resume (engines/local/train/trainer_state.py) and `recipe run`'s skip of completed stages follow.

Two kinds of difference do not count: runtime keys (RUNTIME_KEYS: how a run is driven, not what it computes)
and keys the record lacks whose value now is the config class's default (a key added to cascade after the
stage ran, at the default that keeps the behaviour it had), so upgrading cascade does not retrain a run.
"""

from __future__ import annotations

import fnmatch
from typing import Any

from omegaconf import OmegaConf

__all__ = ["RUNTIME_KEYS", "class_defaults", "config_diff", "describe_diff", "flatten"]

# Config keys that drive a run but do not change what it computes: a resumed run may differ in these.
# Entries are fnmatch patterns over dotted keys; a pattern also covers everything below it.
RUNTIME_KEYS: tuple[str, ...] = (
    "out",
    "save_every",
    "resume",
    "restart",
    "stop_after",
    "log_every",
    "tensorboard",
    "report_to",
    "log_rollouts",
    "threads",
    "dry_run",
    "name",
    "eval_*",
    "verify_workers",
    "cluster",
    "keep_trainer_state",
)
_MISSING = object()


def class_defaults(config: Any) -> dict[str, Any]:
    """The defaults of a config dataclass instance's class, nested as its plain dict (required keys: '???')."""
    return OmegaConf.to_container(OmegaConf.structured(type(config)), resolve=False, throw_on_missing=False)  # type: ignore[return-value]


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a.b": 1} (an empty mapping stays a value)."""
    if isinstance(value, dict) and value:
        flat: dict[str, Any] = {}
        for key, item in value.items():
            flat.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: value}


def _ignored(key: str, ignore: tuple[str, ...]) -> bool:
    parts = key.split(".")
    prefixes = [".".join(parts[: n + 1]) for n in range(len(parts))]
    return any(fnmatch.fnmatchcase(p, pattern) for p in prefixes for pattern in ignore)


def config_diff(
    old: dict[str, Any],
    new: dict[str, Any],
    ignore: tuple[str, ...] = RUNTIME_KEYS,
    defaults: dict[str, Any] | None = None,
) -> list[str]:
    """The dotted keys whose values differ between two configs. A key only one side has differs too, except a
    key only `new` has whose value is its entry in `defaults` (the config class's defaults)."""
    flat_old, flat_new = flatten(old), flatten(new)
    flat_defaults = flatten(defaults or {})
    keys = sorted(set(flat_old) | set(flat_new))

    def differs(key: str) -> bool:
        before, after = flat_old.get(key, _MISSING), flat_new.get(key, _MISSING)
        if before is _MISSING and key in flat_defaults and after == flat_defaults[key]:
            return False
        return before != after

    return [key for key in keys if not _ignored(key, ignore) and differs(key)]


def _show(value: Any) -> str:
    text = "unset" if value is _MISSING else repr(value) if not isinstance(value, str) else value
    return text if len(text) <= 60 else text[:57] + "..."


def describe_diff(old: dict[str, Any], new: dict[str, Any], keys: list[str]) -> str:
    """`lr (1e-05 -> 2e-05), steps (4 -> 6)` for the given dotted keys."""
    flat_old, flat_new = flatten(old), flatten(new)
    return ", ".join(
        f"{key} ({_show(flat_old.get(key, _MISSING))} -> {_show(flat_new.get(key, _MISSING))})" for key in keys
    )
