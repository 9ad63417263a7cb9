"""The verifier registry: domain -> the factory of its verifier, imported only when a domain is first used."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from cascade_cli.verifiers.base import RECORD_TIMEOUT_OPTION, Verifier

# domain -> "module:factory". Modules import lazily so that a light caller never pays for sympy or bwrap.
_REGISTRY: dict[str, str] = {}


def register(domain: str, target: str) -> None:
    _REGISTRY[domain] = target


def known_domains() -> list[str]:
    return sorted(_REGISTRY)


def get_verifier(domain: str, **options: Any) -> Verifier:
    """A new verifier for `domain` (callers that score use `batch.load_verifier`, one per process).

    `record_timeout_s` belongs to the batch scorer and is dropped here."""
    if domain not in _REGISTRY:
        raise KeyError(f"unknown domain {domain!r}; known domains: {', '.join(known_domains())}")
    module_name, attribute = _REGISTRY[domain].split(":")
    factory: Callable[..., Verifier] = getattr(importlib.import_module(module_name), attribute)
    options.pop(RECORD_TIMEOUT_OPTION, None)
    return factory(**options)


register("math", "cascade_cli.verifiers.math:MathVerifier")
register("if", "cascade_cli.verifiers.instruction:InstructionVerifier")
register("code", "cascade_cli.verifiers.code:CodeVerifier")
register("swe", "cascade_cli.verifiers.swe:SweVerifier")
register("mcq", "cascade_cli.verifiers.mcq:MCQVerifier")
register("language", "cascade_cli.verifiers.language:LanguageVerifier")
