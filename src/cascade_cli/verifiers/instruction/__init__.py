"""Instruction-following verifier (domain `if`): IFEval's 25 instructions and IFBench's rule-checkable ones."""

from cascade_cli.verifiers.instruction.registry import REGISTRY, known_ids
from cascade_cli.verifiers.instruction.verifier import (
    Evaluation,
    InstructionVerifier,
    accuracy,
    evaluate,
    loose_variants,
    parse_instructions,
)

__all__ = [
    "REGISTRY",
    "Evaluation",
    "InstructionVerifier",
    "accuracy",
    "evaluate",
    "known_ids",
    "loose_variants",
    "parse_instructions",
]
