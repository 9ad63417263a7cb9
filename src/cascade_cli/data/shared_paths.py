"""`shared:REL` paths: a file in the shared data folder (`$CASCADE_SHARED_DATA`, else the first `shared/data`
beside the repository or above it, as the benchmarks find theirs), so a recipe names the real data sets
(`shared:real/gsm8k/train.jsonl`, see shared/data/real/SOURCES.md) wherever it runs."""

from __future__ import annotations

from cascade_cli.errors import CascadeUsageError

PREFIX = "shared:"


def resolve_shared(spec: str) -> str:
    """`shared:REL` -> the absolute path of REL in the shared data folder; any other spec unchanged."""
    if not spec.startswith(PREFIX):
        return spec
    from cascade_cli.evaluation.benchmarks import SHARED_DATA_ENV, shared_data_dir  # the one lookup rule

    root = shared_data_dir()
    relative = spec[len(PREFIX) :].lstrip("/")
    if root is None:
        raise CascadeUsageError(
            f"{spec}: the shared data folder was not found (looked for shared/data beside the repository and "
            f"above it); set {SHARED_DATA_ENV} to the folder that holds {relative}"
        )
    path = root / relative
    if not path.exists():
        raise CascadeUsageError(f"{spec}: {path} not found (shared data folder {root}; set {SHARED_DATA_ENV})")
    return str(path)
