"""Prompt data for GRPO: checking rows, choosing each prompt's mode, the phase schedule and the prompt sampler.

The sampler walks the data in a seeded shuffled order, epoch after epoch. With epoch-level filtering
(Nemotron-Cascade §1.5) each epoch's pass rates decide the next epoch's pool: prompts solved by none or all
of their rollouts are dropped, and each dropped prompt re-enters a later epoch with probability `hard_p`
(0% solved) or `easy_p` (100% solved). Its whole state is plain JSON, so a resumed run draws the same prompts.

With dynamic filtering, `KeepRate` sizes each generation round: a round that draws only the prompts still
missing needs several more rounds to fill the step (a kept fraction of 1/3 took four), and every round pays
the whole decode loop's fixed cost, so it draws the missing count divided by the recent fraction of groups
kept (verl's DAPO recipe generates a fixed multiple instead).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cascade_cli.chat import MODES, prompt_messages, render_prompt
from cascade_cli.config.grpo import PhaseConfig
from cascade_cli.console import print_warning
from cascade_cli.data.epoch_filter import epoch_pool, update_dropped
from cascade_cli.errors import CascadeUsageError
from cascade_cli.records import row_prompt
from cascade_cli.verifiers.base import RecordError, Verifier, parse_label


def check_rows(
    rows: list[dict[str, Any]], verifier: Verifier | dict[str, Verifier] | None, path: str | Path
) -> None:
    """Fail before training on a row without a prompt, or whose label the verifier cannot read. A mapping
    domain -> verifier (distill) checks each row with its own domain's and requires a domain it has."""
    if not rows:
        raise CascadeUsageError(f"{path}: no rows")
    per_domain = verifier if isinstance(verifier, dict) else None
    for number, row in enumerate(rows, start=1):
        where = f"{path}: row {number}" + (
            f" (id {row['id']!r})" if isinstance(row, dict) and "id" in row else ""
        )
        if not isinstance(row, dict):
            raise CascadeUsageError(f"{where}: expected a JSON object, found {type(row).__name__}")
        if per_domain is not None and row.get("domain") not in per_domain:
            raise CascadeUsageError(
                f"{where}: domain: expected one of {', '.join(per_domain)} (the teachers' domains), "
                f"found {row.get('domain')!r}"
            )
        row_verifier = per_domain[row["domain"]] if per_domain is not None else verifier
        if "prompt" not in row and "messages" not in row:
            raise CascadeUsageError(f"{where}: expected a 'prompt' or 'messages' field, found neither")
        try:
            prompt_messages(row_prompt(row))
        except (TypeError, KeyError) as error:
            raise CascadeUsageError(f"{where}: malformed prompt ({error})") from None
        if row.get("mode") is not None and row["mode"] not in MODES:
            raise CascadeUsageError(f"{where}: mode: expected one of {', '.join(MODES)}, found {row['mode']!r}")
        if row_verifier is None:
            continue
        try:
            label = parse_label(row)
        except RecordError as error:
            raise CascadeUsageError(f"{where}: {error}") from None
        problem = row_verifier.check_label(label)
        if problem:
            raise CascadeUsageError(f"{where}: label: {problem}")


def prompt_mode(setting: str, row: dict[str, Any], position: int) -> str:
    """think | no_think | half (even batch positions think, odd ones not) | row (the row's own `mode`)."""
    if setting == "half":
        return "think" if position % 2 == 0 else "no_think"
    if setting == "row":
        return row.get("mode") or "think"
    return setting


def render_row(row: dict[str, Any], mode: str, tokenizer: Any = None) -> str:
    """The prompt text of a row in `mode`: the project's ChatML, or `tokenizer`'s own non-ChatML template."""
    return render_prompt(row_prompt(row), mode, tokenizer)


def fit_prompts(
    rows: list[dict[str, Any]], path: str | None, mode: str, tokenizer: Any, limit: int
) -> tuple[list[dict], int]:
    """Drop rows whose rendered prompt exceeds `limit` tokens (max_prompt_len, with a warning); keep their order.
    Returns the rows kept and the longest of their prompts in tokens."""
    def length(row: dict[str, Any], index: int) -> int:
        text = render_row(row, prompt_mode(mode, row, index), tokenizer)
        return len(tokenizer.encode(text, add_special_tokens=False))

    lengths = [length(row, index) for index, row in enumerate(rows)]
    kept = [row for row, size in zip(rows, lengths, strict=True) if size <= limit]
    if len(kept) < len(rows):
        print_warning(f"{path}: {len(rows) - len(kept)} rows longer than max_prompt_len are skipped")
    if not kept:
        raise CascadeUsageError(f"{path}: every prompt is longer than max_prompt_len={limit}")
    return kept, max(size for size in lengths if size <= limit)


def phase_at(phases: list[PhaseConfig], step: int) -> tuple[int, PhaseConfig]:
    """(index, phase) of the 0-based `step`; past the end, the last phase."""
    end = 0
    for index, phase in enumerate(phases):
        end += phase.steps
        if step < end:
            return index, phase
    return len(phases) - 1, phases[-1]


