"""cascade: Cascade RL (Nemotron-Cascade) post-training as composable commands."""

__version__ = "0.1.0"
