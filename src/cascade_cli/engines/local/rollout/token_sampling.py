"""Next-token sampling for the hf rollout loop: temperature, top-k and top-p (nucleus) without sorting the
vocabulary, from exactly the distribution of the sort-based definition (`sorted_sample`, also the fallback).

The definition: scale the logits by 1/temperature; top-k keeps the tokens whose logit reaches the k-th largest
(ties included); top-p ranks the survivors by probability and drops a token once the tokens ranked above it
hold top_p of the mass (the first always stays); sample in proportion to the kept probabilities.

How it gets there without the sort (which, on a 49k vocabulary at batch 256, cost more than SmolLM2's forward):
- top-k: `topk(k + 1)` is the kept set, and its extra value tells whether a tie crosses the k-th place.
- top-p: rejection sampling. Draw from the whole distribution; a draw is kept when the probability of the
  tokens ranked above it is under top_p, which is exactly membership of the nucleus, so a kept draw has the
  nucleus distribution. A draw is kept with probability >= top_p, whatever the distribution's shape: a flat
  one, whose nucleus is most of the vocabulary (where a top-k pre-selection would never hold it), costs the
  same few passes over the vocabulary as a peaked one.
- draws are inverse-CDF: one uniform per draw from the loop's seeded `torch.Generator`, searched in the
  cumulative sums of blocks of `BLOCK` tokens, then inside the chosen block (no full-length scan is stored).

A row is computed the same way whatever its distribution, without a host round trip, so a GPU never waits here.
Rows the fast path leaves open (a top-k tie; every draw refused, at most (1 - top_p) ** draws of the time) come
back in `Draw.unresolved`, and `TokenSampler.resolve` settles them exactly (more draws on those rows, the sort
after `RESOLVE_ROUNDS`). The decode loop reads that count in the one host read per step that decides to stop.
Large intermediates live in reused buffers (`Scratch`): on CPU, page-faulting a fresh [batch, vocabulary]
tensor in every step costs more than the arithmetic on it.
"""

from __future__ import annotations

import math

import torch

BLOCK = 256  # tokens per block of the two-level inverse-CDF search
RESOLVE_ROUNDS = 8  # rejection rounds for open rows before the sort settles them


def draws_per_row(device: torch.device) -> int:
    """Rejection draws per row and step. Each costs a pass over the vocabulary, cheap on a GPU, where a host
    round trip to settle an open row is what costs; on CPU round trips are free and passes are not."""
    return 1 if device.type == "cpu" else 3


