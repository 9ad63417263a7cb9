"""Stop strings of several tokens, matched on the device one sampled token at a time.

A stop string can arrive in many tokenizations (" Question" + ":" as well as "Question" + ":"), so matching
its own token ids would miss most of them. Instead each stop string gets an automaton over token ids: its
state is how many characters of the string the generated text ends with (Knuth-Morris-Pratt), and two table
lookups per token give the next state and whether the string was completed inside that token's text. The
tables are built once per tokenizer and stop strings, from each token's text decoded after an anchor token
(so the leading-space rules of SentencePiece-style tokenizers apply as inside a sequence).

Where a tokenizer's token texts do not add up to its decoded text, `stop_prefix_length`, run on every finished
row's text, still finds the first stop string: the automaton only saves the steps after it.
"""

from __future__ import annotations

import functools
from typing import Any

import torch


class StopMatcher:
    """Per row and stop string, the automaton's state; `advance` moves every row by its new token."""

    def __init__(self, tokenizer: Any, stop_strings: list[str], vocab: int, device: torch.device) -> None:
        tables = [_tables(tokenizer, stop, vocab) for stop in stop_strings]
        self.next_state = torch.stack([_pad_states(t[0], tables) for t in tables]).to(device)  # [S, M, V]
        self.completes = torch.stack([_pad_states(t[1], tables) for t in tables]).to(device)
        self.which = torch.arange(len(tables), device=device)[:, None]

    def start(self, rows: int) -> torch.Tensor:
        return torch.zeros((len(self.which), rows), dtype=torch.long, device=self.which.device)

    def advance(self, state: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(rows [B] whose text now contains a stop string, the next states [S, B])."""
        index = (self.which, state, tokens[None, :])
        return self.completes[index].any(dim=0), self.next_state[index]


def stop_prefix_length(tokenizer: Any, ids: list[int], stop_strings: list[str]) -> int | None:
    """The fewest leading tokens of `ids` whose text contains a stop string, or None (the text check)."""

    def contains(length: int) -> bool:
        text = tokenizer.decode(ids[:length], skip_special_tokens=False)
        return any(stop in text for stop in stop_strings)

    if not contains(len(ids)):
        return None
    low, high = 1, len(ids)  # contains(high) holds; find the smallest such length
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if contains(middle) else (middle + 1, high)
    return high


@functools.lru_cache(maxsize=16)
def _tables(tokenizer: Any, stop: str, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(next state [len(stop), vocab], completed [len(stop), vocab]) for one stop string, by start state."""
    alphabet = {char: index for index, char in enumerate(dict.fromkeys(stop))}
    other, pad = len(alphabet), len(alphabet) + 1  # a character not in the string; past a token's end
    step = _character_automaton(stop, alphabet)  # [len(stop) + 1, pad + 1]
    texts = _token_texts(tokenizer, vocab)
    relevant = [t for t, text in enumerate(texts) if not text or set(text) & alphabet.keys()]
    width = max((len(texts[t]) for t in relevant), default=0)
    codes = torch.full((len(relevant), max(width, 1)), pad, dtype=torch.long)
    for row, token in enumerate(relevant):
        codes[row, : len(texts[token])] = torch.tensor([alphabet.get(c, other) for c in texts[token]])
    # Every token whose text holds none of the string's characters resets the match (state 0, no hit).
    length = len(stop)
    next_state = torch.zeros((length, vocab), dtype=torch.long)
    completes = torch.zeros((length, vocab), dtype=torch.bool)
    state = torch.arange(length)[:, None].expand(length, len(relevant))
    for column in range(codes.shape[1]):  # state len(stop) absorbs: a string found inside stays found
        state = step[state, codes[:, column][None, :]]
    hit = state == length
    ids = torch.tensor(relevant, dtype=torch.long)
    next_state[:, ids] = torch.where(hit, 0, state)
    completes[:, ids] = hit
    return next_state, completes


def _character_automaton(stop: str, alphabet: dict[str, int]) -> torch.Tensor:
    """KMP transitions [len(stop) + 1, alphabet + 2]: the longest prefix of `stop` ending the text so far.
    State len(stop) (found) absorbs; the second-last symbol (any other character) resets; the last (past a
    token's end) stays."""
    length = len(stop)
    step = torch.zeros((length + 1, len(alphabet) + 2), dtype=torch.long)
    for state in range(length):
        for char, symbol in alphabet.items():
            text = stop[:state] + char
            step[state, symbol] = max(k for k in range(len(text) + 1) if text.endswith(stop[:k]))
    step[length] = length
    step[:, -1] = torch.arange(length + 1)
    return step


@functools.lru_cache(maxsize=4)
def _token_texts(tokenizer: Any, vocab: int) -> list[str]:
    """Each token id's text as it reads inside a sequence ('' for ids past the tokenizer)."""
    known = min(vocab, len(tokenizer))
    anchor = tokenizer.encode("a", add_special_tokens=False)[:1]
    anchor_text = tokenizer.decode(anchor, skip_special_tokens=False)
    pairs = tokenizer.batch_decode([anchor + [t] for t in range(known)], skip_special_tokens=False)
    texts = [
        pair[len(anchor_text) :] if pair.startswith(anchor_text) else tokenizer.decode([token])
        for token, pair in enumerate(pairs)
    ]
    return texts + [""] * (vocab - known)


def _pad_states(table: torch.Tensor, tables: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """A table padded to the longest stop string's state count (the extra states are never reached)."""
    states = max(t[0].shape[0] for t in tables)
    return torch.cat([table, table.new_zeros((states - table.shape[0], table.shape[1]))])
