"""The hf backend's decode loop (`Generator._generate_hf`): n samples of each prompt over a KV cache.

Each prompt is prefilled once; its n samples attend to its keys and values held once (`SharedPrompt`, with
gqa_sdpa on CPU; elsewhere the prompt cache is repeated n times). Every step stays on the device: sampling
(token_sampling.py), stop tokens and stop strings (stop_matching.py) and the rows' bookkeeping, with no
Python per row. The host reads two numbers a step, the rows finished and the rows the sampler left open; they
decide whether to stop, to settle open rows (rare) and to drop finished rows from the batch and the cache
(once a quarter of the live rows are done). The logits of a plain linear head are written into one buffer
for the whole call: a fresh [batch, vocabulary] tensor at every step page-faults for longer than the matmul
that fills it takes on CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch

from cascade_cli.engines.local.ops.fast_attention import (
    PreallocatedKVCache,
    SharedPrompt,
    cached_forward,
    left_pad,
)
from cascade_cli.engines.local.rollout.completion import Completion, Sampling, _stop_token_ids
from cascade_cli.engines.local.rollout.stop_matching import StopMatcher, stop_prefix_length
from cascade_cli.engines.local.rollout.token_sampling import Scratch, TokenSampler
from cascade_cli.models.attention import GQA_SDPA


class Decoder(Protocol):
    """What the loop reads of the hf backend (generation.Generator is one): the model and tokenizer, where
    they run, the pad id, the sampling RNG and whether a prompt's cache is shared by its samples."""

    model: Any
    tokenizer: Any
    device: str
    pad_id: int
    rng: torch.Generator
    share_prompt: bool

# Model types whose CausalLM head is `lm_head(hidden)` and nothing after it (no soft-capping or scaling).
PLAIN_HEAD_MODELS = frozenset({"llama", "mistral", "qwen2", "qwen3"})


class DecodeHead:
    """One decode step's next-token logits [B, V]: the decoder, then the head into a reused buffer where
    the head is plain (else the whole model, as transformers computes it)."""

    def __init__(self, model: Any) -> None:
        self.model, self.head = model, model.get_output_embeddings()
        self.plain = model.config.model_type in PLAIN_HEAD_MODELS and type(self.head) is torch.nn.Linear
        self.device_type = next(model.parameters()).device.type
        self.scratch = Scratch()

    def __call__(self, ids: torch.Tensor, mask: torch.Tensor | None, positions: torch.Tensor, cache: Any,
                 **extra: Any) -> torch.Tensor:  # fmt: skip
        if not self.plain or torch.is_autocast_enabled(self.device_type):
            return cached_forward(self.model, ids, mask, positions, cache, **extra).logits[:, -1]
        hidden = cached_forward(self.model.get_decoder(), ids, mask, positions, cache, **extra)
        hidden = hidden.last_hidden_state[:, -1]
        weight, bias = self.head.weight, self.head.bias
        logits = self.scratch.get("logits", (len(hidden), len(weight)), hidden.dtype, hidden.device)
        torch.mm(hidden, weight.t(), out=logits)
        return logits if bias is None else logits.add_(bias)


