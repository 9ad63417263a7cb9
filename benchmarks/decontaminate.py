"""Decontamination throughput: cascade's word n-gram index vs the plain string n-gram set, side by side.

Builds 1,000,000 synthetic prompts (words drawn with their frequencies from the benchmark prompts themselves,
so most words are "known" and the index cannot skip them; 1% of rows carry a 12-word span copied from a
benchmark prompt), then removes rows sharing a 9-gram with MATH-500 + AIME 2024/2025 + IFEval + HumanEval.

Competitor: the textbook implementation (lowercase, `\\w+` words, every n-gram joined into a string, checked
against a set of the benchmark n-gram strings), as many decontamination scripts do it. Both must remove the
same rows; the script prints rows/s of each and the ratio.

    PYTHONPATH=src python benchmarks/decontaminate.py [--rows 1000000] [--baseline-rows 200000] [--n 9]
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from collections import Counter

from cascade_cli.data.decontaminate import build_index, filter_rows, prompt_text, reference_prompts

BENCHMARKS = ["math500", "aime24", "aime25", "ifeval", "humaneval"]
WORD_RE = re.compile(r"\w+")


class NaiveNgramFilter:
    """The competitor: string n-grams in a Python set."""

    def __init__(self, texts: list[str], n: int):
        self.n = n
        self.grams: set[str] = set()
        self.exact: set[str] = set()
        for text in texts:
            words = WORD_RE.findall(text.lower())
            self.exact.add(" ".join(words))
            self.grams.update(" ".join(words[i : i + n]) for i in range(len(words) - n + 1))

    def contaminated(self, text: str) -> bool:
        words = WORD_RE.findall(text.lower())
        if " ".join(words) in self.exact:
            return True
        n = self.n
        return any(" ".join(words[i : i + n]) in self.grams for i in range(len(words) - n + 1))


def synthetic_rows(count: int, texts: list[str], seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    frequencies = Counter(word for text in texts for word in WORD_RE.findall(text))
    vocab = list(frequencies) + [f"w{i}" for i in range(2000)]  # plus words no benchmark uses
    weights = list(frequencies.values()) + [3] * 2000
    pool = rng.choices(vocab, weights=weights, k=200_000)  # a long random text to cut rows from
    split_texts = [text.split() for text in texts]
    rows = []
    for index in range(count):
        length = rng.randint(15, 60)
        start = rng.randrange(len(pool) - length)
        words = pool[start : start + length]
        if index % 100 == 0:  # 1% contaminated: a 12-word span of a benchmark prompt
            source = rng.choice([t for t in split_texts if len(t) >= 12] or split_texts)
            at = rng.randrange(max(1, len(source) - 11))
            words = words[: length // 2] + source[at : at + 12] + words[length // 2 :]
        rows.append({"id": f"r{index}", "prompt": " ".join(words)})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument(
        "--baseline-rows", type=int, default=200_000, help="rows the slower competitor scores"
    )
    parser.add_argument("--n", type=int, default=9)
    args = parser.parse_args(argv)

    texts = [text for spec in BENCHMARKS for text in reference_prompts(spec)[1]]
    print(f"benchmark prompts: {len(texts)} ({', '.join(BENCHMARKS)}), n={args.n}")
    started = time.perf_counter()
    rows = synthetic_rows(args.rows, texts)
    print(f"built {len(rows):,} synthetic rows in {time.perf_counter() - started:.1f}s")

    started = time.perf_counter()
    index = build_index(BENCHMARKS, n=args.n)
    ours_build = time.perf_counter() - started
    started = time.perf_counter()
    result = filter_rows(rows, index, "decontaminate")
    ours = time.perf_counter() - started

    started = time.perf_counter()
    naive = NaiveNgramFilter(texts, args.n)
    naive_build = time.perf_counter() - started
    subset = rows[: args.baseline_rows]
    started = time.perf_counter()
    naive_removed = {row["id"] for row in subset if naive.contaminated(prompt_text(row))}
    baseline = time.perf_counter() - started

    ours_removed = {record["id"] for record in result.removed}
    ours_subset = {row["id"] for row in subset} & ours_removed
    if ours_subset != naive_removed:
        print(
            f"MISMATCH: cascade removed {len(ours_subset)} rows of the subset, the baseline {len(naive_removed)}"
        )
        return 1
    ours_rate, naive_rate = len(rows) / ours, len(subset) / baseline
    print(f"removed {len(ours_removed):,} of {len(rows):,} rows; by benchmark: {result.removed_by}")
    print(
        f"cascade NgramIndex : {ours_rate:12,.0f} rows/s  ({len(rows):,} rows in {ours:.1f}s; index {ours_build:.2f}s)"
    )
    print(
        f"string n-gram set  : {naive_rate:12,.0f} rows/s  ({len(subset):,} rows in {baseline:.1f}s; index {naive_build:.2f}s)"
    )
    print(
        f"ratio (cascade / string set): {ours_rate / naive_rate:.2f}x; same rows removed on the common subset"
    )
    print(f"goal >= 20,000 rows/s: {'met' if ours_rate >= 20_000 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
