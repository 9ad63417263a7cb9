"""The hf decode loop and sampler as they were before the sort-free sampler (main at c622962,
engines/local/rollout/generation.py: `_sample`, `Generator._generate_hf`, `Generator._stop_string_hits`), kept verbatim
but for the two methods becoming functions of the generator (`self`) and the per-call set-up and output that
both loops share (`prefill`, `completion` of engines/local/rollout/hf_decode.py: outside the decode steps measured). The before side of
benchmarks/decode_loop.py and the reference of tests/test_token_sampling.py; not used by cascade itself.

    groups = generate(generator, prompts, n=8, max_new_tokens=64, temperature=1.0, top_p=0.95)
"""

from __future__ import annotations

import types
from typing import Any

import torch

from cascade_cli.engines.local.ops.fast_attention import cached_forward
from cascade_cli.engines.local.rollout.generation import Completion, Sampling, _stop_token_ids
from cascade_cli.engines.local.rollout.hf_decode import completion, prefill


def generate(self: Any, prompts: list[str], **kwargs: Any) -> list[list[Completion]]:
    """`self.generate(prompts, **kwargs)` of an hf `Generator`, its loop swapped for this one for the call."""
    self._generate_hf = types.MethodType(generate_hf, self)
    try:
        return self.generate(prompts, **kwargs)
    finally:
        del self._generate_hf


def _sample(
    logits: torch.Tensor, temperature: float, top_p: float, top_k: int, generator: torch.Generator
) -> torch.Tensor:
    """One token per row from `logits` [B, V] (float32)."""
    if temperature <= 0:
        return logits.argmax(dim=-1)
    logits = logits / temperature
    if 0 < top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        # Drop a token when the tokens ranked above it already hold top_p of the mass (keeps at least one).
        drop_sorted = (cumulative - sorted_logits.softmax(dim=-1)) >= top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    probs = logits.softmax(dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)




@torch.inference_mode()
def generate_hf(self: Any, prompts: list[str], spec: Sampling) -> list[Completion]:
    """`n` samples of each prompt, flattened in prompt order.

    Each prompt is prefilled once; its `n` samples attend to its keys and values held once
    (`SharedPrompt`, with gqa_sdpa on CPU; elsewhere the prompt cache is repeated `n` times). Rows that
    have finished are dropped from the batch (cache included) once a quarter of the live rows are done.
    """
    tokenizer, model, device = self.tokenizer, self.model, self.device
    max_new_tokens, logprobs = spec.max_new_tokens, spec.logprobs
    stop_ids, stop_strings = _stop_token_ids(tokenizer, spec.stop)
    stop_tensor = torch.tensor(stop_ids or [-1], device=device)

    was_training = model.training
    model.eval()
    start = prefill(self, prompts, spec)  # the set-up both loops share (the prompts' prefill and the rows)
    logits, cache, extra, attention, next_position = (start.logits.float(), start.cache, start.extra,
                                                      start.attention, start.next_position)  # fmt: skip
    batch, width, shared = len(logits), start.width, "shared_prompt" in extra
    generated = torch.full((batch, max_new_tokens), self.pad_id, dtype=torch.long, device=device)
    lengths = torch.zeros(batch, dtype=torch.long, device=device)
    stopped = torch.zeros(batch, dtype=torch.bool, device=device)
    logprob_sums = torch.zeros(batch, dtype=torch.float32, device=device)
    live = torch.arange(batch, device=device)  # original row of each row still in the batch
    done = torch.zeros(batch, dtype=torch.bool, device=device)  # per live row
    window = max((len(tokenizer.encode(s, add_special_tokens=False)) for s in stop_strings), default=0)
    for step in range(max_new_tokens):
        token = _sample(logits, spec.temperature, spec.top_p, spec.top_k, self.rng)
        token = torch.where(done, torch.full_like(token, self.pad_id), token)
        if logprobs:
            chosen = logits.log_softmax(-1).gather(-1, token[:, None]).squeeze(-1)
            logprob_sums[live] += torch.where(done, torch.zeros_like(chosen), chosen)
        generated[live, step] = token
        lengths[live] += (~done).long()
        hit = torch.isin(token, stop_tensor) & ~done
        if stop_strings:
            hit |= _stop_string_hits(self, generated[live], step, done, stop_strings, window)
        stopped[live] |= hit
        done |= hit
        n_done = int(done.sum())
        if n_done == len(live) or step == max_new_tokens - 1:
            break
        if n_done * 4 >= len(live):  # compact: drop finished rows from the batch and the cache
            keep = (~done).nonzero().squeeze(-1)
            cache.batch_select_indices(keep)
            if shared:
                extra["shared_prompt"].select(keep)
            else:
                attention = attention[keep]
            live, token, next_position = live[keep], token[keep], next_position[keep]
            done = done[keep]
        attention_now = None if attention is None else attention[:, : width + step + 1]
        decoded = cached_forward(model, token[:, None], attention_now, next_position, cache, **extra)
        logits = decoded.logits[:, -1].float()
        next_position = next_position + 1
    if was_training:
        model.train()

    completions: list[Completion] = []
    generated_cpu, lengths_cpu, stopped_cpu = (
        generated.cpu().tolist(),
        lengths.cpu().tolist(),
        stopped.tolist(),
    )
    for row in range(batch):
        ids = generated_cpu[row][: lengths_cpu[row]]
        logprob_sum = float(logprob_sums[row]) if logprobs else None
        completions.append(completion(tokenizer, ids, stopped_cpu[row], stop_strings, logprob_sum))
    return completions


def _stop_string_hits(
    self: Any, generated: torch.Tensor, step: int, finished: torch.Tensor, stop_strings: list[str], window: int
) -> torch.Tensor:
    """Multi-token stop strings: decode the tail of each live row (only runs when such stops exist)."""
    hits = torch.zeros_like(finished)
    tails = generated[:, max(0, step + 1 - window - 2) : step + 1].cpu().tolist()
    for row, tail in enumerate(tails):
        if not bool(finished[row]):
            text = self.tokenizer.decode(tail, skip_special_tokens=False)
            hits[row] = any(s in text for s in stop_strings)
    return hits