class PromptSampler:
    """Yields row indices: a seeded shuffle per epoch over the active pool (see the module docstring)."""

    def __init__(
        self,
        n_rows: int,
        seed: int,
        epoch_filter: bool = False,
        hard_p: float = 0.1,
        easy_p: float = 0.01,
    ) -> None:
        self.n_rows = n_rows
        self.seed = seed
        self.epoch_filter = epoch_filter
        self.hard_p = hard_p
        self.easy_p = easy_p
        self.epoch = 0
        self.cursor = 0
        self.dropped: dict[str, str] = {}  # row index (str, for JSON) -> "hard" | "easy"
        self.stats: dict[str, list[int]] = {}  # this epoch: row index -> [passed rollouts, rollouts]
        self.order = self._order()

    def _order(self) -> list[int]:
        return epoch_pool(self.n_rows, self.dropped, self.seed, self.epoch, self.hard_p, self.easy_p)

    def next(self) -> int:
        if self.cursor >= len(self.order):
            self._end_epoch()
        index = self.order[self.cursor]
        self.cursor += 1
        return index

    def record(self, index: int, passed: int, total: int) -> None:
        entry = self.stats.setdefault(str(index), [0, 0])
        entry[0] += passed
        entry[1] += total

    def _end_epoch(self) -> None:
        if self.epoch_filter:
            self.dropped = update_dropped(self.dropped, self.stats)
        self.stats = {}
        self.epoch += 1
        self.cursor = 0
        self.order = self._order()

    def state(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "cursor": self.cursor,
            "dropped": dict(self.dropped),
            "stats": {k: list(v) for k, v in self.stats.items()},
            "order": list(self.order),
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self.epoch = state["epoch"]
        self.cursor = state["cursor"]
        self.dropped = dict(state["dropped"])
        self.stats = {k: list(v) for k, v in state["stats"].items()}
        self.order = list(state["order"])


class DomainMixSampler:
    """Yields row indices with each domain's share of the draws set by `weights` (distill's domain_weights),
    whatever each domain's row count: every domain walks its own rows as a PromptSampler does, and a smooth
    weighted round-robin picks whose turn it is (each draw the domain furthest behind its share), so even a
    single step splits its prompts by the weights. Its state is plain JSON, like PromptSampler's."""

    def __init__(self, row_domains: list[str], weights: dict[str, float], seed: int) -> None:
        self.weights = dict(weights)
        self.members = {domain: [i for i, d in enumerate(row_domains) if d == domain] for domain in weights}
        empty = [domain for domain, members in self.members.items() if not members]
        if empty:
            raise CascadeUsageError(f"domain_weights: no training rows of domain {', '.join(empty)}")
        self.samplers = {domain: PromptSampler(len(members), seed) for domain, members in self.members.items()}
        self.credit = dict.fromkeys(weights, 0.0)
        # row index -> (its domain, its position among that domain's rows)
        self.position = {index: (d, at) for d, members in self.members.items() for at, index in enumerate(members)}

    def next(self) -> int:
        total = sum(self.weights.values())
        for domain, weight in self.weights.items():
            self.credit[domain] += weight
        domain = max(self.credit, key=lambda d: self.credit[d])
        self.credit[domain] -= total
        return self.members[domain][self.samplers[domain].next()]

    @property
    def epoch(self) -> int:
        """Completed passes over the rows of the domain walked most often (its rows repeat soonest)."""
        return max(sampler.epoch for sampler in self.samplers.values())

    def record(self, index: int, passed: int, total: int) -> None:
        domain, at = self.position[index]
        self.samplers[domain].record(at, passed, total)

    def state(self) -> dict[str, Any]:
        return {"credit": dict(self.credit), "domains": {d: sampler.state() for d, sampler in self.samplers.items()}}

    def load_state(self, state: dict[str, Any]) -> None:
        self.credit = dict(state["credit"])
        for domain, sampler in self.samplers.items():
            sampler.load_state(state["domains"][domain])


@dataclass
class KeepRate:
    """Groups sampled and groups with a learning signal (not all-equal rewards), recent rounds weighing most:
    each round halves the weight of those before it, so the estimate follows a policy whose kept fraction
    changes as it trains (a stage-long average lagged it and drew surplus groups)."""

    sampled: float = 0.0
    kept: float = 0.0

    def draws(self, needed: int, max_factor: float) -> int:
        """Prompts to draw for `needed` more kept groups: needed / the kept fraction, Laplace-smoothed (so the
        first round draws exactly `needed`), at most `max_factor` x needed."""
        rate = (self.kept + 1) / (self.sampled + 1)
        return max(needed, min(math.ceil(needed / rate), math.floor(max_factor * needed)))

    def record(self, sampled: int, kept: int) -> None:
        self.sampled = self.sampled / 2 + sampled
        self.kept = self.kept / 2 + kept
