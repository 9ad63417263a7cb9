"""Shared by the RL tests (no tests here): the embedded tiny model and a dense toy verifier.

The toy verifier gives every rollout a graded reward (the share of the answer's characters equal to the
label's letter), so a random-init model gets a learning signal in a few steps; the real verifiers and the
SFT'd tiny model are used by the learning tests.
"""

from __future__ import annotations

import os
import random
import signal
import string
import sys
from pathlib import Path
from typing import Any

from cascade_cli.chat import answer_text
from cascade_cli.models.tiny import build_tiny
from cascade_cli.verifiers.base import RecordError, Score, Verifier, parse_label, require_response

TOY_DOMAIN = "math"  # the toy verifier stands in for a registered domain inside one test process
# Per-step metrics that measure time, not learning: left out when two runs are compared.
TIME_KEYS = frozenset(
    {"tokens_per_s", "time_generate", "time_verify", "time_verify_wait", "time_train", "time_sync", "time_step"}
)


def without_timings(metrics: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per-step metrics lines without their timings: what must match between two runs of the same seed."""
    return [{k: v for k, v in line.items() if k not in TIME_KEYS} for line in metrics]


def build_model_dir(path: Path, seed: int = 0) -> Path:
    return build_tiny(f"tiny:{seed}", path)


class LetterVerifier(Verifier):
    """reward = share of the answer's characters found in label["answer"] (a character set); passed when at
    least half are.

    The label "boom" raises inside the verifier (to test that one error scores 0 and never kills a run).
    """

    domain = "toy"

    def check_label(self, label: Any) -> str | None:
        if not isinstance(label, dict) or not isinstance(label.get("answer"), str) or not label["answer"]:
            return f"expected an object with a non-empty string 'answer'; found {label!r}"
        return None

    def verify_one(self, record: dict[str, Any]) -> Score:
        label = parse_label(record)
        problem = self.check_label(label)
        if problem:
            raise RecordError(problem)
        if label["answer"] == "boom":
            raise RuntimeError("boom")
        text = answer_text(require_response(record))
        share = sum(ch in label["answer"] for ch in text) / max(len(text), 1)
        return Score(reward=share, passed=share >= 0.5)


CHARSETS = {"lowercase": string.ascii_lowercase, "digits": string.digits, "capitals": string.ascii_uppercase}


def toy_rows(n: int, seed: int = 0, kinds: tuple[str, ...] = ("lowercase", "digits")) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        kind = rng.choice(kinds)
        rows.append(
            {
                "id": f"toy-{seed}-{i}",
                "domain": "math",
                "prompt": f"Write {kind}.",
                "label": {"answer": CHARSETS[kind]},
            }
        )
    return rows


KILL_AT_SCORE = "CASCADE_TEST_KILL_AT_SCORE"  # N: SIGKILL the process at its Nth reward-hook call


def cli_main() -> None:
    """The real `cascade` CLI with the toy verifier standing in for `math` (for subprocess tests), and a
    kill point inside scoring: `KILL_AT_SCORE=N` SIGKILLs the process at its Nth `VerifierReward.score`."""
    from cascade_cli import verifiers
    from cascade_cli.cli import main
    from cascade_cli.engines.local.train import rl_rewards

    verifiers._REGISTRY[TOY_DOMAIN] = "test_grpo_support:LetterVerifier"
    wanted, calls, real_score = int(os.environ.get(KILL_AT_SCORE) or 0), [0], rl_rewards.VerifierReward.score

    def score(self: rl_rewards.VerifierReward, records: list[dict[str, Any]]) -> list[Score]:
        calls[0] += 1
        if calls[0] == wanted:
            os.kill(os.getpid(), signal.SIGKILL)
        return real_score(self, records)

    rl_rewards.VerifierReward.score = score  # type: ignore[method-assign]
    sys.argv = ["cascade", *sys.argv[1:]]
    main()
