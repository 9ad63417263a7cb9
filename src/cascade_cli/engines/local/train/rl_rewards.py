"""Reward hooks for the GRPO trainer, and a step's groups of rollouts with what the loss sees of them.

A hook scores rollout records (`records.rollout_record`: {"id", "prompt", "response", "label", "domain",
"mode", "finish_reason"}): the verifier registry for RLVR; RLHF plugs in a reward-model scorer.
`score` may run in a background thread on a chunk of a step's groups while the next chunk generates
(when `overlap` is True); `finalize` then sees the whole round at once, for batch-level rules such as
RLHF's code-switch penalty (lowest score in the batch minus 10); `shape` maps one group's training rewards
before the advantage.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cascade_cli.console import print_warning
from cascade_cli.engines.local.ops.losses import group_advantages, is_uniform, training_rewards
from cascade_cli.engines.local.rollout.generation import Completion
from cascade_cli.records import rollout_record
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

    A verifier error on one record scores it 0 with `details["error"]`; it never raises. `domain=None` scores
    each record with its own domain's verifier (distill), `options` then being {domain: options}.
    """

    def __init__(self, domain: str | None, workers: int = 1, options: dict[str, Any] | None = None) -> None:
        self.domain = domain
        self.workers = workers
        self.options = {domain: dict(options or {})} if domain else dict(options or {})

    def score(self, records: list[dict[str, Any]]) -> list[Score]:
        return verify_batch(records, domain=self.domain, workers=self.workers, options=self.options)


class FuncReward(RewardHook):
    """A user's reward function (`reward_func: FILE.py:NAME`, serve/user_reward.py), called on each chunk of
    rollouts as OpenRLHF calls it: queries (rendered prompt + response), prompts, labels. A call that fails
    scores its rollouts 0 with `details["error"]` (the step's warning names it)."""

    def __init__(
        self, spec: str, tokenizer: Any, isolation: str = "none", timeout_s: float = 60.0, memory_mb: int = 4096
    ) -> None:
        from cascade_cli.serve.user_reward import RewardFunction

        self.function = RewardFunction(spec, isolation, timeout_s, memory_mb)
        self.tokenizer = tokenizer

    def score(self, records: list[dict[str, Any]]) -> list[Score]:
        from cascade_cli.engines.local.train.rl_data import render_row
        from cascade_cli.serve.user_reward import label_text

        prompts = [render_row(r, r["mode"], self.tokenizer) for r in records]
        queries = [prompt + r["response"] for prompt, r in zip(prompts, records, strict=True)]
        labels = [label_text(r.get("label"), r.get("domain")) for r in records]
        rewards, passed, error = self.function(queries, prompts, labels)
        details = {"error": error} if error else {}
        return [Score(reward, verdict, dict(details)) for reward, verdict in zip(rewards, passed, strict=True)]

    def close(self) -> None:
        self.function.close()


@dataclass
class Group:
    """One prompt's G rollouts, their scores and what the loss sees of them."""

    row_index: int
    mode: str
    prompt_ids: list[int]
    completions: list[Completion]
    scores: list[Score] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    loss_mask: list[bool] = field(default_factory=list)  # False: truncated and overlong-filtered
    advantages: list[float] = field(default_factory=list)

    @property
    def uniform(self) -> bool:
        return is_uniform(self.rewards, self.loss_mask)


def group_records(groups: list[Group], rows: list[dict[str, Any]], domain: str | None) -> list[dict[str, Any]]:
    """The rollout records of the groups' responses, with ids `ROW_ID#j` (domain None: each row's own)."""
    return [
        rollout_record(
            rows[g.row_index],
            c.text,
            domain=domain or rows[g.row_index]["domain"],
            mode=g.mode,
            finish_reason=c.finish_reason,
            record_id=f"{rows[g.row_index].get('id', g.row_index)}#{j}",
        )
        for g in groups
        for j, c in enumerate(g.completions)
    ]


def warn_verifier_errors(records: list[dict[str, Any]], scores: list[Score], step: int) -> int:
    """Warn with the first failing rollout's id; the number of rollouts a verifier error scored 0."""
    errors = [(r["id"], s.details["error"]) for r, s in zip(records, scores, strict=True) if "error" in s.details]
    if errors:
        print_warning(
            f"step {step}: {len(errors)} rollouts scored 0 after a verifier error; first: "
            f"{errors[0][0]}: {errors[0][1]}"
        )
    return len(errors)


def assign_scores(
    groups: list[Group],
    scores: list[Score],
    hook: RewardHook,
    *,
    overlong_filter: bool,
    truncated_reward: float | None,
    adv_eps: float,
) -> list[Group]:
    """Each group's scores, training rewards (truncation rule, then the hook's shaping), mask and advantages."""
    at = 0
    for group in groups:
        group.scores = scores[at : at + len(group.completions)]
        at += len(group.completions)
        truncated = [c.finish_reason == "length" for c in group.completions]
        rewards, group.loss_mask = training_rewards(
            [s.reward for s in group.scores], truncated, overlong_filter, truncated_reward
        )
        group.rewards = hook.shape(rewards)
        group.advantages = group_advantages(group.rewards, group.loss_mask, adv_eps)
    return groups
