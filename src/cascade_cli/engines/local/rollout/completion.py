"""What a generator is asked for (`Sampling`) and what it returns (`Completion`), for both backends (the hf
loop, hf_decode.py, and vLLM), and which stop strings are single tokens."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

FinishReason = Literal["stop", "length"]


@dataclass
class Completion:
    text: str
    token_ids: list[int]
    finish_reason: FinishReason
    logprob_sum: float | None = None
    token_logprobs: list[float] | None = None  # vLLM with logprobs=True: each sampled token's log-prob


@dataclass(frozen=True)
class Sampling:
    """What `generate` asks of either backend."""

    n: int
    max_new_tokens: int
    temperature: float
    top_p: float
    top_k: int
    stop: list[str]
    logprobs: bool


def _stop_token_ids(tokenizer: Any, stop: Sequence[str]) -> tuple[list[int], list[str]]:
    """Split stop strings into single-token ids (checked on ids, fast) and multi-token strings (on text)."""
    ids: list[int] = []
    strings: list[str] = []
    for text in stop:
        encoded = tokenizer.encode(text, add_special_tokens=False)
        if len(encoded) == 1:
            ids.append(encoded[0])
        else:
            strings.append(text)
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
        ids.append(tokenizer.eos_token_id)
    return ids, strings
