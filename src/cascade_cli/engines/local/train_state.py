"""Old home of the optimizer helpers and the global-RNG pair; kept so existing imports keep working.
New code imports `engines.local.optim` (adamw, warmup_cosine) and `engines.local.checkpoint` (RNG, state)."""

from cascade_cli.engines.local.checkpoint import rng_state, set_rng_state
from cascade_cli.engines.local.optim import adamw, warmup_cosine

__all__ = ["adamw", "rng_state", "set_rng_state", "warmup_cosine"]
