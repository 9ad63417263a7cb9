"""Two transformers extension points that make small-batch decoding on CPU several times faster.

- `gqa_sdpa`: an attention function (registered with transformers' `AttentionInterface`) that hands grouped-query
  attention to `scaled_dot_product_attention(..., enable_gqa=True)`. transformers' own `sdpa` repeats every KV
  head in memory (`repeat_kv`) on CPU whenever a mask is passed, i.e. at every decode step of a left-padded
  batch; that copy, not the attention, was most of our rollout time (benchmarks/grpo_vs_trl.py).
- `PreallocatedKVCache`: a `DynamicCache` whose layers write each step's keys and values in place into buffers
  sized for the whole generation, instead of `torch.cat`-ing a new copy of the cache at every token.

Both are numerically the same computation (tests/test_fast_attention.py checks logits, gradients and greedy
tokens against the stock path).
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from transformers import AttentionInterface
from transformers.cache_utils import Cache, DynamicLayer
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

GQA_SDPA = "cascade_gqa_sdpa"


def gqa_sdpa(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' attention-function contract: [B, H, Q, D] inputs, [B, Q, H, D] output."""
    q_length = query.shape[2]
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    causal = bool(q_length > 1 and attention_mask is None and causal)
    if attention_mask is not None and attention_mask.shape[-1] != key.shape[-2]:
        attention_mask = attention_mask[..., : key.shape[-2]]
    output = torch.nn.functional.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=attention_mask,
        dropout_p=dropout,
        scale=scaling,
        is_causal=causal,
        enable_gqa=key.shape[1] != query.shape[1],
    )
    return output.transpose(1, 2).contiguous(), None


AttentionInterface.register(GQA_SDPA, gqa_sdpa)
# The same masks as stock `sdpa` (a custom attention without a registered mask function gets no mask at all).
AttentionMaskInterface.register(GQA_SDPA, sdpa_mask)


def use_gqa_sdpa(model: Any) -> bool:
    """Switch a CPU transformers model from stock `sdpa` to `gqa_sdpa`; True when it did.

    CPU only: on CUDA a mask plus `enable_gqa` sends SDPA to its slow math kernel, which is why transformers
    repeats the KV heads there (and why we leave GPU models alone)."""
    config = getattr(model, "config", None)
    if getattr(config, "_attn_implementation", None) != "sdpa":
        return False
    parameter = next(model.parameters(), None)
    if parameter is None or parameter.device.type != "cpu":
        return False
    try:
        model.set_attn_implementation(GQA_SDPA)
    except (ValueError, AttributeError):  # models without AttentionInterface dispatch keep their attention
        return False
    return getattr(model.config, "_attn_implementation", None) == GQA_SDPA


class PreallocatedLayer(DynamicLayer):
    """A cache layer with room for `capacity` positions; `keys`/`values` are views of the filled part."""

    def __init__(self, capacity: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.capacity = capacity
        self.length = 0

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.dtype, self.device = key_states.dtype, key_states.device
        batch, heads, _, dim = key_states.shape
        self._key_buffer = key_states.new_empty((batch, heads, self.capacity, dim))
        self._value_buffer = value_states.new_empty((batch, value_states.shape[1], self.capacity, dim))
        self.length = 0
        self.is_initialized = True

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        end = self.length + key_states.shape[-2]
        if end > self.capacity:
            raise ValueError(f"KV cache capacity {self.capacity} exceeded ({end} positions)")
        self._key_buffer[:, :, self.length : end] = key_states
        self._value_buffer[:, :, self.length : end] = value_states
        self.length = end
        self.keys = self._key_buffer[:, :, :end]
        self.values = self._value_buffer[:, :, :end]
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length if self.is_initialized else 0

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.get_seq_length() > 0:
            self._key_buffer = self._key_buffer.repeat_interleave(repeats, dim=0)
            self._value_buffer = self._value_buffer.repeat_interleave(repeats, dim=0)
            self.keys = self._key_buffer[:, :, : self.length]
            self.values = self._value_buffer[:, :, : self.length]

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.get_seq_length() > 0:
            self._key_buffer = self._key_buffer[indices]
            self._value_buffer = self._value_buffer[indices]
            self.keys = self._key_buffer[:, :, : self.length]
            self.values = self._value_buffer[:, :, : self.length]


class PreallocatedKVCache(Cache):
    """A KV cache for a generation of at most `capacity` positions (prompt + new tokens)."""

    def __init__(self, capacity: int) -> None:
        super().__init__(layer_class_to_replicate=functools.partial(PreallocatedLayer, capacity))


# ---- batches over a KV cache (the rollout loop and the trainer's shared-prompt forward) -----------------


def left_pad(sequences: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, mask) [N, W], left-padded: every row's last token sits in the last column."""
    width = max(len(ids) for ids in sequences)
    ids = torch.full((len(sequences), width), pad, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, tokens in enumerate(sequences):
        ids[row, width - len(tokens) :] = torch.tensor(tokens, dtype=torch.long)
        mask[row, width - len(tokens) :] = 1
    return ids, mask


def cached_forward(
    module: Any, ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, cache: Any, **kw: Any
) -> Any:
    """One forward of a transformers module (a CausalLM or its base model) that extends `cache`."""
    return module(
        input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=cache, use_cache=True, **kw
    )
