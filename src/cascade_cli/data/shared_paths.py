"""`shared:REL` paths: a file in the shared data folder (`$CASCADE_SHARED_DATA`, else the first `shared/data`
beside the repository or above it, as the benchmarks find theirs), so a recipe names the real data sets
(`shared:real/gsm8k/train.jsonl`, see shared/data/real/SOURCES.md) wherever it runs."""

from __future__ import annotations

PREFIX = "shared:"


def resolve_shared(spec: str) -> str:
    """`shared:REL` -> the absolute path of REL in the shared data folder; any other spec unchanged."""
    if not spec.startswith(PREFIX):
        return spec
    from cascade_cli.evaluation.benchmarks import shared_file  # the one lookup rule

    return str(shared_file(spec[len(PREFIX) :].lstrip("/"), spec, what=""))
