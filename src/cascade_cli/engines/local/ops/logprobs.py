"""Memory-safe log-probs for the policy-gradient loss: hidden states first, then the LM head in chunks.

    hidden, tokens, present = response_hidden(model, prompts, responses, pad, device)  # [B, R, H]
    logprobs, entropy = token_logprobs(hidden, model.get_output_embeddings(), tokens, temperature)  # [B, R]

`response_hidden` runs each distinct prompt once and the responses on top of its KV cache, in buckets of
similar length (`length_buckets`), so padding costs little compute. `token_logprobs` never builds a float32
[B, R, V] tensor: it applies the LM head to `chunk_tokens` real (unpadded) positions at a time, keeps only
each position's log-prob and entropy, and recomputes a chunk's logits in the backward pass, so peak memory
is ~chunk_tokens x V, whatever B x R is.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.checkpoint import checkpoint

from cascade_cli.engines.local.ops import grad_checkpointing
from cascade_cli.engines.local.ops.fast_attention import cached_forward, left_pad

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
    parts, order = [], []
    for rows in length_buckets([len(r) for r in responses]):
        bucket = torch.tensor(rows, device=device)
        order += rows
        parts.append(
            _bucket_hidden(base, cache, last, bucket, index, prompt_mask, prompt_positions, tokens, present)
        )
    hidden = torch.cat([torch.nn.functional.pad(h, (0, 0, 0, width - h.shape[1])) for h in parts])
    return hidden[torch.tensor(order, device=device).argsort()], tokens, present


def _bucket_hidden(
    base: Any,
    cache: Any,
    last: torch.Tensor,
    rows: torch.Tensor,
    index: torch.Tensor,
    prompt_mask: torch.Tensor,
    prompt_positions: torch.Tensor,
    tokens: torch.Tensor,
    present: torch.Tensor,
) -> torch.Tensor:
    """Hidden states [len(rows), W, H] of some responses (W: their longest) over their prompts' KV cache."""
    from transformers import DynamicCache

    width = int(present[rows].sum(-1).max())
    prompt_of = index[rows]
    first = last[prompt_of]
    if width <= 1:
        return first
    bucket_cache = DynamicCache()
    for layer, cached in enumerate(cache.layers):
        bucket_cache.update(cached.keys[prompt_of], cached.values[prompt_of], layer)
    ids, real = tokens[rows, : width - 1], present[rows, : width - 1]
    attention = torch.cat([prompt_mask[prompt_of], real], dim=1)
    positions = prompt_positions[prompt_of, -1:] + 1 + torch.arange(width - 1, device=ids.device)
    rest = cached_forward(base, ids, attention, positions, bucket_cache).last_hidden_state
    return torch.cat([first, rest], dim=1)


BUCKET_COST_TOKENS = 256  # a conservative guess at one more forward pass's fixed cost, in padded tokens
MAX_BUCKETS = 4


