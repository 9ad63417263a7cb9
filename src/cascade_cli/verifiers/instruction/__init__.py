"""Instruction-following verifier (domain `if`): IFEval's 25 instructions and IFBench's rule-checkable ones."""

from cascade_cli.verifiers.instruction import text
from cascade_cli.verifiers.instruction.registry import REGISTRY, _bind_cached, known_ids
from cascade_cli.verifiers.instruction.verifier import (
    Evaluation,
    InstructionVerifier,
    accuracy,
    evaluate,
    loose_variants,
    parse_instructions,
)


def clear_caches() -> None:
    """Forget bound checkers, language verdicts and n-gram tables (benchmarks time cold scoring)."""
    _bind_cached.cache_clear()
    text.clear_caches()


__all__ = [
    "REGISTRY",
    "Evaluation",
    "InstructionVerifier",
    "accuracy",
    "clear_caches",
    "evaluate",
    "known_ids",
    "loose_variants",
    "parse_instructions",
]
