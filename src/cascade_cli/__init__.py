"""cascade: Cascade RL (Nemotron-Cascade) post-training as composable commands."""

__version__ = "0.2.0"  # CHANGELOG.md: the section of this version
