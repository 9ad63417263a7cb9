"""transformers extension points that make small-batch decoding on CPU several times faster (with `gqa_sdpa`,
the attention every CPU model loads with: models/attention.py).

- `PreallocatedKVCache`: a `DynamicCache` whose layers write each step's keys and values in place into buffers
  sized for the whole generation, instead of `torch.cat`-ing a new copy of the cache at every token.
- `SharedPrompt`: n samples of each prompt (a GRPO group, eval's k) attend to the prompt's keys and values
  held once, not copied n times: the decode attention reads the prompt part once per prompt (one matmul of
  all its samples' queries) and each sample's own generated part, under one softmax. Decoding is memory-bound
  on CPU, and the repeated prompt cache was most of what each step read (FlashInfer and vLLM call this
  cascade attention).

All are numerically the same computation (tests/test_fast_attention.py checks logits, gradients and greedy
tokens against the stock path).
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from transformers.cache_utils import Cache, DynamicLayer


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


class SharedPrompt:
    """The prompts' keys and values, once each, for decoding `n` samples per prompt (`gqa_sdpa` reads it from
    the forward's `shared_prompt` keyword; the model's cache then holds the generated tokens only).

    Rows are samples, prompt-major: row `p * n + j` is sample j of prompt p before any row is dropped; `slot`
    keeps that index for each live row, so the prompt part is one batched matmul over a [prompts, n] grid.
    """

    def __init__(self, prompt_cache: Cache, prompt_mask: torch.Tensor, n: int) -> None:
        self.keys = [layer.keys for layer in prompt_cache.layers]  # [P, KV, W, D] per layer
        self.values = [layer.values for layer in prompt_cache.layers]
        self.bias = torch.zeros(prompt_mask.shape, device=prompt_mask.device).masked_fill(
            prompt_mask == 0, float("-inf")
        )  # [P, W]: the left padding
        self.n = n
        self.slot = torch.arange(prompt_mask.shape[0] * n, device=prompt_mask.device)
        self.row_bias = self.bias.repeat_interleave(n, dim=0)[:, None, None, :]

    def select(self, rows: torch.Tensor) -> None:
        """Keep these rows (indices into the live ones); prompts left without a sample are dropped."""
        self.slot = self.slot[rows]
        prompt_of = self.slot // self.n
        active = prompt_of.unique()
        if len(active) < len(self.bias):
            self.keys = [keys[active] for keys in self.keys]
            self.values = [values[active] for values in self.values]
            self.bias = self.bias[active]
            prompt_of = torch.searchsorted(active, prompt_of)
            self.slot = prompt_of * self.n + self.slot % self.n
        self.row_bias = self.bias[prompt_of][:, None, None, :]

    def attend(
        self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, layer: int, scaling: float | None
    ) -> torch.Tensor:
        """One decode step's attention, [B, 1, H, D], for queries [B, H, 1, D] over the prompt part and the
        generated keys/values [B, KV, L, D]."""
        prompt_keys, prompt_values = self.keys[layer], self.values[layer]
        _, kv_heads, width, dim = prompt_keys.shape
        rows, heads = query.shape[0], query.shape[1]
        group = heads // kv_heads  # query heads per KV head (GQA): head h reads KV head h // group
        q = query.reshape(rows, kv_heads, group, dim)
        scores_prompt = self._from_grid(self._to_grid(q) @ prompt_keys.transpose(-1, -2)) + self.row_bias
        scores = torch.cat([scores_prompt, q @ key.transpose(-1, -2)], dim=-1)
        weights = (scores.float() * (scaling if scaling is not None else dim**-0.5)).softmax(-1).to(q.dtype)
        weights_prompt, weights_generated = weights.split([width, key.shape[-2]], dim=-1)
        out = self._from_grid(self._to_grid(weights_prompt) @ prompt_values) + weights_generated @ value
        return out.reshape(rows, 1, heads, dim)

    def _to_grid(self, per_row: torch.Tensor) -> torch.Tensor:
        """[B, KV, G, X] per live row -> [P, KV, n * G, X] per prompt (zeros where a sample has ended)."""
        _, kv_heads, group, last = per_row.shape
        grid = per_row.new_zeros((len(self.bias) * self.n, kv_heads, group, last))
        grid = grid.index_copy_(0, self.slot, per_row).view(-1, self.n, kv_heads, group, last)
        return grid.transpose(1, 2).reshape(-1, kv_heads, self.n * group, last)

    def _from_grid(self, per_prompt: torch.Tensor) -> torch.Tensor:
        """[P, KV, n * G, X] -> [B, KV, G, X] for the live rows."""
        prompts, kv_heads, _, last = per_prompt.shape
        grid = per_prompt.view(prompts, kv_heads, self.n, -1, last).transpose(1, 2)
        return grid.reshape(prompts * self.n, kv_heads, -1, last)[self.slot]


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
