"""The tiny tasks' shared parts: the `Task` every domain builds and the pools that keep splits disjoint.

Every problem has a key (its operation and numbers, its function template, its topic and constraints) and a
hash of that key puts the problem in exactly one pool: `sft` (the SFT mix), `rl` (the per-domain RL prompts)
or `heldout` (evaluation). See `cascade_cli.data.tiny_tasks` for how the splits read the pools.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass, field
from typing import Any

from cascade_cli.chat import format_response

_POOL_SHARES = (("sft", 50), ("rl", 35), ("heldout", 15))


def _key_hash(key: str) -> int:
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)


def pool_of(key: str) -> str:
    """The one pool a problem key belongs to (stable across Python versions and machines)."""
    bucket = _key_hash(key) % 100
    for pool, share in _POOL_SHARES:
        if bucket < share:
            return pool
        bucket -= share
    raise AssertionError("unreachable")


@functools.lru_cache(maxsize=256)
def stratified_pools(keys: tuple[str, ...], heldout_share: float, rl_share: float) -> dict[str, str]:
    """Pools for the keys of one family of problems (a code template's constants), split within the family.

    Hashing each key on its own can leave a small family with no SFT key at all (then its held-out problems
    test an operation the model never saw) or with no RL key (then RL cannot improve it). Here the keys are
    ranked by their hash and split by the shares, so a family of three or more keys has at least one key in
    every pool; a smaller family goes to SFT only.
    """
    ranked = sorted(keys, key=_key_hash)
    if len(ranked) < 3:
        return dict.fromkeys(ranked, "sft")
    n_heldout = max(1, round(len(ranked) * heldout_share))
    n_rl = max(1, round(len(ranked) * rl_share))
    pools = ["heldout"] * n_heldout + ["rl"] * n_rl
    pools += ["sft"] * (len(ranked) - len(pools))
    return dict(zip(ranked, pools, strict=True))


def pool_for(domain: str, split: str) -> str:
    if split == "heldout":
        return "heldout"
    return "sft" if domain == "sft" else "rl"


@dataclass
class Task:
    """One problem: a prompt, its label, a right answer and (when the domain has one) a wrong answer."""

    task: str  # math | code | swe | if | general
    key: str
    prompt: str
    label: dict[str, Any]
    answer: str
    thinking: str
    wrong_answer: str | None = None
    wrong_thinking: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    pool: str = ""  # sft | rl | heldout; by default `pool_of(key)`

    def __post_init__(self) -> None:
        self.pool = self.pool or pool_of(self.key)

    def response(self, mode: str, correct: bool = True) -> str:
        answer = self.answer if correct or self.wrong_answer is None else self.wrong_answer
        thinking = self.thinking if correct or self.wrong_thinking is None else self.wrong_thinking
        return format_response(answer, thinking if mode == "think" else None)
