"""Where a stage runs: `local` (PyTorch in this process) or `openrlhf` (OpenRLHF jobs on a Ray cluster)."""
