"""The verifier contract: `verify_batch(records) -> list[Score]`.

A record is a rollout record: `{"id", "prompt", "response", "label", "domain", "mode", "finish_reason"}`.
Verifiers are pure (no globals mutated), deterministic, and safe to call from threads and processes.
A bad record never raises out of a batch: it scores 0 with `details["error"]` saying what was wrong.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Score:
    reward: float
    passed: bool
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class RecordError(ValueError):
    """A record the verifier cannot read (missing response, label of the wrong shape, ...)."""


def error_score(message: str, **details: Any) -> Score:
    return Score(reward=0.0, passed=False, details={"error": message, **details})


def parse_label(record: dict[str, Any]) -> Any:
    """The label as an object; a JSON string (OpenRLHF's `--data.label_key`) is decoded."""
    if "label" not in record:
        raise RecordError("missing field 'label'")
    label = record["label"]
    if isinstance(label, str):
        stripped = label.strip()
        if stripped.startswith("{") or stripped.startswith("["):
            try:
                return json.loads(stripped)
            except json.JSONDecodeError as error:
                raise RecordError(f"label is not valid JSON: {error.msg}") from None
    return label


def require_response(record: dict[str, Any]) -> str:
    if "response" not in record:
        raise RecordError("missing field 'response'")
    response = record["response"]
    if not isinstance(response, str):
        raise RecordError(f"'response' must be a string; found {type(response).__name__}")
    return response


class Verifier:
    """One domain's checker. Subclasses implement `verify_one`; `check_label` validates data up front."""

    domain: str = ""

    def verify_one(self, record: dict[str, Any]) -> Score:  # pragma: no cover - abstract
        raise NotImplementedError

    def check_label(self, label: Any) -> str | None:
        """None when the label is usable, else a message saying what was expected and found."""
        return None

    def score(self, record: dict[str, Any]) -> Score:
        """`verify_one` with the guarantee that nothing raises: errors become reward-0 scores."""
        try:
            return self.verify_one(record)
        except RecordError as error:
            return error_score(str(error))
        except Exception as error:  # a verifier bug must not kill a training run
            return error_score(f"verifier error: {type(error).__name__}: {error}")

    def verify_batch(self, records: list[dict[str, Any]]) -> list[Score]:
        return [self.score(record) for record in records]
