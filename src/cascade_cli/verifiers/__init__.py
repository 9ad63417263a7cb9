"""Verifier registry: one verifier per domain, one batch API for every caller.

The GRPO trainer, `cascade verify`, the reward service and `cascade eval` all call `verify_batch`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from cascade_cli.verifiers.base import Score, Verifier, error_score

# domain -> "module:factory". Modules import lazily so that a light caller never pays for sympy or bwrap.
_REGISTRY: dict[str, str] = {}


def register(domain: str, target: str) -> None:
    _REGISTRY[domain] = target


def known_domains() -> list[str]:
    return sorted(_REGISTRY)


def get_verifier(domain: str, **options: Any) -> Verifier:
    if domain not in _REGISTRY:
        raise KeyError(f"unknown domain {domain!r}; known domains: {', '.join(known_domains())}")
    module_name, attribute = _REGISTRY[domain].split(":")
    factory: Callable[..., Verifier] = getattr(importlib.import_module(module_name), attribute)
    return factory(**options)


def _score_chunk(args: tuple[str | None, dict[str, Any], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    domain, options, records = args
    return [score.to_dict() for score in _score_in_process(domain, options, records)]


def _score_in_process(
    domain: str | None, options: dict[str, Any], records: list[dict[str, Any]]
) -> list[Score]:
    """Group records by domain and hand each group to its verifier's own `verify_batch` (code uses a pool)."""
    scores: list[Score | None] = [None] * len(records)
    groups: dict[str, list[int]] = {}
    for index, record in enumerate(records):
        record_domain = domain or record.get("domain")
        if not record_domain:
            scores[index] = error_score("missing field 'domain' (and no --domain given)")
        else:
            groups.setdefault(str(record_domain), []).append(index)
    for record_domain, indices in groups.items():
        try:
            verifier = get_verifier(record_domain, **options.get(record_domain, {}))
        except KeyError as error:
            for index in indices:
                scores[index] = error_score(str(error.args[0]))
            continue
        try:
            batch = verifier.verify_batch([records[i] for i in indices])
        finally:
            close = getattr(verifier, "close", None)
            if close is not None:
                close()  # e.g. the code verifier's warm sandboxes
        for index, score in zip(indices, batch, strict=True):
            scores[index] = score
    return scores  # type: ignore[return-value]


def verify_batch(
    records: list[dict[str, Any]],
    domain: str | None = None,
    workers: int = 1,
    options: dict[str, dict[str, Any]] | None = None,
) -> list[Score]:
    """Score rollout records; `domain` overrides each record's own. `options` maps domain -> verifier kwargs.

    With `workers > 1` the batch is split across processes (sympy and sandboxes are CPU-bound).
    """
    options = options or {}
    if workers <= 1 or len(records) < 2:
        return _score_in_process(domain, options, records)
    chunk_size = max(1, -(-len(records) // (workers * 4)))
    chunks = [records[i : i + chunk_size] for i in range(0, len(records), chunk_size)]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        results = pool.map(_score_chunk, [(domain, options, chunk) for chunk in chunks])
        return [Score(**score) for chunk in results for score in chunk]


register("math", "cascade_cli.verifiers.math:MathVerifier")
register("if", "cascade_cli.verifiers.instruction:InstructionVerifier")
register("code", "cascade_cli.verifiers.code:CodeVerifier")
register("swe", "cascade_cli.verifiers.swe:SweVerifier")
register("mcq", "cascade_cli.verifiers.mcq:MCQVerifier")

__all__ = ["Score", "Verifier", "get_verifier", "known_domains", "register", "verify_batch"]