@torch.inference_mode()
def generate_hf(gen: Decoder, prompts: list[str], spec: Sampling) -> list[Completion]:
    """`spec.n` samples of each prompt, flattened in prompt order."""
    tokenizer, model, device = gen.tokenizer, gen.model, gen.device
    max_new_tokens, logprobs = spec.max_new_tokens, spec.logprobs
    stop_ids, stop_strings = _stop_token_ids(tokenizer, spec.stop)
    was_training = model.training
    model.eval()
    start = prefill(gen, prompts, spec)
    logits, cache, extra, attention, next_position = (start.logits, start.cache, start.extra, start.attention,
                                                      start.next_position)  # fmt: skip
    batch, width, shared = len(logits), start.width, "shared_prompt" in extra
    sampler = TokenSampler(spec.temperature, spec.top_p, spec.top_k, gen.rng)
    head = DecodeHead(model)
    stops = Stops(tokenizer, stop_ids, stop_strings, gen.pad_id, logits)
    # Per original row: the tokens, how many count, stopped or not, each token's log-probability.
    generated = torch.full((batch, max_new_tokens), gen.pad_id, dtype=torch.long, device=device)
    lengths = torch.zeros(batch, dtype=torch.long, device=device)
    stopped = torch.zeros(batch, dtype=torch.bool, device=device)
    token_logprobs = torch.zeros((batch, max_new_tokens) if logprobs else (0, 0), device=device)
    # Per live row: its original row, finished or not, its stop strings' match states.
    live = torch.arange(batch, device=device)
    done = torch.zeros(batch, dtype=torch.bool, device=device)
    match_state = stops.start(batch)
    for step in range(max_new_tokens):
        draw = sampler.draw(logits)
        token, hit, now_done, next_match = stops.outcome(draw.tokens, done, match_state)
        counts = [now_done.sum()] + ([] if draw.unresolved is None else [draw.unresolved.sum()])
        n_done, *n_open = torch.stack(counts).tolist()  # the step's one host read
        if n_open and n_open[0]:  # rare: a top-k tie, or every rejection draw refused
            token, hit, now_done, next_match = stops.outcome(sampler.resolve(logits, draw), done, match_state)
            n_done = int(now_done.sum())
        generated[live, step] = token
        lengths[live] += (~done).long()
        stopped[live] |= hit
        if logprobs:  # summed over each row's own tokens at the end
            token_logprobs[live, step] = _logprobs(logits, token, sampler.scratch)
        done, match_state = now_done, next_match
        if n_done == len(live) or step == max_new_tokens - 1:
            break
        if n_done * 4 >= len(live):  # compact: drop finished rows from the batch and the cache
            keep = torch.argsort(done.to(torch.uint8), stable=True)[: len(live) - n_done]
            cache.batch_select_indices(keep)
            if shared:
                extra["shared_prompt"].select(keep)
            else:
                attention = attention[keep]
            live, token, next_position, done = live[keep], token[keep], next_position[keep], done[keep]
            match_state = None if match_state is None else match_state[:, keep]
        attention_now = None if attention is None else attention[:, : width + step + 1]
        logits = head(token[:, None], attention_now, next_position, cache, **extra)
        next_position = next_position + 1
    if was_training:
        model.train()
    return _completions(tokenizer, generated, lengths, stopped, token_logprobs if logprobs else None,
                        stop_strings)  # fmt: skip


@dataclass
class Prefilled:
    """The decode loop's start: every prompt prefilled once, its n rows' first logits [B, V], the KV cache,
    the attention mask over prompt and generated tokens (None with a shared prompt, which masks its own
    padding), each row's next position, and the padded prompt width."""

    logits: torch.Tensor
    cache: PreallocatedKVCache
    extra: dict[str, Any]  # `shared_prompt` when the n rows of a prompt share its keys and values
    attention: torch.Tensor | None
    next_position: torch.Tensor
    width: int


def prefill(gen: Decoder, prompts: list[str], spec: Sampling) -> Prefilled:
    """Prefill each prompt once and lay out `spec.n` rows for it (prompt order), with a cache sized for
    `spec.max_new_tokens` more."""
    tokenizer, model, device, n, max_new_tokens = gen.tokenizer, gen.model, gen.device, spec.n, spec.max_new_tokens
    encoded = [tokenizer.encode(p, add_special_tokens=False) for p in prompts]
    input_ids, prompt_mask = (t.to(device) for t in left_pad(encoded, gen.pad_id))
    width = input_ids.shape[1]
    positions = (prompt_mask.cumsum(-1) - 1).clamp(min=0)
    implementation = getattr(model.config, "_attn_implementation", None)
    shared = gen.share_prompt and n > 1 and implementation == GQA_SDPA
    cache = PreallocatedKVCache(width + (0 if shared else max_new_tokens))
    logits = cached_forward(model, input_ids, prompt_mask, positions, cache, logits_to_keep=1).logits[:, -1]
    extra: dict[str, Any] = {}
    if shared:  # the prompts' cache stays as it is; the model's cache holds the generated tokens
        extra["shared_prompt"] = SharedPrompt(cache, prompt_mask, n)
        cache = PreallocatedKVCache(max_new_tokens)
    elif n > 1:
        cache.batch_repeat_interleave(n)
    if n > 1:
        logits = logits.repeat_interleave(n, dim=0)
        prompt_mask = prompt_mask.repeat_interleave(n, dim=0)
        positions = positions.repeat_interleave(n, dim=0)
    attention = None if shared else torch.cat(
        [prompt_mask, torch.ones((len(prompt_mask), max_new_tokens), dtype=torch.long, device=device)], 1
    )
    return Prefilled(logits, cache, extra, attention, positions[:, -1:] + 1, width)


