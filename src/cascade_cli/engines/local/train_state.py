"""Optimizer, LR schedule and `trainer_state/` (save + exact resume) shared by the local trainers."""

from __future__ import annotations

import json
import math
import os
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from cascade_cli.checkpoint import TRAINER_STATE_DIR


def adamw(model: torch.nn.Module, lr: float, betas: tuple[float, float], weight_decay: float):
    """AdamW with no decay on norms and biases (1-D parameters)."""
    decay = [p for p in model.parameters() if p.requires_grad and p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.ndim < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=betas, foreach=True)


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


def rng_state() -> dict[str, Any]:
    state = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.random.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.random.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def state_dir(out_dir: str | Path) -> Path:
    return Path(out_dir) / TRAINER_STATE_DIR


def save_trainer_state(out_dir: str | Path, model, optimizer, scheduler, progress: dict[str, Any]) -> Path:
    """Write trainer_state/ atomically: a kill mid-save leaves the previous state intact."""
    final = state_dir(out_dir)
    staging = final.with_name(TRAINER_STATE_DIR + ".tmp")
    previous = final.with_name(TRAINER_STATE_DIR + ".old")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    torch.save(model.state_dict(), staging / "model.pt")
    torch.save(optimizer.state_dict(), staging / "optimizer.pt")
    torch.save(scheduler.state_dict(), staging / "scheduler.pt")
    torch.save(rng_state(), staging / "rng.pt")
    (staging / "progress.json").write_text(json.dumps(progress, indent=2, default=str) + "\n")
    shutil.rmtree(previous, ignore_errors=True)
    if final.exists():
        os.replace(final, previous)
    os.replace(staging, final)
    shutil.rmtree(previous, ignore_errors=True)
    return final


def find_trainer_state(out_dir: str | Path) -> Path | None:
    """The last complete trainer_state/ (or the one a kill left as .old mid-swap)."""
    final = state_dir(out_dir)
    for candidate in (final, final.with_name(TRAINER_STATE_DIR + ".old")):
        if (candidate / "progress.json").is_file():
            return candidate
    return None


def read_progress(path: Path) -> dict[str, Any]:
    return json.loads((path / "progress.json").read_text())


def load_trainer_state(path: Path, model, optimizer, scheduler) -> dict[str, Any]:
    model.load_state_dict(torch.load(path / "model.pt", map_location="cpu", weights_only=True))
    optimizer.load_state_dict(torch.load(path / "optimizer.pt", map_location="cpu", weights_only=True))
    scheduler.load_state_dict(torch.load(path / "scheduler.pt", weights_only=False))
    set_rng_state(torch.load(path / "rng.pt", weights_only=False))
    return read_progress(path)