class Scratch:
    """Named buffers reused across steps, viewed at each step's shape (grown when a step needs more)."""

    def __init__(self) -> None:
        self._buffers: dict[str, torch.Tensor] = {}

    def get(self, name: str, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        size = math.prod(shape)
        buffer = self._buffers.get(name)
        if buffer is None or buffer.numel() < size or buffer.dtype != dtype or buffer.device != device:
            buffer = self._buffers[name] = torch.empty(size, dtype=dtype, device=device)
        return buffer[:size].view(shape)


class Draw:
    """One sampled token per row; `unresolved` [B] bool marks rows `TokenSampler.resolve` must settle."""

    def __init__(self, tokens: torch.Tensor, unresolved: torch.Tensor | None = None) -> None:
        self.tokens = tokens
        self.unresolved = unresolved


class TokenSampler:
    """Samples one token per row of `logits` [B, V] (any float dtype); temperature <= 0 is greedy."""

    def __init__(
        self,
        temperature: float,
        top_p: float = 1.0,
        top_k: int = -1,
        generator: torch.Generator | None = None,
        draws: int | None = None,
    ) -> None:
        self.temperature, self.top_p, self.top_k, self.generator = temperature, top_p, top_k, generator
        self.draws = draws  # rejection draws per row and step (None: `draws_per_row` for the device)
        self.scratch = Scratch()

    def __call__(self, logits: torch.Tensor) -> torch.Tensor:
        """Exact tokens for every row (settling open rows reads a flag on the host)."""
        draw = self.draw(logits)
        if draw.unresolved is not None and bool(draw.unresolved.any()):
            return self.resolve(logits, draw)
        return draw.tokens

    def draw(self, logits: torch.Tensor) -> Draw:
        if self.temperature <= 0:
            return Draw(logits.argmax(dim=-1))
        if 0 < self.top_k < logits.shape[-1]:
            return self._draw_top_k(logits)
        probs = self._probs(logits)
        if self.top_p >= 1.0:
            return Draw(_inverse_cdf(probs, self._uniform(logits, 1))[:, 0])
        return self._draw_nucleus(logits, probs, self.draws or draws_per_row(logits.device))

    def resolve(self, logits: torch.Tensor, draw: Draw) -> torch.Tensor:
        """`draw.tokens` with its open rows settled: new rejection rounds on those rows, then the sort."""
        tokens = draw.tokens.clone()
        if draw.unresolved is None:
            return tokens
        rows = draw.unresolved.nonzero().squeeze(-1)
        rounds = RESOLVE_ROUNDS if not 0 < self.top_k < logits.shape[-1] else 0  # a tie stays a tie
        for _ in range(rounds):
            if len(rows) == 0:
                return tokens
            again = self._draw_nucleus(logits[rows], self._probs(logits[rows]), 1)
            tokens[rows] = again.tokens
            rows = rows[again.unresolved]
        if len(rows):
            tokens[rows] = sorted_sample(logits[rows], self.temperature, self.top_p, self.top_k, self.generator)
        return tokens

    # ---- the paths ----------------------------------------------------------------------------------------

    def _draw_top_k(self, logits: torch.Tensor) -> Draw:
        k = self.top_k
        values, ids = logits.topk(k + 1, dim=-1)
        tie = values[:, k] == values[:, k - 1]  # the k-th value recurs past k: the kept set is larger
        values, ids = _stable_order(values[:, :k], ids[:, :k])
        probs = (values.float() / self.temperature).softmax(dim=-1)  # over the kept set
        return Draw(_pick_in_nucleus(probs, ids, self.top_p, self._uniform(logits, 1)), tie)

    def _draw_nucleus(self, logits: torch.Tensor, probs: torch.Tensor, draws: int) -> Draw:
        candidates = _inverse_cdf(probs, self._uniform(logits, draws))  # [B, draws]
        above = [self._mass_ranked_above(logits, probs, candidates[:, d]) for d in range(draws)]
        accepted = torch.stack(above, dim=-1) < self.top_p  # the draw is inside the nucleus
        first = accepted.to(torch.uint8).argmax(dim=-1, keepdim=True)  # the first accepted (0 when none)
        return Draw(candidates.gather(-1, first).squeeze(-1), ~accepted.any(dim=-1))

    def _mass_ranked_above(self, logits: torch.Tensor, probs: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """Per row, the probability of the tokens ranked above `tokens` [B] in the stable descending order:
        higher logits, and equal logits at lower token ids."""
        threshold = logits.gather(-1, tokens[:, None])
        higher = self.scratch.get("higher", tuple(logits.shape), probs.dtype, probs.device)
        mass = torch.gt(logits, threshold, out=higher).mul_(probs).sum(dim=-1)
        tied = self.scratch.get("tied", tuple(logits.shape), probs.dtype, probs.device)
        torch.eq(logits, threshold, out=tied)
        return mass + _count_before(tied, tokens) * probs.gather(-1, tokens[:, None]).squeeze(-1)

    def _probs(self, logits: torch.Tensor) -> torch.Tensor:
        """float32 probabilities at this temperature, in a reused buffer (scaled as the definition does)."""
        probs = self.scratch.get("probs", tuple(logits.shape), torch.float32, logits.device)
        if self.temperature == 1.0:
            return torch.softmax(logits, dim=-1, dtype=torch.float32, out=probs)
        scaled = self.scratch.get("scaled", tuple(logits.shape), torch.float32, logits.device)
        scaled.copy_(logits).div_(self.temperature)
        return torch.softmax(scaled, dim=-1, out=probs)

    def _uniform(self, logits: torch.Tensor, count: int) -> torch.Tensor:
        return torch.rand((len(logits), count), generator=self.generator, device=logits.device)


def _pick_in_nucleus(
    probs: torch.Tensor, ids: torch.Tensor, top_p: float, uniform: torch.Tensor
) -> torch.Tensor:
    """Sample `ids` [B, C] by `probs` sorted descending, within the nucleus top_p (1: all of them)."""
    cumulative = probs.cumsum(dim=-1)
    keep = probs > 0
    if top_p < 1.0:  # the mass ranked above the token is under top_p
        keep &= (cumulative - probs) < top_p
    kept = keep.sum(dim=-1, keepdim=True).clamp(min=1)  # a prefix: the first always stays
    total = cumulative.gather(-1, kept - 1)
    index = torch.searchsorted(cumulative, uniform * total, right=True)
    return ids.gather(-1, torch.minimum(index, kept - 1)).squeeze(-1)


def _block_size(vocab: int) -> int:
    """The largest power of two up to BLOCK that divides the vocabulary (blocks tile it exactly)."""
    return math.gcd(vocab, BLOCK)


def _inverse_cdf(probs: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """Token ids [B, R] drawn from `probs` [B, V] with the uniforms [B, R]: the block, then the token in it."""
    rows, vocab = probs.shape
    block = _block_size(vocab)
    grid = probs.view(rows, vocab // block, block)
    block_cumulative = grid.sum(dim=-1).cumsum(dim=-1)  # [B, blocks]
    target = uniform * block_cumulative[:, -1:]
    # A target rounded up to a total lands on the last block / token with mass (never on a zero tail).
    last_block = (block_cumulative < block_cumulative[:, -1:]).sum(dim=-1, keepdim=True)
    chosen = torch.minimum(torch.searchsorted(block_cumulative, target, right=True), last_block)  # [B, R]
    before = torch.where(chosen > 0, block_cumulative.gather(-1, (chosen - 1).clamp(min=0)), 0.0)
    inside = grid.gather(1, chosen[..., None].expand(-1, -1, block)).cumsum(dim=-1)  # [B, R, block]
    last = (inside < inside[..., -1:]).sum(dim=-1)
    offset = torch.searchsorted(inside, (target - before)[..., None], right=True).squeeze(-1)
    return chosen * block + torch.minimum(offset, last)


def _count_before(flags: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Per row of `flags` [B, V] (0/1 floats), how many are set before position `index` [B]."""
    rows, vocab = flags.shape
    block = _block_size(vocab)
    grid = flags.view(rows, vocab // block, block)
    per_block = grid.sum(dim=-1)
    earlier_blocks = (per_block.cumsum(dim=-1) - per_block).gather(-1, (index // block)[:, None]).squeeze(-1)
    inside = grid.gather(1, (index // block)[:, None, None].expand(-1, 1, block)).squeeze(1)  # [B, block]
    earlier_inside = inside * (torch.arange(block, device=flags.device) < (index % block)[:, None])
    return earlier_blocks + earlier_inside.sum(dim=-1)


def _stable_order(values: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`values` [B, C] descending, equal values by ascending id (the order of a stable descending sort)."""
    ids, by_id = ids.sort(dim=-1)
    values, order = values.gather(-1, by_id).sort(dim=-1, descending=True, stable=True)
    return values, ids.gather(-1, order)


def sorted_sample(
    logits: torch.Tensor, temperature: float, top_p: float, top_k: int, generator: torch.Generator | None
) -> torch.Tensor:
    """The definition, with a full sort: the exact fallback for rows the fast path leaves open."""
    scaled = logits.float() / temperature
    if 0 < top_k < scaled.shape[-1]:
        kth = torch.topk(scaled, top_k, dim=-1).values[:, -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    ordered, order = torch.sort(scaled, dim=-1, descending=True, stable=True)
    probs = ordered.softmax(dim=-1)
    uniform = torch.rand((len(logits), 1), generator=generator, device=logits.device)
    return _pick_in_nucleus(probs, order, top_p, uniform)
