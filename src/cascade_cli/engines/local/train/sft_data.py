"""SFT examples: canonical rows -> token ids + assistant-only loss masks -> micro-batches.

The batch plan of an epoch is a pure function of (seed, epoch), so a resumed run finds its place again from
(epoch, micro-batch index) alone. Batches carry no wasted padding beyond the longest row of a micro-batch:
without packing, examples of similar length share a micro-batch; with packing, examples are best-fit into
rows of `max_seq_len` tokens and `position_ids` restart at every example (transformers then keeps
attention inside each example).
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from cascade_cli.chat import MODES, prompt_messages, render_segments
from cascade_cli.errors import CascadeUsageError
from cascade_cli.records import load_rows, resolve_rows_path

RESPONSE_KEYS = ("response", "completion", "reference")
IGNORE = -100
SORT_WINDOW = 64  # micro-batches whose examples are sorted by length together (randomness vs padding)


def row_conversation(row: dict[str, Any], where: str) -> tuple[list[dict[str, Any]], str]:
    """(messages, mode) of an SFT row: `messages`, or `prompt` plus one of RESPONSE_KEYS."""
    mode = row.get("mode") or "think"
    if mode not in MODES:
        raise CascadeUsageError(f"{where}: mode must be one of {', '.join(MODES)}; found {mode!r}")
    if "messages" in row:
        messages = row["messages"]
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise CascadeUsageError(f"{where}: `messages` must be a list of {{role, content}} objects")
    elif "prompt" in row:
        response = next((row[key] for key in RESPONSE_KEYS if isinstance(row.get(key), str)), None)
        if response is None:
            raise CascadeUsageError(
                f"{where}: a `prompt` row needs a response string in one of {', '.join(RESPONSE_KEYS)}; "
                f"found keys {sorted(row)}"
            )
        if not isinstance(row["prompt"], (str, list)):
            raise CascadeUsageError(f"{where}: `prompt` must be a string or a list of messages")
        messages = [*prompt_messages(row["prompt"]), {"role": "assistant", "content": response}]
    else:
        raise CascadeUsageError(
            f"{where}: expected `messages` or `prompt` + `response`; found keys {sorted(row)}"
        )
    if not any(message.get("role") == "assistant" for message in messages):
        raise CascadeUsageError(f"{where}: no assistant turn to train on")
    return messages, mode


@dataclass
class Examples:
    """Tokenized examples: ids and loss masks (True on assistant tokens), plus the truncation count."""

    input_ids: list[list[int]]
    loss_mask: list[list[bool]]
    truncated: int
    dropped: int
    first_prompt: str = ""  # the first row rendered up to its first assistant turn (the stage manifest shows it)

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def lengths(self) -> list[int]:
        return [len(ids) for ids in self.input_ids]

    def trainable(self, index: int) -> int:
        """Tokens that carry loss: mask positions 1.. (the first token is never predicted)."""
        return sum(self.loss_mask[index][1:])


def load_examples(path: str | Path, tokenizer, max_seq_len: int, chunk: int = 512) -> Examples:
    """Read SFT rows (a .jsonl/.json/.parquet file or a prepare-data folder), render each row with its mode
    (the project's ChatML, or the tokenizer's own non-ChatML template) and tokenize segment by segment."""
    path = resolve_rows_path(path)
    pieces: list[tuple[str, bool]] = []
    owners: list[int] = []
    count = 0
    for number, row in enumerate(load_rows(path), start=1):
        where = f"{path}: row {number}"
        messages, mode = row_conversation(row, where)
        try:
            segments = render_segments(messages, mode=mode, tools=row.get("tools"), tokenizer=tokenizer)
        except ValueError as error:
            raise CascadeUsageError(f"{where}: {error}") from None
        if count == 0:
            first_prompt = "".join(text for text, _ in segments[: next(
                (at for at, (_, trainable) in enumerate(segments) if trainable), len(segments))])
        pieces.extend(segments)
        owners.extend([count] * len(segments))
        count += 1
    if count == 0:
        raise CascadeUsageError(f"{path}: no rows (expected SFT rows with `messages`)")
    input_ids: list[list[int]] = [[] for _ in range(count)]
    loss_mask: list[list[bool]] = [[] for _ in range(count)]
    for start in range(0, len(pieces), chunk):
        batch = pieces[start : start + chunk]
        encoded = tokenizer([text for text, _ in batch], add_special_tokens=False)["input_ids"]
        for (_, trainable), ids, owner in zip(batch, encoded, owners[start : start + chunk], strict=True):
            input_ids[owner].extend(ids)
            loss_mask[owner].extend([trainable] * len(ids))
    kept_ids, kept_mask, truncated, dropped = [], [], 0, 0
    for ids, mask in zip(input_ids, loss_mask, strict=True):
        if len(ids) > max_seq_len:
            ids, mask = ids[:max_seq_len], mask[:max_seq_len]
            truncated += 1
        if not any(mask[1:]):
            dropped += 1
            continue
        kept_ids.append(ids)
        kept_mask.append(mask)
    if not kept_ids:
        raise CascadeUsageError(
            f"{path}: no example keeps an assistant token within max_seq_len={max_seq_len}"
        )
    return Examples(kept_ids, kept_mask, truncated, dropped, first_prompt)


# A micro-batch is a list of rows; a row is a list of example indices (one example unless packing).
MicroBatch = list[list[int]]


def _best_fit_rows(order: list[int], lengths: list[int], capacity: int) -> list[list[int]]:
    """Best-fit decreasing bin packing: few rows, little padding."""
    rows: list[list[int]] = []
    free: list[tuple[int, int]] = []  # (remaining capacity, row index), sorted
    for index in sorted(order, key=lambda i: -lengths[i]):
        size = lengths[index]
        at = bisect.bisect_left(free, (size, -1))
        if at < len(free):
            remaining, row = free.pop(at)
            rows[row].append(index)
        else:
            rows.append([index])
            remaining, row = capacity, len(rows) - 1
        remaining -= size
        if remaining > 0:
            bisect.insort(free, (remaining, row))
    return rows


def plan_epoch(
    lengths: list[int], batch_size: int, seed: int, epoch: int, packing: bool, max_seq_len: int, shuffle: bool
) -> list[MicroBatch]:
    rng = random.Random(seed * 1_000_003 + epoch)
    order = list(range(len(lengths)))
    if shuffle:
        rng.shuffle(order)
    if packing:
        rows = _best_fit_rows(order, lengths, max_seq_len)
        if shuffle:
            rng.shuffle(rows)
    else:
        rows = []
        window = batch_size * SORT_WINDOW
        for start in range(0, len(order), window):
            block = sorted(order[start : start + window], key=lambda i: lengths[i])
            rows.extend([i] for i in block)
    batches = [rows[start : start + batch_size] for start in range(0, len(rows), batch_size)]
    if shuffle and not packing:
        rng.shuffle(batches)
    return batches


@dataclass
class Cursor:
    """Where the data stream stands: the next micro-batch is plan(epoch)[index]."""

    epoch: int = 0
    index: int = 0


class BatchStream:
    """An endless stream of micro-batches across epochs, resumable from a Cursor."""

    def __init__(
        self,
        examples: Examples,
        batch_size: int,
        seed: int,
        packing: bool,
        max_seq_len: int,
        shuffle: bool,
        cursor: Cursor | None = None,
    ):
        self.examples = examples
        self.lengths = examples.lengths
        self.options = (batch_size, seed, packing, max_seq_len, shuffle)
        self.cursor = cursor or Cursor()
        self._plan_epoch = -1
        self._plan: list[MicroBatch] = []

    def plan(self, epoch: int) -> list[MicroBatch]:
        if epoch != self._plan_epoch:
            batch_size, seed, packing, max_seq_len, shuffle = self.options
            self._plan = plan_epoch(self.lengths, batch_size, seed, epoch, packing, max_seq_len, shuffle)
            self._plan_epoch = epoch
        return self._plan

    def epoch_progress(self) -> float:
        return self.cursor.epoch + self.cursor.index / max(1, len(self.plan(self.cursor.epoch)))

    def take(self, count: int) -> list[MicroBatch]:
        taken = []
        for _ in range(count):
            plan = self.plan(self.cursor.epoch)
            taken.append(plan[self.cursor.index])
            self.cursor.index += 1
            if self.cursor.index >= len(plan):
                self.cursor = Cursor(self.cursor.epoch + 1, 0)
        return taken

    def __iter__(self) -> Iterator[MicroBatch]:  # pragma: no cover - convenience
        while True:
            yield from self.take(1)


def collate(batch: MicroBatch, examples: Examples, pad_id: int) -> dict[str, Any]:
    """Right-padded tensors. Without packing no attention mask is needed: with causal attention a real
    token never sees the padding after it, and padded positions carry no loss. Packed rows get
    `position_ids` that restart at each example."""
    packed = any(len(row) > 1 for row in batch)
    rows_ids, rows_mask, rows_pos = [], [], []
    for row in batch:
        ids: list[int] = []
        mask: list[bool] = []
        pos: list[int] = []
        for index in row:
            ids.extend(examples.input_ids[index])
            # The first token of each example is context, so the shifted target never crosses examples.
            example_mask = list(examples.loss_mask[index])
            example_mask[0] = False
            mask.extend(example_mask)
            pos.extend(range(len(examples.input_ids[index])))
        rows_ids.append(ids)
        rows_mask.append(mask)
        rows_pos.append(pos)
    width = max(len(ids) for ids in rows_ids)
    input_ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    labels = torch.full((len(batch), width), IGNORE, dtype=torch.long)
    position_ids = torch.zeros((len(batch), width), dtype=torch.long)
    for r, (ids, mask, pos) in enumerate(zip(rows_ids, rows_mask, rows_pos, strict=True)):
        row = torch.tensor(ids, dtype=torch.long)
        input_ids[r, : len(ids)] = row
        keep = torch.tensor(mask, dtype=torch.bool)
        labels[r, : len(ids)] = torch.where(keep, row, torch.full_like(row, IGNORE))
        position_ids[r, : len(ids)] = torch.tensor(pos, dtype=torch.long)
        # Padding continues as one more "example" so a packed row's padding never joins its last example.
        position_ids[r, len(ids) :] = torch.arange(width - len(ids))
    real_tokens = sum(len(ids) for ids in rows_ids)
    return {
        "input_ids": input_ids,
        "labels": labels,
        "position_ids": position_ids if packed else None,
        "tokens": real_tokens,
        "trainable": int((labels != IGNORE).sum()),
    }
