"""`shared:REL` paths: a file in the shared data folder (`$CASCADE_SHARED_DATA`, else the first `shared/data`
beside the repository or above it, as the benchmarks find theirs), so a recipe names the real data sets
(`shared:real/gsm8k/train.jsonl`, see shared/data/real/SOURCES.md) wherever it runs."""

from __future__ import annotations

import os
from pathlib import Path

from cascade_cli.errors import CascadeUsageError

PREFIX = "shared:"
SHARED_DATA_ENV = "CASCADE_SHARED_DATA"


def repo_root() -> Path:
    return Path(__file__).resolve().parents[3]


def shared_data_dir() -> Path | None:
    """`$CASCADE_SHARED_DATA`, else the first `shared/data` beside the repo root or any folder above it."""
    env = os.environ.get(SHARED_DATA_ENV)
    if env:
        return Path(env)
    for folder in (repo_root(), *repo_root().parents, Path.cwd(), *Path.cwd().parents):
        candidate = folder / "shared" / "data"
        if candidate.is_dir():
            return candidate
    return None


def shared_file(relative: str, benchmark: str, what: str = "benchmark ") -> Path:
    root = shared_data_dir()
    if root is None:
        raise CascadeUsageError(
            f"{what}{benchmark}: the shared data folder was not found (looked for shared/data beside the "
            f"repository and above it); set {SHARED_DATA_ENV} to the folder that holds {relative}"
        )
    path = root / relative
    if not path.is_file():
        raise CascadeUsageError(f"{what}{benchmark}: data file {path} not found (set {SHARED_DATA_ENV})")
    return path


def resolve_shared(spec: str) -> str:
    """`shared:REL` -> the absolute path of REL in the shared data folder; any other spec unchanged."""
    if not spec.startswith(PREFIX):
        return spec
    return str(shared_file(spec[len(PREFIX) :].lstrip("/"), spec, what=""))
