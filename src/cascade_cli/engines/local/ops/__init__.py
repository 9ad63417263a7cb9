"""Numeric building blocks of the local engine: the losses, chunked log-probs, LoRA, AdamW and its schedules,
precision and device rules, gradient checkpointing, compilation, the shared-prompt attention, the RNG state.

Owns no stage and no rollout: it imports nothing of `engines.local.train` or `engines.local.rollout` (only the
lower layers: config, console, errors, models), so both of them can build on it.
"""
