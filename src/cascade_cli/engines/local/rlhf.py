"""RLHF on the local engine: `cascade rlhf` = the GRPO trainer with a reward-model reward hook.

The hook (Nemotron-Cascade §2.2):
  score     the RM's value for the conversation with the answer only (text after `</think>`; the whole
            response when it is missing, so unfinished thinking is scored as its own answer);
  finalize  over the whole round: a code-switching response gets the lowest score in the batch minus
            `code_switch_margin` (the `language` verifier through verify_batch, prompt vs whole response);
  shape     optional stabiliser: each group's rewards z-scored, then tanh, before the GRPO advantage.
Half of each batch's prompts think and half do not (`mode: half`, the trainer's prompt_mode).
"""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

import torch

from cascade_cli.chat import prompt_messages
from cascade_cli.checkpoint import require_model_dir
from cascade_cli.config.rlhf import REWARD_SHAPINGS, RLHFConfig
from cascade_cli.engines.local.grpo import run_grpo
from cascade_cli.engines.local.reward_model import load_reward_model, rm_text, score_texts
from cascade_cli.engines.local.rl_data import check_rows
from cascade_cli.engines.local.rl_rewards import RewardHook
from cascade_cli.errors import CascadeUsageError
from cascade_cli.models.tiny import resolve_model
from cascade_cli.records import load_rows
from cascade_cli.verifiers import Score, verify_batch


def apply_code_switch_penalty(rewards: list[float], switched: list[bool], margin: float) -> list[float]:
    """Code-switching responses get min(rewards of the batch) - margin; others keep theirs."""
    if not any(switched):
        return list(rewards)
    floor = min(rewards) - margin
    return [floor if s else r for r, s in zip(rewards, switched, strict=True)]


def zscore_tanh(rewards: list[float], eps: float = 1e-6) -> list[float]:
    """One group's rewards z-scored within the group, then squashed to (-1, 1)."""
    if len(rewards) < 2:
        return list(rewards)
    values = torch.tensor(rewards, dtype=torch.float64)
    return [math.tanh(float(v)) for v in (values - values.mean()) / (values.std() + eps)]


class RewardModelReward(RewardHook):
    """Scores rollout records with a Bradley-Terry reward model (see the module docstring)."""

    overlap = True

    def __init__(
        self,
        path: str | Path,
        *,
        batch_size: int = 32,
        max_len: int = 4096,
        code_switch_penalty: bool = True,
        code_switch_margin: float = 10.0,
        shaping: str = "none",
        device: str | None = None,
    ) -> None:
        if shaping not in REWARD_SHAPINGS:
            raise CascadeUsageError(f"reward_shaping: expected one of {', '.join(REWARD_SHAPINGS)}; found {shaping!r}")
        self.model, self.tokenizer = load_reward_model(path, device=device)
        self.model.eval().requires_grad_(False)
        self.batch_size, self.max_len = batch_size, max_len
        self.code_switch_penalty, self.code_switch_margin = code_switch_penalty, code_switch_margin
        self.shaping = shaping
        self._lock = threading.Lock()  # one RM forward at a time (score may run in a background thread)

    def score(self, records: list[dict[str, Any]]) -> list[Score]:
        texts = [
            rm_text(prompt_messages(r["prompt"]), r["response"], r.get("mode") or "no_think") for r in records
        ]
        with self._lock:
            values = score_texts(self.model, self.tokenizer, texts, self.max_len, self.batch_size)
        checks = verify_batch(records, domain="language") if self.code_switch_penalty else None
        scores = []
        for index, value in enumerate(values):
            details: dict[str, Any] = {"rm_score": value}
            if checks is not None:
                details.update(checks[index].details)
            scores.append(Score(reward=value, passed=not details.get("code_switch", False), details=details))
        return scores

    def finalize(self, records: list[dict[str, Any]], scores: list[Score]) -> list[Score]:
        switched = [bool(s.details.get("code_switch")) for s in scores]
        rewards = apply_code_switch_penalty([s.reward for s in scores], switched, self.code_switch_margin)
        return [
            Score(reward=r, passed=s.passed, details=s.details) if r != s.reward else s
            for r, s in zip(rewards, scores, strict=True)
        ]

    def shape(self, rewards: list[float]) -> list[float]:
        return zscore_tanh(rewards) if self.shaping == "zscore_tanh" else list(rewards)

    def close(self) -> None:
        self.model = None


def run_rlhf(config: RLHFConfig) -> dict[str, Any]:
    """`cascade rlhf`: GRPO with the reward model's scores; writes the checkpoint directory + manifest."""
    reward_model = require_model_dir(resolve_model(config.reward_model), "reward model")
    require_model_dir(resolve_model(config.init or ""), "init checkpoint")
    rows = load_rows(config.data)
    check_rows(rows, None, config.data)
    eval_rows = None
    if config.eval_data:
        eval_rows = load_rows(config.eval_data)
        check_rows(eval_rows, None, config.eval_data)
    reward = RewardModelReward(
        reward_model,
        batch_size=config.rm_batch_size,
        max_len=config.rm_max_len,
        code_switch_penalty=config.code_switch_penalty,
        code_switch_margin=config.code_switch_margin,
        shaping=config.reward_shaping,
        device="cuda" if torch.cuda.is_available() else "cpu",
    )
    return run_grpo(config, reward, domain="general", mode=config.mode or "half", rows=rows, eval_rows=eval_rows)
