"""Word n-gram overlap filters: benchmark decontamination and SFT/RL prompt disjointness (paper §4).

A row is dropped when its prompt shares a word n-gram (n = 9 in the paper) with a reference prompt, or
equals one after normalisation (this catches prompts shorter than n words). Words are the runs of letters,
digits, `_` and non-ASCII characters of the lowercased text.

Built for millions of rows, in batches, without one Python object per word: the batch is lowercased,
encoded and passed through `bytes.translate` (non-word bytes -> spaces); NumPy finds the words in that
buffer, hashes each word from prefix sums over its bytes, rolls those into a 64-bit hash of every window of
n words, and a bitmap of the reference n-gram hashes flags candidate windows in one gather. Only the rare
candidates are confirmed against the exact reference n-grams, so a hash collision never drops a row.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cascade_cli.errors import CascadeUsageError
from cascade_cli.records import DATA_FILE, HELDOUT_FILE, load_rows

DEFAULT_N = 9
BATCH_ROWS = 8192
# bytes.translate table: word bytes stay, every other byte becomes a space. Upper-case ASCII stays only for
# the row separator: rows are lowercased first, so an upper-case word can never come from a row.
_WORD_TABLE = bytes(
    byte if (48 <= byte <= 57 or 65 <= byte <= 90 or 97 <= byte <= 122 or byte == 95 or byte >= 128) else 32
    for byte in range(256)
)
_SEPARATOR = b"QQROWQQ"
_MULTIPLIER = np.uint64(0x9E3779B97F4A7C15)


def words_of(text: str) -> list[bytes]:
    return text.lower().encode("utf-8", "replace").translate(_WORD_TABLE).split()


_CHAR_MULTIPLIER = 0x100000001B3  # odd, so invertible modulo 2**64
_powers_cache: dict[str, np.ndarray] = {}


def _powers(length: int) -> tuple[np.ndarray, np.ndarray]:
    """(M**j, M**-j) modulo 2**64 for j < length, cached and grown on demand."""
    if len(_powers_cache.get("up", ())) < length:
        size = max(length, 2 * len(_powers_cache.get("up", ())), 1 << 16)
        inverse = pow(_CHAR_MULTIPLIER, -1, 1 << 64)
        with np.errstate(over="ignore"):
            up = np.cumprod(np.full(size, _CHAR_MULTIPLIER, dtype=np.uint64))
            down = np.cumprod(np.full(size, inverse, dtype=np.uint64))
        _powers_cache["up"] = np.concatenate(([np.uint64(1)], up[:-1]))
        _powers_cache["down"] = np.concatenate(([np.uint64(1)], down[:-1]))
    return _powers_cache["up"], _powers_cache["down"]


def _words_and_hashes(buffer: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(start offsets, end offsets, 64-bit hashes) of the words in a translated buffer (words = non-spaces).

    hash(word) = sum of (byte + 1) * M**(end - 1 - j) over its bytes j, from one prefix sum of
    (byte + 1) * M**-j: equal words hash equal wherever they sit.
    """
    data = np.frombuffer(buffer, dtype=np.uint8)
    edges = np.diff(np.concatenate(([0], (data != 32).view(np.int8), [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    up, down = _powers(len(data))
    with np.errstate(over="ignore"):
        prefix = np.concatenate(
            ([np.uint64(0)], np.cumsum((data.astype(np.uint64) + np.uint64(1)) * down[: len(data)]))
        )
        hashes = (prefix[ends] - prefix[starts]) * up[ends - 1] if len(ends) else np.zeros(0, dtype=np.uint64)
    return starts, ends, hashes


def _window_hashes(word_hashes: np.ndarray, n: int) -> np.ndarray:
    """Rolling hash (mod 2**64) of every window of n consecutive words, computed in place."""
    windows = len(word_hashes) - n + 1
    hashes = word_hashes[:windows].copy()
    with np.errstate(over="ignore"):
        for offset in range(1, n):
            np.multiply(hashes, _MULTIPLIER, out=hashes)
            np.add(hashes, word_hashes[offset : offset + windows], out=hashes)
    return hashes


@functools.cache
def _separator_hash() -> np.uint64:
    return _words_and_hashes(_SEPARATOR)[2][0]


def _join_rows(texts: list[str]) -> bytes:
    """Lowercased rows joined by the separator word, translated to words and spaces."""
    separator = b" " + _SEPARATOR + b" "
    return separator.join([text.lower().encode("utf-8", "replace") for text in texts]).translate(_WORD_TABLE)


@dataclass
class NgramIndex:
    """Reference prompts grouped into named sets; `mask(text)` -> bitmask of the sets it overlaps."""

    n: int = DEFAULT_N
    names: list[str] = field(default_factory=list)
    sizes: dict[str, int] = field(default_factory=dict)
    _grams: dict[tuple[bytes, ...], int] = field(default_factory=dict)
    _exact: dict[bytes, int] = field(default_factory=dict)
    _bitmap: np.ndarray | None = None
    _shift: np.uint64 = np.uint64(40)

    def __post_init__(self) -> None:
        if self.n < 1:
            raise CascadeUsageError(f"ngram_n: expected an n-gram size >= 1; found {self.n}")

    def add(self, name: str, texts: Iterable[str]) -> None:
        if name not in self.names:
            if len(self.names) >= 62:
                raise CascadeUsageError("at most 62 reference sets can be indexed at once")
            self.names.append(name)
        bit = 1 << self.names.index(name)
        grams, n = self._grams, self.n
        count = 0
        for text in texts:
            count += 1
            words = words_of(text)
            if not words:
                continue
            key = b" ".join(words)
            self._exact[key] = self._exact.get(key, 0) | bit
            for start in range(len(words) - n + 1):
                gram = tuple(words[start : start + n])
                grams[gram] = grams.get(gram, 0) | bit
        self.sizes[name] = self.sizes.get(name, 0) + count
        self._bitmap = None

    def _candidates_bitmap(self) -> np.ndarray:
        if self._bitmap is None:
            # ~1/64 of the bits set: few false candidates, and 16 MiB for up to 260k reference n-grams.
            bits = min(30, max(24, math.ceil(math.log2(max(1, len(self._grams)) * 64))))
            self._shift = np.uint64(64 - bits)
            self._bitmap = np.zeros(1 << bits, dtype=bool)
            if self._grams:
                buffer = _join_rows([b" ".join(gram).decode("utf-8", "replace") for gram in self._grams])
                _, _, word_hashes = _words_and_hashes(buffer)
                # every gram is n words then the separator word: its window starts at k * (n + 1)
                windows = _window_hashes(word_hashes, self.n)[:: self.n + 1]
                self._bitmap[(windows >> self._shift).astype(np.int64)] = True
        return self._bitmap

    def mask(self, text: str) -> int:
        """Bitmask of the reference sets `text` overlaps (0 = clean)."""
        return self.masks([text])[0]

    def match(self, text: str) -> list[str]:
        mask = self.mask(text)
        return [name for index, name in enumerate(self.names) if mask >> index & 1]

    def simple_mask(self, text: str) -> int:
        """The same answer as `mask`, the plain way (one row, Python tuples); the reference for tests."""
        words = words_of(text)
        mask = self._exact.get(b" ".join(words), 0) if len(words) < self.n else 0
        for start in range(len(words) - self.n + 1):
            mask |= self._grams.get(tuple(words[start : start + self.n]), 0)
        return mask

    def masks(self, texts: list[str]) -> list[int]:
        """`mask` of many texts, a batch at a time."""
        result: list[int] = []
        for start in range(0, len(texts), BATCH_ROWS):
            result += self._batch_masks(texts[start : start + BATCH_ROWS])
        return result

    def _batch_masks(self, texts: list[str]) -> list[int]:
        n = self.n
        buffer = _join_rows(texts)
        starts, ends, word_hashes = _words_and_hashes(buffer)
        boundaries = np.flatnonzero(word_hashes == _separator_hash())
        if len(boundaries) != len(texts) - 1:  # a word hashed like the separator (~2**-64): go row by row
            return [self.simple_mask(text) for text in texts]
        row_first = np.concatenate(([0], boundaries + 1))  # word index of each row's first word
        row_end = np.concatenate((boundaries, [len(word_hashes)]))
        result = [0] * len(texts)

        def words(first: int, stop: int) -> list[bytes]:
            return buffer[starts[first] : ends[stop - 1]].split() if stop > first else []

        for row in np.flatnonzero(row_end - row_first < n).tolist():  # too short for an n-gram: exact only
            result[row] = self._exact.get(b" ".join(words(int(row_first[row]), int(row_end[row]))), 0)
        if len(word_hashes) < n:
            return result
        windows = _window_hashes(word_hashes, n)
        bitmap = self._candidates_bitmap()
        candidates = np.flatnonzero(bitmap[(windows >> self._shift).astype(np.int64)])
        if not len(candidates):
            return result
        rows = np.searchsorted(row_first, candidates, side="right") - 1
        grams_get = self._grams.get
        for position, row in zip(candidates.tolist(), rows.tolist(), strict=True):
            hit = grams_get(tuple(words(position, position + n)))
            if hit:
                result[row] |= hit
        return result


def prompt_text(row: dict[str, Any]) -> str:
    """The prompt of a canonical or raw row: `question` (benchmark rows keep the raw problem there), `prompt`,
    `problem`, or the user/system turns of `messages`."""
    for key in ("question", "problem"):
        if isinstance(row.get(key), str):
            return row[key]
    prompt = row.get("prompt")
    if isinstance(prompt, str):
        return prompt
    messages = prompt if isinstance(prompt, list) else row.get("messages")
    if isinstance(messages, list):
        return "\n".join(
            str(m.get("content", ""))
            for m in messages
            if isinstance(m, dict) and m.get("role") in ("user", "system")
        )
    chosen = row.get("chosen")
    if isinstance(chosen, list):
        return prompt_text({"messages": chosen})
    return ""


def reference_prompts(spec: str) -> tuple[str, list[str]]:
    """(name, prompt texts) for a benchmark name (see `cascade eval --list`) or a local data file/folder."""
    from cascade_cli.data.shared_paths import resolve_shared

    spec = resolve_shared(spec.strip())
    path = Path(spec).expanduser()
    if path.exists() or Path(spec).suffix in (".jsonl", ".json", ".parquet"):
        from cascade_cli.data.sources import iter_file_rows, parse_source

        if path.is_dir() and (path / DATA_FILE).is_file():  # a prepare-data folder: training and held-out rows
            names = [name for name in (DATA_FILE, HELDOUT_FILE) if (path / name).is_file()]
            rows = [row for name in names for row in load_rows(path, names=(name,))]
        else:
            rows = [row for file in parse_source(str(path)).files for _, row in iter_file_rows(file)]
        texts = [prompt_text(row) for row in rows]
        return str(path), [text for text in texts if text]
    from cascade_cli.evaluation.benchmarks import resolve_benchmark  # lazy: data does not need eval otherwise

    benchmark = resolve_benchmark(spec)
    return benchmark.name, [text for text in (prompt_text(row) for row in benchmark.rows()) if text]


def build_index(specs: list[str], n: int = DEFAULT_N) -> NgramIndex:
    index = NgramIndex(n=n)
    for spec in specs:
        name, texts = reference_prompts(spec)
        if not texts:
            raise CascadeUsageError(f"{spec}: no prompts found to compare against")
        index.add(name, texts)
    return index


@dataclass
class FilterResult:
    kept: list[dict[str, Any]]
    removed: list[dict[str, Any]]  # {"id", "filter", "matches": [names]}
    removed_by: dict[str, int]


def filter_rows(rows: list[dict[str, Any]], index: NgramIndex, filter_name: str) -> FilterResult:
    kept: list[dict[str, Any]] = []
    removed: list[dict[str, Any]] = []
    removed_by = dict.fromkeys(index.names, 0)
    masks = index.masks([prompt_text(row) for row in rows])
    for row, mask in zip(rows, masks, strict=True):
        if not mask:
            kept.append(row)
            continue
        matches = [name for bit, name in enumerate(index.names) if mask >> bit & 1]
        for name in matches:
            removed_by[name] += 1
        removed.append({"id": row.get("id"), "filter": filter_name, "matches": matches})
    return FilterResult(kept, removed, removed_by)
