"""Where an IF-RL stage's instruction-following gain comes from: per instruction group, before and after.

A thin caller of cascade's evaluation/instruction_groups.py, the per-group table that `cascade report RUN`
writes into report.md for every stage of a run: this compares any two evaluations' samples (`cascade eval`'s
or a recipe's RUN/eval/<stage>/samples.jsonl), e.g. of two different runs. Per instruction group
(`length_constraints`, `change_case`, `punctuation`, ...; IFBench's categories): the share followed (strict)
before and after with the paired 95% interval of the change, the median answer in words, and how many answers
fall short of a length minimum their prompt asked for.

    python benchmarks/if_breakdown.py RUN/eval/base/samples.jsonl RUN/eval/if_rl/samples.jsonl [--benchmark ifeval]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from cascade_cli.evaluation.instruction_groups import read_samples, render_group_tables, stage_breakdown


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--benchmark", default="ifeval")
    args = parser.parse_args()
    samples = {
        name: [row for row in read_samples(path) if row.get("benchmark") == args.benchmark]
        for name, path in (("before", args.before), ("after", args.after))
    }
    lines = render_group_tables(stage_breakdown(["before", "after"], samples))
    print("\n".join(lines) if lines else f"{args.benchmark}: no per-instruction verdicts in these samples")


if __name__ == "__main__":
    main()
