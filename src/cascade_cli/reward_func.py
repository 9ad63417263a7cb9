"""Compatibility: reward_func files exported before 0.3 import `cascade_cli.reward_func`; the module is now
`cascade_cli.serve.reward_func` (what `cascade verify --export-reward-func` writes today)."""

from cascade_cli.serve.reward_func import configure, reward_func

__all__ = ["configure", "reward_func"]
