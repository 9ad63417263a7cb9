"""A test-only verifier (registered from tests as domain "echo"): reward 1 when the answer after `</think>`
equals label.expected. label.sleep_s makes it slow (timeouts), label.exit makes the worker die."""

from __future__ import annotations

import os
import time
from typing import Any

from cascade_cli.chat import answer_text
from cascade_cli.verifiers.base import RecordError, Score, Verifier, parse_label, require_response

TARGET = "echo_verifier:EchoVerifier"


class EchoVerifier(Verifier):
    domain = "echo"

    def __init__(self, bonus: float = 0.0) -> None:
        self.bonus = float(bonus)

    def check_label(self, label: Any) -> str | None:
        if not isinstance(label, dict) or not isinstance(label.get("expected"), str):
            return f"expected an object with a string 'expected'; found {label!r}"
        return None

    def verify_one(self, record: dict[str, Any]) -> Score:
        response = require_response(record)
        label = parse_label(record)
        problem = self.check_label(label)
        if problem:
            raise RecordError(problem)
        if label.get("sleep_s"):
            time.sleep(float(label["sleep_s"]))
        if label.get("exit"):
            os._exit(3)
        passed = answer_text(response) == label["expected"]
        return Score(float(passed) + self.bonus, passed, {"answer": answer_text(response)})
