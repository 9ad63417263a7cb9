"""The start rows of the real-model results under the model's own chat template beside cascade's (issue 54).

Reads the evaluations experiments/template_starts.sh wrote ($CASCADE_RUNS/real/starts/<template>/<benchmark>/)
and, for a benchmark not there, a recipe run's base evaluation (--base-from RUN/eval/base: smol-if-rm's seed 0
evaluates IFEval and IFBench under `auto`, the model's own template for a stock model). Where cascade's template
was not re-run, its figure is the one measured before `chat_template` existed (README before issue 54, same
settings: greedy, k = 1, <= 512 new tokens, every problem). Prints a markdown table: score with its 95%
interval, the median answer in words and the answers cut at the token limit, per template; and the paired
change where both templates' samples are here.

    python experiments/template_starts_table.py [--runs ~/cascade-runs/real] [--base-from RUN/eval/base ...]
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from cascade_cli.evaluation.instruction_groups import median_words, read_samples
from cascade_cli.evaluation.intervals import bootstrap

BENCHMARKS = ("ifeval", "ifbench", "gsm8k", "math500", "mbpp", "humaneval")
NAMES = {"ifeval": "IFEval (541)", "ifbench": "IFBench (300)", "gsm8k": "GSM8K (1319)", "math500": "MATH-500 (500)",
         "mbpp": "MBPP (500)", "humaneval": "HumanEval (164)"}
# Measured with cascade's template (ChatML + ` /no_think`, SmolLM2's system prompt dropped) before issue 54:
# README "Results on a real model" at main f789e1d; the median answer where the README gave it.
BEFORE = {"ifeval": (17.9, 239), "ifbench": (10.7, None), "gsm8k": (1.8, None), "math500": (2.4, None),
          "mbpp": (4.0, None), "humaneval": (4.3, None)}


def find(benchmark: str, template_dir: Path, base_from: list[Path]) -> Path | None:
    """The folder holding this benchmark's results.json and samples.jsonl, first found."""
    for folder in (template_dir / benchmark, *base_from):
        results = folder / "results.json"
        if results.is_file() and benchmark in json.loads(results.read_text())["benchmarks"]:
            return folder
    return None


def cell(folder: Path, benchmark: str) -> dict[str, Any]:
    results = json.loads((folder / "results.json").read_text())
    rows = [row for row in read_samples(folder / "samples.jsonl") if row["benchmark"] == benchmark]
    values = [float(row["passed"]) for row in sorted(rows, key=lambda row: str(row["id"]))]
    score, low, high = bootstrap(values)
    return {
        "score": score, "low": low, "high": high, "values": values,
        "words": median_words(rows).get(benchmark), "truncated": results["benchmarks"][benchmark]["truncated"],
        "template": results.get("chat_template", {}).get("used"), "source": str(folder),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=Path, default=Path(os.environ.get("CASCADE_RUNS", Path.home() / "cascade-runs")) / "real")
    parser.add_argument("--base-from", type=Path, action="append", default=[])
    args = parser.parse_args()
    print("| benchmark | own template (auto) | median words | cut at 512 | cascade's template | median words | change |")
    print("|---|---|---|---|---|---|---|")
    for benchmark in BENCHMARKS:
        own_dir = find(benchmark, args.runs / "starts" / "model", args.base_from)
        cascade_dir = find(benchmark, args.runs / "starts" / "cascade", [])
        own = cell(own_dir, benchmark) if own_dir else None
        theirs = cell(cascade_dir, benchmark) if cascade_dir else None
        own_text = f"{own['score']:.1f} [{own['low']:.1f}, {own['high']:.1f}]" if own else "not run"
        if theirs:
            cascade_text, cascade_words = f"{theirs['score']:.1f} [{theirs['low']:.1f}, {theirs['high']:.1f}]", theirs["words"]
        else:
            cascade_text, cascade_words = f"{BEFORE[benchmark][0]:.1f} (before)", BEFORE[benchmark][1]
        if own and theirs and len(own["values"]) == len(theirs["values"]):
            delta, low, high = bootstrap(own["values"], theirs["values"])
            change = f"{delta:+.1f} [{low:+.1f}, {high:+.1f}] paired"
        elif own:
            change = f"{own['score'] - BEFORE[benchmark][0]:+.1f}"
        else:
            change = ""
        print(f"| {NAMES[benchmark]} | {own_text} | {own['words'] if own else ''} | {own['truncated'] if own else ''} | "
              f"{cascade_text} | {cascade_words if cascade_words is not None else ''} | {change} |")


if __name__ == "__main__":
    main()
