"""Verifier registry: one verifier per domain, one batch API for every caller.

The registry (domain -> verifier factory) is `registry.py`; the contract `base.py`.

Every caller scores through the batch scorer, `verifiers/batch.py`; `verify_batch` is its `list[Score]` face
(what the GRPO trainer calls).
"""

from __future__ import annotations

from typing import Any

from cascade_cli.verifiers.base import Score, Verifier
from cascade_cli.verifiers.registry import _REGISTRY, get_verifier, known_domains, register  # noqa: F401  (_REGISTRY: the registry's dict)


def verify_batch(
    records: list[dict[str, Any]],
    domain: str | None = None,
    workers: int = 1,
    options: dict[str, dict[str, Any]] | None = None,
) -> list[Score]:
    """Score rollout records through the batch scorer (`verifiers/batch.py`): `domain` overrides each
    record's own, `options` maps domain -> verifier kwargs, `workers > 1` splits the batch across processes.
    Verifiers are cached per process, so the code sandbox pool stays warm from one call to the next."""
    from cascade_cli.verifiers.batch import score_records

    return [result.to_score() for result in score_records(records, domain, options, workers=workers)]


__all__ = ["Score", "Verifier", "get_verifier", "known_domains", "register", "verify_batch"]
