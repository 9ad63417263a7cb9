"""Which candidate program to submit in a round: the Tail-10 heuristic (after DeepConf, Fu et al. 2025).

The paper (Nemotron-Cascade App. C.3) picks one official submission per problem and round with "Tail-10"
and gives no formula. The one implemented here reads it as DeepConf's offline selection with tail
confidence and top-10% filtering:

1. Candidates are the round's responses that hold code and pass the public tests; code already submitted
   for the problem (and judged failed) is left out: resubmitting it would learn nothing.
2. Each candidate's confidence is the mean log-probability of its last `tail_tokens` generated tokens
   (DeepConf's tail confidence uses the last 2,048). The generator reports a response's log-probability
   sum, so the mean is taken over the whole response; it equals the tail mean whenever a response is at
   most `tail_tokens` long (every response when max_tokens <= tail_tokens).
3. Keep the top 10% by confidence (at least one; `keep_fraction`).
4. Confidence-weighted vote among the kept over normalised code (weight exp(confidence), the geometric-mean
   token probability); the winner is the most confident member of the winning code. Ties: the shorter code,
   then the earlier candidate.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

TAIL_TOKENS = 2048
KEEP_FRACTION = 0.1


@dataclass(frozen=True)
class Candidate:
    index: int  # position among the problem's generations this round
    code: str
    logprob_sum: float | None
    tokens: int

    @property
    def confidence(self) -> float:
        """Mean token log-probability (0 when the generator gave none: every candidate then ties)."""
        if self.logprob_sum is None or self.tokens <= 0:
            return 0.0
        return self.logprob_sum / self.tokens


def normalise_code(code: str) -> str:
    """Code compared for identity: trailing whitespace and blank lines dropped."""
    return "\n".join(line.rstrip() for line in code.strip().splitlines() if line.strip())


def select_submission(
    candidates: list[Candidate], submitted: set[str], keep_fraction: float = KEEP_FRACTION
) -> Candidate | None:
    """The Tail-10 pick among `candidates` (already filtered), skipping codes in `submitted` (normalised)."""
    fresh = [c for c in candidates if normalise_code(c.code) not in submitted]
    if not fresh:
        return None
    ranked = sorted(fresh, key=lambda c: (-c.confidence, len(c.code), c.index))
    kept = ranked[: max(1, math.ceil(keep_fraction * len(ranked)))]
    votes: dict[str, float] = defaultdict(float)
    for candidate in kept:
        votes[normalise_code(candidate.code)] += math.exp(candidate.confidence)
    # `kept` is in rank order, so the first member of the winning code is its most confident one.
    return max(kept, key=lambda c: (votes[normalise_code(c.code)], -len(c.code), -kept.index(c)))
