"""Memory-safe log-probs for the policy-gradient loss: hidden states first, then the LM head in chunks.

    hidden, tokens, present = response_hidden(model, prompts, responses, pad, device)  # [B, R, H]
    logprobs, entropy = token_logprobs(hidden, model.get_output_embeddings(), tokens, temperature)  # [B, R]

`token_logprobs` never builds a float32 [B, R, V] tensor: it applies the LM head to `chunk_tokens` positions
at a time, keeps only each position's log-prob and entropy, and recomputes a chunk's logits in the backward
pass (activation checkpointing per chunk), so peak memory is ~chunk_tokens x V, whatever B x R is.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.checkpoint import checkpoint

from cascade_cli.engines.local import grad_checkpointing
from cascade_cli.engines.local.fast_attention import cached_forward, left_pad

DEFAULT_CHUNK_TOKENS = 1024


def response_hidden(
    model: Any, prompts: list[list[int]], responses: list[list[int]], pad: int, device: str
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Final hidden states [B, R, H] at the positions that predict each response token, the tokens [B, R]
    (right-padded) and a [B, R] mask of the real ones.

    Consecutive rows whose prompt is the same list object share it: it runs through the model once (with
    gradients) and its KV cache is gathered for every response, then the responses run on top of it.
    """
    from transformers import DynamicCache

    unique: list[list[int]] = []
    prompt_of: list[int] = []
    for prompt in prompts:
        if not unique or unique[-1] is not prompt:
            unique.append(prompt)
        prompt_of.append(len(unique) - 1)
    width = max(len(r) for r in responses)
    tokens = torch.full((len(responses), width), pad, dtype=torch.long)
    present = torch.zeros((len(responses), width), dtype=torch.long)
    for row, response in enumerate(responses):
        tokens[row, : len(response)] = torch.tensor(response)
        present[row, : len(response)] = 1
    prompt_ids, prompt_mask = (t.to(device) for t in left_pad(unique, pad))
    tokens, present, index = tokens.to(device), present.to(device), torch.tensor(prompt_of, device=device)

    base = model.base_model  # the decoder without its LM head
    if grad_checkpointing.active(model):  # its layers would drop the KV cache: one pass per row instead
        hidden = grad_checkpointing.joint_hidden(base, prompt_ids[index], prompt_mask[index], tokens, present)
        return hidden, tokens, present
    cache = DynamicCache()
    prompt_positions = (prompt_mask.cumsum(-1) - 1).clamp(min=0)
    last = cached_forward(base, prompt_ids, prompt_mask, prompt_positions, cache).last_hidden_state[:, -1:]
    if width == 1:
        return last[index], tokens, present
    cache.batch_select_indices(index)
    attention = torch.cat([prompt_mask[index], present], dim=1)
    positions = prompt_positions[index, -1:] + 1 + torch.arange(width, device=device)
    rest = cached_forward(base, tokens[:, :-1], attention[:, :-1], positions[:, :-1], cache).last_hidden_state
    return torch.cat([last[index], rest], dim=1), tokens, present


def _chunk_logprobs(
    hidden: torch.Tensor, tokens: torch.Tensor, lm_head: torch.nn.Module, temperature: float, entropy_grad: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    logits = (lm_head(hidden) / temperature).float()  # the sampling distribution's logits, [N, V]
    logprobs_all = logits.log_softmax(-1)
    # An entropy no loss term differentiates must not record a graph: its saved [N, V] tensors would live
    # (recomputed by the checkpoint, never consumed) until the whole backward pass ends.
    source = logprobs_all if entropy_grad else logprobs_all.detach()
    entropy = -(source.exp() * source).sum(-1)
    return logprobs_all.gather(-1, tokens[:, None]).squeeze(-1), entropy


def token_logprobs(
    hidden: torch.Tensor,  # [B, T, H]
    lm_head: torch.nn.Module,
    tokens: torch.Tensor,  # [B, T]
    temperature: float = 1.0,
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
    entropy_grad: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(log-probs, entropy) [B, T] float32 of `tokens` under softmax(lm_head(hidden) / temperature).

    The entropy carries gradients only with `entropy_grad` (an entropy bonus); else it is a detached metric."""
    batch, length, size = hidden.shape
    flat_hidden, flat_tokens = hidden.reshape(batch * length, size), tokens.reshape(batch * length)
    needs_grad = hidden.requires_grad or any(p.requires_grad for p in lm_head.parameters())
    recompute = torch.is_grad_enabled() and needs_grad
    logprobs, entropy = [], []
    for start in range(0, batch * length, max(1, chunk_tokens)):
        part = slice(start, start + chunk_tokens)
        args = (flat_hidden[part], flat_tokens[part], lm_head, temperature, entropy_grad)
        chunk = checkpoint(_chunk_logprobs, *args, use_reentrant=False) if recompute else _chunk_logprobs(*args)
        logprobs.append(chunk[0])
        entropy.append(chunk[1])
    return torch.cat(logprobs).view(batch, length), torch.cat(entropy).view(batch, length)
