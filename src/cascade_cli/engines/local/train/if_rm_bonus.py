"""IF-RL with the reward-model bonus on the local engine (`rlvr --domain if`, `if_rm_bonus: true`).

The paper's thinking models (Nemotron-Cascade §4.4) pay IF-RL r = R_IF + sigmoid(z) when the IF verifier
passes (R_IF = 1), else 0, where z is the RLHF reward model's score of the answer z-scored within the prompt's
group: among answers that follow every instruction the better answer earns more, so a policy cannot gain by
shrinking its answers to what the constraints alone reward. Shared with the reward service's `if_rm`
(verifiers/reward_model.if_rm_rewards): the same rows get the same rewards on both engines.

  score     each chunk's records: the IF verifier's verdict;
  finalize  the whole round: the RM's score of RLHF's text (the rendered prompt, the answer after `</think>`,
            `<|im_end|>`), in batches of `rm_batch_size`, in the policy's precision (`dtype: auto`: bf16
            autocast where it pays), for the groups where some answer passes (in the others every reward
            is 0 whatever the RM says: most groups, early on); z within each prompt's group, then the
            reward above. details keep the verifier's reward as `score` (R_IF), the RM's
            `rm_score` (None where unscored) and `rm_z`.
The reward model loads on the policy's device once the trainer has placed the policy (`load`, run_grpo's setup).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cascade_cli.chat import render_prompt
from cascade_cli.engines.local.train.rl_rewards import RewardHook, VerifierReward
from cascade_cli.verifiers import Score
from cascade_cli.verifiers import reward_model as rm


class IfRewardModelBonus(RewardHook):
    """IF verifier + RLHF reward-model bonus (see the module docstring)."""

    overlap = True

    def __init__(
        self, verifier: VerifierReward, reward_model: str | Path, *, batch_size: int = 32, max_len: int = 4096,
        precision: str = "auto",
    ) -> None:  # fmt: skip
        self.verifier = verifier
        self.reward_model, self.batch_size, self.max_len = str(reward_model), batch_size, max_len
        self.precision = precision
        self.scorer: rm.RewardModelScorer | None = None

    def load(self, device: str | None) -> None:
        """Load the reward model (frozen) on `device`: the policy's, so both share the accelerator."""
        self.scorer = rm.RewardModelScorer(
            self.reward_model, batch_size=self.batch_size, max_len=self.max_len, device=device,
            precision=self.precision,
        )  # fmt: skip

    def score(self, records: list[dict[str, Any]]) -> list[Score]:
        return self.verifier.score(records)

    def finalize(self, records: list[dict[str, Any]], scores: list[Score]) -> list[Score]:
        if self.scorer is None:
            self.load(None)
        assert self.scorer is not None
        prompts = [rendered(r) for r in records]  # a prompt's group, as the reward service groups a request
        r_if, passed = [s.reward for s in scores], [s.passed for s in scores]
        wanted = [i for i, needed in enumerate(rm.needs_rm_score(r_if, passed, prompts)) if needed]
        rm_scores: list[float | None] = [None] * len(records)
        values = (
            self.scorer.scores([rm.rm_input(prompts[i], records[i]["response"]) for i in wanted])
            if wanted
            else []
        )
        for index, value in zip(wanted, values, strict=True):
            rm_scores[index] = value
        rewards = rm.if_rm_rewards(r_if, passed, rm_scores, prompts)
        return [
            Score(
                reward=reward,
                passed=s.passed,
                details={**s.details, "rm_score": value, "rm_z": z, "score": s.reward},
            )
            for s, value, (reward, z) in zip(scores, rm_scores, rewards, strict=True)
        ]

    def close(self) -> None:
        if self.scorer is not None:
            self.scorer.close()


def rendered(record: dict[str, Any]) -> str:
    """The record's prompt as the policy saw it (its mode's ChatML): what the RM reads before the answer."""
    return render_prompt(record["prompt"], record.get("mode") or "no_think")


def with_rm_bonus(config: Any, verifier: VerifierReward, device: str) -> IfRewardModelBonus:
    """An RLVR config's IF-RL hook with the bonus, its reward model (`config.reward_model`: a checkpoint path or
    model spec) loaded on `device`, the policy's."""
    from cascade_cli.models.resolve import resolve

    bonus = IfRewardModelBonus(
        verifier, resolve(str(config.reward_model), "reward_model"), batch_size=config.rm_batch_size,
        max_len=config.rm_max_len, precision=rm.scoring_precision(config.dtype),
    )  # fmt: skip
    bonus.load(device)
    return bonus
