"""Reward hooks for the GRPO trainer: the verifier registry for RLVR; RLHF plugs in a reward-model scorer.

A hook scores rollout records (`{"id", "prompt", "response", "label", "domain", "mode", "finish_reason"}`).
`score` may run in a background thread on a chunk of a step's groups while the next chunk generates
(when `overlap` is True); `finalize` then sees the whole round at once, for batch-level rules such as
RLHF's code-switch penalty (lowest score in the batch minus 10).
"""

from __future__ import annotations

from typing import Any

from cascade_cli.verifiers import Score, verify_batch


class RewardHook:
    overlap: bool = True  # may score chunks concurrently with generation

    def score(self, records: list[dict[str, Any]]) -> list[Score]:  # pragma: no cover - abstract
        raise NotImplementedError

    def finalize(self, records: list[dict[str, Any]], scores: list[Score]) -> list[Score]:
        return scores

    def shape(self, rewards: list[float]) -> list[float]:
        """One group's training rewards before the advantage (RLHF: optional z-score + tanh)."""
        return rewards

    def close(self) -> None:
        pass


class VerifierReward(RewardHook):
    """Rule-based rewards through `verifiers.verify_batch` (the same code path as `cascade verify`).

    A verifier error on one record scores it 0 with `details["error"]`; it never raises.
    """

    def __init__(self, domain: str, workers: int = 1, options: dict[str, Any] | None = None) -> None:
        self.domain = domain
        self.workers = workers
        self.options = {domain: dict(options or {})}

    def score(self, records: list[dict[str, Any]]) -> list[Score]:
        return verify_batch(records, domain=self.domain, workers=self.workers, options=self.options)
