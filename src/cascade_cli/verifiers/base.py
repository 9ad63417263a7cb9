"""The verifier contract: `score(record) -> Score`, never raising; a batch goes through `batch.py`.

A record is a rollout record: `{"id", "prompt", "response", "label", "domain", "mode", "finish_reason"}`.
Verifiers are pure (no globals mutated), deterministic, and safe to call from threads and processes.
A bad record never raises out of a batch: it scores 0 with `details["error"]` saying what was wrong.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from cascade_cli.records import prompt_text

# A domain option read by the batch scorer (verifiers/batch.py), never passed to a verifier: seconds one record
# may take before it scores 0 (null: no limit).
RECORD_TIMEOUT_OPTION = "record_timeout_s"


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
    """One domain's checker. Subclasses implement `verify_one`; `check_label` validates data up front.

    `code_switch_reward`: when not None, a response that switches script or language away from its prompt's
    (verifiers/code_switch.py) gets this reward instead, whatever `verify_one` said (the paper: math -1,
    code 0; RLHF's "lowest in batch - 10" is batch-level and done by the trainer from `details`).
    `concurrency`: how many records the batch scorer may hand to `score` at once in threads (1: CPU-bound
    Python gains nothing from threads; code: one per warm sandbox). `interruptible`: whether a deadline may
    stop `score` anywhere in its Python code once a record is past its time limit (False where bookkeeping
    must not be cut short, e.g. code's sandbox pool; such a record's thread is given up on instead).
    """

    domain: str = ""
    code_switch_reward: float | None = None
    concurrency: int = 1
    interruptible: bool = True

    def verify_one(self, record: dict[str, Any]) -> Score:  # pragma: no cover - abstract
        raise NotImplementedError

    def read_label(self, label: Any) -> Any:
        """The label in this verifier's own form; RecordError says what was expected and found."""
        return label

    def check_label(self, label: Any) -> str | None:
        """None when the label is usable, else a message saying what was expected and found."""
        try:
            self.read_label(label)
        except RecordError as error:
            return str(error)
        return None

    def score(self, record: dict[str, Any]) -> Score:
        """`verify_one` with the guarantee that nothing raises: errors become reward-0 scores."""
        try:
            return self.apply_code_switch(record, self.verify_one(record))
        except RecordError as error:
            return error_score(str(error))
        except Exception as error:  # a verifier bug must not kill a training run
            return error_score(f"verifier error: {type(error).__name__}: {error}")

    def apply_code_switch(self, record: dict[str, Any], score: Score) -> Score:
        """Replace the reward of a code-switching response by `code_switch_reward` (no-op when None)."""
        if self.code_switch_reward is None or "error" in score.details:
            return score
        prompt, response = prompt_text(record.get("prompt")), record.get("response")
        if not prompt or not isinstance(response, str):
            return score
        from cascade_cli.verifiers.code_switch import detect_code_switch

        result = detect_code_switch(prompt, response)
        if not result.switched:
            return Score(score.reward, score.passed, {**score.details, "code_switch": False})
        details = {
            **score.details,
            "code_switch": True,
            "code_switch_reason": result.reason,
            "reward_before_code_switch": score.reward,
        }
        return Score(float(self.code_switch_reward), False, details)
