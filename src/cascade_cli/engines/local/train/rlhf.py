"""RLHF on the local engine: `cascade rlhf` = the GRPO trainer with a reward-model reward hook.

The reward is RLHF's, defined once for this trainer and the reward service (verifiers/reward_model.py):
  score     the RM's value for the prompt plus the answer only (text after `</think>`; the whole response
            when it is missing, so unfinished thinking is scored as its own answer), in the policy's
            precision (`dtype: auto`: bf16 autocast where it pays, as the policy's training pass);
  finalize  over the whole round: a code-switching response gets the lowest score in the batch minus
            `code_switch_margin` (the `language` verifier, prompt vs whole response);
  shape     optional stabiliser: each group's rewards z-scored, then tanh, before the GRPO advantage.
Half of each batch's prompts think and half do not (`mode: half`, the trainer's prompt_mode).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cascade_cli.chat import render_prompt
from cascade_cli.config.rlhf import RLHFConfig
from cascade_cli.engines.local.train.grpo import load_checked_rows, run_grpo
from cascade_cli.engines.local.train.rl_rewards import RewardHook
from cascade_cli.models.resolve import resolve
from cascade_cli.verifiers import Score
from cascade_cli.verifiers import reward_model as rm


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
        precision: str = "auto",
    ) -> None:
        self.scorer = rm.RewardModelScorer(
            path, batch_size=batch_size, max_len=max_len, device=device, precision=precision
        )
        self.code_switch_penalty, self.code_switch_margin = code_switch_penalty, code_switch_margin
        self.shaping = shaping

    def score(self, records: list[dict[str, Any]]) -> list[Score]:
        texts = [rm.rm_input(render_prompt(r["prompt"], r.get("mode") or "no_think"), r["response"]) for r in records]
        values = self.scorer.scores(texts)
        checks = rm.code_switch_checks(records) if self.code_switch_penalty else None
        scores = []
        for index, value in enumerate(values):
            details: dict[str, Any] = {"rm_score": value}
            if checks is not None:
                details.update(checks[index].details)
            scores.append(Score(reward=value, passed=not details.get("code_switch", False), details=details))
        return scores

    def finalize(self, records: list[dict[str, Any]], scores: list[Score]) -> list[Score]:
        switched = [bool(s.details.get("code_switch")) for s in scores]
        rewards = rm.apply_code_switch_penalty([s.reward for s in scores], switched, self.code_switch_margin)
        return [
            Score(reward=r, passed=s.passed, details=s.details) if r != s.reward else s
            for r, s in zip(rewards, scores, strict=True)
        ]

    def shape(self, rewards: list[float]) -> list[float]:
        return rm.shape(rewards, self.shaping)

    def close(self) -> None:
        self.scorer.close()


def run_rlhf(config: RLHFConfig) -> dict[str, Any]:
    """`cascade rlhf`: GRPO with the reward model's scores; writes the checkpoint directory + manifest."""
    reward_model = resolve(config.reward_model, "reward_model")
    stage, rows, eval_rows = load_checked_rows(config, None)
    if stage.completed is not None:
        return stage.completed
    reward = RewardModelReward(
        reward_model,
        batch_size=config.rm_batch_size,
        max_len=config.rm_max_len,
        code_switch_penalty=config.code_switch_penalty,
        code_switch_margin=config.code_switch_margin,
        shaping=config.reward_shaping,
        precision=rm.scoring_precision(config.dtype),
    )
    return run_grpo(stage, reward, domain="general", mode=config.mode or "half", rows=rows, eval_rows=eval_rows)
