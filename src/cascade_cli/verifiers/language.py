"""The `language` verifier: reward 1 when a response keeps its prompt's script and language, 0 when it
code-switches (the detection: code_switch.py). RLHF's code-switch penalty scores through it."""

from __future__ import annotations

from typing import Any

from cascade_cli.records import prompt_text
from cascade_cli.verifiers.base import Score, Verifier, require_response
from cascade_cli.verifiers.code_switch import detect_code_switch


class LanguageVerifier(Verifier):
    """Domain `language`: reward 1 when the response keeps its prompt's script and language, 0 when it
    code-switches. RLHF's code-switch check scores through it, on the batch path; any label is accepted."""

    domain = "language"

    def verify_one(self, record: dict[str, Any]) -> Score:
        result = detect_code_switch(prompt_text(record.get("prompt")), require_response(record))
        details: dict[str, Any] = {"code_switch": result.switched}
        if result.switched:
            details["code_switch_reason"] = result.reason
        return Score(0.0 if result.switched else 1.0, not result.switched, details)