class Stops:
    """Which rows a step's tokens finish: the stop token ids, and the stop strings' automata (per live row,
    a match state for each string)."""

    def __init__(self, tokenizer: Any, stop_ids: list[int], stop_strings: list[str], pad_id: int,
                 logits: torch.Tensor) -> None:  # fmt: skip
        self.ids = torch.tensor(stop_ids or [-1], device=logits.device)
        self.pad_id = pad_id
        self.matcher = StopMatcher(tokenizer, stop_strings, logits.shape[-1], logits.device) if stop_strings else None

    def start(self, rows: int) -> torch.Tensor | None:
        return None if self.matcher is None else self.matcher.start(rows)

    def outcome(
        self, sampled: torch.Tensor, done: torch.Tensor, match_state: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(token, stop hit, done after this step, next match states); finished rows emit pad."""
        token = torch.where(done, torch.full_like(sampled, self.pad_id), sampled)
        hit = torch.isin(token, self.ids)
        next_match = None
        if self.matcher is not None:
            string_hit, next_match = self.matcher.advance(match_state, token)
            hit |= string_hit
        hit &= ~done
        return token, hit, done | hit, next_match


def _logprobs(logits: torch.Tensor, token: torch.Tensor, scratch: Scratch) -> torch.Tensor:
    """log p(token) under the unscaled distribution, in float32."""
    buffer = scratch.get("log_softmax", tuple(logits.shape), torch.float32, logits.device)
    torch.log_softmax(logits, dim=-1, dtype=torch.float32, out=buffer)
    return buffer.gather(-1, token[:, None]).squeeze(-1)


def _completions(
    tokenizer: Any,
    generated: torch.Tensor,
    lengths: torch.Tensor,
    stopped: torch.Tensor,
    token_logprobs: torch.Tensor | None,
    stop_strings: list[str],
) -> list[Completion]:
    """One `Completion` per row; with stop strings, each row's text is checked for one the matcher missed."""
    rows = generated.cpu().tolist()
    lengths_cpu, stopped_cpu = lengths.cpu().tolist(), stopped.cpu().tolist()
    logprob_rows = None if token_logprobs is None else token_logprobs.cpu().tolist()
    completions: list[Completion] = []
    for row, tokens in enumerate(rows):
        ids, finished = tokens[: lengths_cpu[row]], stopped_cpu[row]
        if stop_strings:
            cut = stop_prefix_length(tokenizer, ids, stop_strings)
            if cut is not None and (not finished or cut < len(ids)):
                ids, finished = ids[:cut], True
        logprob_sum = None if logprob_rows is None else float(sum(logprob_rows[row][: len(ids)]))
        completions.append(completion(tokenizer, ids, finished, stop_strings, logprob_sum))
    return completions


def completion(
    tokenizer: Any, ids: list[int], finished: bool, stop_strings: list[str], logprob_sum: float | None
) -> Completion:
    """A row's `Completion`: its text decoded, cut before the first stop string when it stopped."""
    text = tokenizer.decode(ids, skip_special_tokens=True)
    if finished:
        for stop_string in stop_strings:
            end = text.find(stop_string)
            if end >= 0:
                text = text[:end]
    return Completion(text=text, token_ids=ids, finish_reason="stop" if finished else "length",
                      logprob_sum=logprob_sum)  # fmt: skip
