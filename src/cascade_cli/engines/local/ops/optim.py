"""The optimizer and LR schedule shared by the local trainers (SFT, reward model, GRPO)."""

from __future__ import annotations

import math

import torch


def adamw(model: torch.nn.Module, lr: float, betas: tuple[float, float], weight_decay: float):
    """AdamW with no decay on norms and biases (1-D parameters)."""
    decay = [p for p in model.parameters() if p.requires_grad and p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.ndim < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=betas, **kernel([*decay, *no_decay]))


def kernel(params: list[torch.Tensor]) -> dict[str, bool]:
    """AdamW's fused kernel (one pass over every parameter) where the device has it, else the foreach one.

    A small model's step is many small tensors: one fused pass over all of them launches one kernel where
    foreach launches several per group, which shows in a compiled small-model SFT step."""
    fused = bool(params) and all(p.device.type in ("cpu", "cuda") and p.dtype.is_floating_point for p in params)
    return {"fused": True} if fused else {"foreach": True}


def warmup_cosine(total_steps: int, warmup_steps: int, lr: float, min_lr: float):
    """A LambdaLR factor: linear warmup to `lr`, then cosine down to `min_lr` at `total_steps`."""
    floor = min_lr / lr if lr > 0 else 0.0

    def factor(step: int) -> float:
        if warmup_steps > 0 and step < warmup_steps:
            return (step + 1) / warmup_steps
        span = max(1, total_steps - warmup_steps)
        progress = min(1.0, (step - warmup_steps) / span)
        return floor + (1.0 - floor) * 0.5 * (1.0 + math.cos(math.pi * progress))

    return factor


def linear_warmup(step: int, lr: float, start_lr: float, warmup_steps: int) -> float:
    """The learning rate of 0-based `step`: from `start_lr` at step 0 linearly up to `lr` at `warmup_steps`,
    then `lr` (a pure function of the step, so a resumed run needs no scheduler state)."""
    if warmup_steps <= 0 or step >= warmup_steps:
        return lr
    return start_lr + (lr - start_lr) * step / warmup_steps
