"""The attention every model loads with on a CPU (models/loader.py): `gqa_sdpa`, registered with transformers'
`AttentionInterface`, hands grouped-query attention to `scaled_dot_product_attention(..., enable_gqa=True)`.
transformers' own `sdpa` repeats every KV head in memory (`repeat_kv`) on CPU whenever a mask is passed, i.e.
at every decode step of a left-padded batch, and that copy costs more than the attention itself
(benchmarks/grpo_vs_trl.py). It is numerically the same computation (tests/test_fast_attention.py). The
rollout engine's shared-prompt decoding passes `shared_prompt` through it (engines/local/ops/fast_attention.py).
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import AttentionInterface
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
    shared = kwargs.get("shared_prompt")
    if shared is not None:
        return shared.attend(query, key, value, module.layer_idx, scaling), None
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
