"""Where an IF-RL stage's instruction-following gain comes from: per instruction group, before and after.

Reads two evaluations' samples (`cascade eval` or a recipe's RUN/eval/<stage>/samples.jsonl) of IFEval or
IFBench and prints, per instruction group (`length_constraints`, `change_case`, `punctuation`, ...), the
share followed (strict) before and after, and the responses' median length in words. A gain carried by
groups that a short answer satisfies (no commas, all lowercase, a quoted reply) while the groups that ask for
length or structure fall is the signature of a policy that learned brevity rather than the instructions.

    python benchmarks/if_breakdown.py RUN/eval/base/samples.jsonl RUN/eval/if_rl/samples.jsonl [--benchmark ifeval]
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path


def read(samples: Path, benchmark: str) -> list[dict]:
    rows = [json.loads(line) for line in samples.read_text().splitlines() if line.strip()]
    return [row for row in rows if row["benchmark"] == benchmark]


def followed_by_group(rows: list[dict]) -> dict[str, list[bool]]:
    groups: dict[str, list[bool]] = defaultdict(list)
    for row in rows:
        for instruction in (row.get("details") or {}).get("instructions", []):
            groups[instruction["id"].split(":")[0]].append(bool(instruction["strict"]))
    return groups


def words(rows: list[dict]) -> float:
    return statistics.median(len(row.get("response", "").split()) for row in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--benchmark", default="ifeval")
    args = parser.parse_args()
    before, after = read(args.before, args.benchmark), read(args.after, args.benchmark)
    groups_before, groups_after = followed_by_group(before), followed_by_group(after)
    print(f"{args.benchmark}: {len(before)} -> {len(after)} responses; median words {words(before):.0f} -> "
          f"{words(after):.0f}; truncated {sum(r.get('finish_reason') == 'length' for r in before)} -> "
          f"{sum(r.get('finish_reason') == 'length' for r in after)}")
    print("| instruction group | instructions | followed before | followed after | change |")
    print("|---|---|---|---|---|")
    for group in sorted(groups_before, key=lambda name: -len(groups_before[name])):
        old, new = groups_before[group], groups_after.get(group, [])
        share_old = 100 * sum(old) / len(old)
        share_new = 100 * sum(new) / len(new) if new else float("nan")
        print(f"| {group} | {len(old)} | {share_old:.1f} | {share_new:.1f} | {share_new - share_old:+.1f} |")


if __name__ == "__main__":
    main()