def length_buckets(lengths: list[int], max_buckets: int = MAX_BUCKETS) -> list[list[int]]:
    """Row indices in up to `max_buckets` groups of similar length (longest first): the equal-count split of
    the sorted rows with the fewest padded tokens plus BUCKET_COST_TOKENS per extra forward pass."""
    order = sorted(range(len(lengths)), key=lambda row: -lengths[row])

    def split(count: int) -> list[list[int]]:
        size = -(-len(order) // count)
        return [order[start : start + size] for start in range(0, len(order), size)]

    def cost(buckets: list[list[int]]) -> int:
        return sum(len(b) * lengths[b[0]] for b in buckets) + BUCKET_COST_TOKENS * (len(buckets) - 1)

    return min((split(count) for count in range(1, min(max_buckets, len(order)) + 1)), key=cost)


def _chunk_logprobs(
    hidden: torch.Tensor,
    tokens: torch.Tensor,
    lm_head: torch.nn.Module,
    temperature: float,
    entropy_grad: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    logits = (lm_head(hidden) / temperature).float()  # the sampling distribution's logits, [N, V]
    logprobs_all = logits.log_softmax(-1)
    # An entropy no loss term differentiates must not record a graph: its saved [N, V] tensors would live
    # (recomputed by the checkpoint, never consumed) until the whole backward pass ends.
    source = logprobs_all if entropy_grad else logprobs_all.detach()
    entropy = -(source.exp() * source).sum(-1)
    return logprobs_all.gather(-1, tokens[:, None]).squeeze(-1), entropy


def _compute_dtype(tensor: torch.Tensor) -> torch.dtype:
    device = tensor.device.type
    return torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else tensor.dtype


class _HeadLogprobs(torch.autograd.Function):
    """log softmax(hidden @ weight.T / t)[token] for [N, H] hidden states, `chunk` rows at a time, with the
    (detached) entropy as a by-product. The backward pass recomputes each chunk's logits and writes the
    gradient in closed form, (onehot - softmax) / t. Every [chunk, V] intermediate lives in buffers allocated
    once per pass: on CPU a fresh 200 MB tensor costs more in page faults than the pass over it."""

    @staticmethod
    def forward(ctx, hidden, weight, tokens, temperature, chunk):  # noqa: ANN001, ANN205 (autograd contract)
        dtype = _compute_dtype(hidden)  # bf16 under autocast, as nn.Linear would compute
        hidden_c, weight_c = hidden.to(dtype), weight.to(dtype)
        logprobs = hidden.new_empty(len(hidden), dtype=torch.float32)
        entropy = torch.empty_like(logprobs)
        buffers = _Buffers(min(chunk, len(hidden)), len(weight), dtype, hidden.device)
        for start in range(0, len(hidden), chunk):
            part = slice(start, start + chunk)
            logits = buffers.logits(hidden_c[part], weight_c, temperature)
            logp = torch.log_softmax(logits, -1, out=buffers.other[: len(logits)])
            logprobs[part] = logp.gather(-1, tokens[part, None]).squeeze(-1)
            entropy[part] = torch.exp(logp, out=logits).mul_(logp).sum(-1).neg_()
        ctx.save_for_backward(hidden_c, weight_c, tokens)
        ctx.temperature, ctx.chunk = temperature, chunk
        ctx.dtypes = (hidden.dtype, weight.dtype)
        ctx.mark_non_differentiable(entropy)
        return logprobs, entropy

    @staticmethod
    def backward(ctx, grad_logprobs, _grad_entropy):  # noqa: ANN001, ANN205
        hidden_c, weight_c, tokens = ctx.saved_tensors
        need_hidden, need_weight = ctx.needs_input_grad[:2]
        grad_hidden = torch.empty_like(hidden_c) if need_hidden else None
        grad_weight = (
            torch.zeros(weight_c.shape, dtype=torch.float32, device=weight_c.device) if need_weight else None
        )
        weight_part = torch.empty_like(weight_c) if need_weight else None
        buffers = _Buffers(min(ctx.chunk, len(hidden_c)), len(weight_c), weight_c.dtype, hidden_c.device)
        rows = torch.arange(min(ctx.chunk, len(hidden_c)), device=hidden_c.device)
        for start in range(0, len(hidden_c), ctx.chunk):
            part = slice(start, start + ctx.chunk)
            grad = grad_logprobs[part].float()
            logits = buffers.logits(hidden_c[part], weight_c, ctx.temperature)
            softmax = torch.softmax(logits, -1, out=buffers.other[: len(logits)])
            softmax.mul_(-grad[:, None])  # d logprob[token] / d logits = onehot(token) - softmax
            softmax[rows[: len(grad)], tokens[part]] += grad
            if ctx.temperature != 1.0:
                softmax.div_(ctx.temperature)
            same_dtype = softmax.dtype == weight_c.dtype  # fp32: no cast pass
            grad_logits = softmax if same_dtype else buffers.low[: len(grad)].copy_(softmax)
            if need_hidden:
                torch.mm(grad_logits, weight_c, out=grad_hidden[part])
            if need_weight:
                grad_weight += torch.mm(grad_logits.T, hidden_c[part], out=weight_part)
        grad_hidden = grad_hidden.to(ctx.dtypes[0]) if need_hidden else None
        grad_weight = grad_weight.to(ctx.dtypes[1]) if need_weight else None
        return grad_hidden, grad_weight, None, None, None


class _Buffers:
    """The [chunk, V] scratch of one `_HeadLogprobs` pass: two float32 tensors and, under a lower compute dtype,
    the matmul's output in it."""

    def __init__(self, rows: int, vocab: int, dtype: torch.dtype, device: torch.device) -> None:
        self.low = None if dtype == torch.float32 else torch.empty((rows, vocab), dtype=dtype, device=device)
        self.high = torch.empty((rows, vocab), dtype=torch.float32, device=device)
        self.other = torch.empty_like(self.high)

    def logits(self, hidden: torch.Tensor, weight: torch.Tensor, temperature: float) -> torch.Tensor:
        """float32 hidden @ weight.T / temperature, [len(hidden), V], in `self.high`."""
        rows = len(hidden)
        if self.low is None:
            logits = torch.mm(hidden, weight.T, out=self.high[:rows])
        else:
            logits = self.high[:rows].copy_(torch.mm(hidden, weight.T, out=self.low[:rows]))
        return logits.div_(temperature) if temperature != 1.0 else logits


def _plain_head(lm_head: torch.nn.Module) -> torch.Tensor | None:
    """The weight of a bias-free nn.Linear head (what `_HeadLogprobs` computes with), else None."""
    if type(lm_head) is torch.nn.Linear and lm_head.bias is None:
        return lm_head.weight
    return None


def token_logprobs(
    hidden: torch.Tensor,  # [B, T, H]
    lm_head: torch.nn.Module,
    tokens: torch.Tensor,  # [B, T]
    temperature: float = 1.0,
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
    entropy_grad: bool = False,
    present: torch.Tensor | None = None,  # [B, T] 1 at real tokens: padding gets no LM head (0 out)
) -> tuple[torch.Tensor, torch.Tensor]:
    """(log-probs, entropy) [B, T] float32 of `tokens` under softmax(lm_head(hidden) / temperature).

    The entropy carries gradients only with `entropy_grad` (an entropy bonus); else it is a detached metric."""
    batch, length, size = hidden.shape
    flat_hidden, flat_tokens = hidden.reshape(batch * length, size), tokens.reshape(batch * length)
    where = None
    if present is not None:
        where = present.reshape(-1).nonzero().squeeze(-1)
        flat_hidden, flat_tokens = flat_hidden[where], flat_tokens[where]
    chunk = max(1, chunk_tokens)
    weight = _plain_head(lm_head)
    if weight is not None and not entropy_grad:
        logprobs, entropy = _HeadLogprobs.apply(flat_hidden, weight, flat_tokens, float(temperature), chunk)
    else:
        logprobs, entropy = _checkpointed_logprobs(
            flat_hidden, flat_tokens, lm_head, temperature, chunk, entropy_grad
        )
    if where is not None:
        logprobs = flat_hidden.new_zeros(batch * length, dtype=logprobs.dtype).index_put((where,), logprobs)
        entropy = flat_hidden.new_zeros(batch * length, dtype=entropy.dtype).index_put((where,), entropy)
    return logprobs.view(batch, length), entropy.view(batch, length)


def _checkpointed_logprobs(
    hidden: torch.Tensor,
    tokens: torch.Tensor,
    lm_head: torch.nn.Module,
    temperature: float,
    chunk: int,
    entropy_grad: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Any head (a LoRA-wrapped one, a bias) and a differentiable entropy: autograd over checkpointed chunks."""
    needs_grad = hidden.requires_grad or any(p.requires_grad for p in lm_head.parameters())
    recompute = torch.is_grad_enabled() and needs_grad
    logprobs, entropy = [], []
    for start in range(0, len(hidden), chunk):
        args = (
            hidden[start : start + chunk],
            tokens[start : start + chunk],
            lm_head,
            temperature,
            entropy_grad,
        )
        part = (
            checkpoint(_chunk_logprobs, *args, use_reentrant=False) if recompute else _chunk_logprobs(*args)
        )
        logprobs.append(part[0])
        entropy.append(part[1])
    return torch.cat(logprobs), torch.cat(entropy)
