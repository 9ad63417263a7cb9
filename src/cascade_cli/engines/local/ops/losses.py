"""GRPO's math as pure functions: training rewards, group advantages, the dynamic-filter test, the loss; and
MOPD's loss (distill.py).

No model, no state: each function maps numbers to numbers, so tests can check it against closed forms.
"""

from __future__ import annotations

import math

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


IMPORTANCE_GATE = (0.5, 2.0)  # Nemotron-Cascade 2 §4.4: tokens whose train/rollout ratio leaves this band get weight 0


def mopd_loss(
    logprobs: torch.Tensor,  # [B, T] the student's log-probs of the sampled tokens (with gradients)
    teacher_logprobs: torch.Tensor,  # [B, T] each response's teacher's log-probs of the same tokens
    rollout_logprobs: torch.Tensor,  # [B, T] the rollout engine's log-probs of the same tokens
    mask: torch.Tensor,  # [B, T] 1 for tokens that carry loss
    normaliser: int,  # loss tokens in the whole step
    advantages: torch.Tensor | None = None,  # [B] task-reward group advantages (reward_weight > 0)
    reward_weight: float = 0.0,
    gate: tuple[float, float] = IMPORTANCE_GATE,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Multi-domain on-policy distillation (MOPD): -sum(w_t * a_t * log pi_student(y_t)) / normaliser with

        a_t = sg[log pi_teacher(y_t) - log pi_student(y_t)]  (+ reward_weight * the response's group advantage)
        w_t = sg[r_t] * 1[low <= r_t <= high],  r_t = pi_student(y_t) / pi_rollout(y_t)

    a_t is the per-token reverse-KL signal: positive where the teacher likes the sampled token more than the
    student. r_t corrects for the rollout engine computing other probabilities than the training pass (vLLM);
    tokens where the two disagree by more than the gate carry no loss, but stay in the mean's denominator."""
    advantage = (teacher_logprobs - logprobs).detach()
    if reward_weight and advantages is not None:
        advantage = advantage + reward_weight * advantages[:, None]
    log_ratio = logprobs.detach() - rollout_logprobs
    inside = (log_ratio >= math.log(gate[0])) & (log_ratio <= math.log(gate[1]))  # in log space: no exp rounding
    weight = torch.where(inside, log_ratio.exp(), torch.zeros_like(log_ratio))
    loss = -(weight * advantage * logprobs * mask).sum() / normaliser
    teacher_advantage = ((teacher_logprobs - logprobs.detach()) * mask).sum()
    return loss, {
        "teacher_advantage_sum": float(teacher_advantage),
        "importance_ratio_sum": float((log_ratio.exp() * mask).sum()),
        "gated_out_sum": float((~inside * mask).sum()),
    }
