"""Epoch-level prompt filtering (Nemotron-Cascade §1.5), the same rule on both engines: after each epoch the
prompts solved by none or all of their rollouts are dropped, and each dropped prompt re-enters a later epoch
with probability `hard_p` (0% solved) or `easy_p` (100% solved). Pure functions of plain JSON state, so a
resumed run draws the same prompts. The local engine's sampler (engines/local/train/rl_data.py) and the OpenRLHF
runner's epoch jobs (engines/openrlhf/epoch_jobs.py) both call these.
"""

from __future__ import annotations

import random


def epoch_pool(n_rows: int, dropped: dict[str, str], seed: int, epoch: int, hard_p: float, easy_p: float) -> list[int]:
    """The row indices of `epoch`, shuffled: every row not dropped, plus the dropped ones that re-enter
    (`dropped`: row index as a string -> "hard" | "easy")."""
    rng = random.Random(f"{seed}:{epoch}")
    pool = []
    for index in range(n_rows):
        kind = dropped.get(str(index))
        if kind is None:
            pool.append(index)
        elif rng.random() < (hard_p if kind == "hard" else easy_p):
            pool.append(index)  # re-enters this epoch; dropped again only if still 0% / 100%
    if not pool:  # everything dropped: start over rather than stall
        pool = list(range(n_rows))
    rng.shuffle(pool)
    return pool


def update_dropped(dropped: dict[str, str], stats: dict[str, list[int]]) -> dict[str, str]:
    """`dropped` after an epoch whose rollouts were `stats` (row index -> [passed, rollouts])."""
    dropped = dict(dropped)
    for index, (passed, total) in stats.items():
        if total and passed == 0:
            dropped[index] = "hard"
        elif total and passed == total:
            dropped[index] = "easy"
        else:
            dropped.pop(index, None)
    return dropped
