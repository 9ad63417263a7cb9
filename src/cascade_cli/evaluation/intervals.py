"""95% bootstrap intervals over problems: what `cascade report` and `benchmarks/real_gains.py` put beside a score
and beside the change between two stages (paired: the same resampled problems on both sides)."""

from __future__ import annotations

import random

BOOTSTRAP_DRAWS = 2000


def bootstrap(
    values: list[float], paired: list[float] | None = None, seed: int = 0, scale: float = 100
) -> tuple[float, float, float]:
    """(mean, low, high) of the mean of `values` (minus `paired`, problem by problem), 95% interval, times
    `scale` (100: points of a 0-1 score). A fixed seed: the same inputs always give the same interval."""
    diffs = values if paired is None else [a - b for a, b in zip(values, paired, strict=True)]
    if not diffs:
        raise ValueError("bootstrap: no values")
    rng = random.Random(seed)
    n = len(diffs)
    means = sorted(sum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(BOOTSTRAP_DRAWS))
    low, high = means[int(0.025 * BOOTSTRAP_DRAWS)], means[int(0.975 * BOOTSTRAP_DRAWS) - 1]
    return scale * sum(diffs) / n, scale * low, scale * high
