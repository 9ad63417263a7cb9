"""GRPO's math as pure functions: training rewards, group advantages, the dynamic-filter test, the loss.

No model, no state: each function maps numbers to numbers, so tests can check it against closed forms.
"""

from __future__ import annotations

import torch


def training_rewards(
    scores: list[float], truncated: list[bool], overlong_filter: bool, truncated_reward: float | None
) -> tuple[list[float], list[bool]]:
    """(rewards, loss_mask) of one group. A truncated response gets `truncated_reward` (the paper: 0, a
    wrong answer; None: its score as is) and, with overlong filtering, is masked out of the loss too."""
    rewards = [
        truncated_reward if cut and truncated_reward is not None else float(score)
        for cut, score in zip(truncated, scores, strict=True)
    ]
    return rewards, [not (cut and overlong_filter) for cut in truncated]


def group_advantages(rewards: list[float], mask: list[bool], eps: float) -> list[float]:
    """(r - mean) / (std + eps) over the group's unmasked rewards; masked entries get 0."""
    kept = torch.tensor([r for r, m in zip(rewards, mask, strict=True) if m], dtype=torch.float64)
    if len(kept) < 2:
        return [0.0] * len(rewards)
    mean, std = kept.mean(), kept.std()
    return [float((r - mean) / (std + eps)) if m else 0.0 for r, m in zip(rewards, mask, strict=True)]


def is_uniform(rewards: list[float], mask: list[bool]) -> bool:
    """All rewards that count are equal (all correct / all wrong): no learning signal (dynamic filtering)."""
    kept = [r for r, m in zip(rewards, mask, strict=True) if m]
    return len(kept) < 2 or max(kept) == min(kept)


def grpo_loss(
    logprobs: torch.Tensor,  # [B, T] float32 log-probs of the response tokens under the policy
    mask: torch.Tensor,  # [B, T] 1 for tokens that carry loss
    advantages: torch.Tensor,  # [B]
    normaliser: int,  # token level: loss tokens in the whole step; sequence level: responses in it
    entropy: torch.Tensor | None = None,  # [B, T] the policy's entropy at each position
    ref_logprobs: torch.Tensor | None = None,  # [B, T] under the frozen reference (k3 KL)
    kl_coef: float = 0.0,
    entropy_coef: float = 0.0,
    aggregation: str = "token",
) -> tuple[torch.Tensor, dict[str, float]]:
    def reduce(values: torch.Tensor) -> torch.Tensor:
        if aggregation == "sequence":  # each response's token mean, then a sum over responses
            return ((values * mask).sum(-1) / mask.sum(-1).clamp(min=1)).sum() / normaliser
        return (values * mask).sum() / normaliser

    ratio = torch.exp(logprobs - logprobs.detach())  # == 1 on-policy; its gradient is grad(logprobs)
    loss = -reduce(advantages[:, None] * ratio)
    if entropy_coef and entropy is not None:
        loss = loss - entropy_coef * reduce(entropy)
    kl = torch.zeros(())
    if kl_coef and ref_logprobs is not None:
        log_ratio = ref_logprobs - logprobs
        kl = torch.exp(log_ratio) - log_ratio - 1  # k3 estimator of KL(policy || reference)
        loss = loss + kl_coef * reduce(kl)
        kl = (kl * mask).sum()
    entropy_sum = float((entropy.detach() * mask).sum()) if entropy is not None else 0.0
    return loss, {"entropy_sum": entropy_sum, "kl_sum": float(kl.detach())}
