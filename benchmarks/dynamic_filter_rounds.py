"""Dynamic filtering: rounds sized by the kept fraction (`dynamic_filter_oversample`) vs only the missing prompts.

With DAPO dynamic filtering a step keeps generating until `prompts_per_step` groups carry a learning signal.
Drawing only the missing prompts each round (`dynamic_filter_oversample=1`, the previous behaviour) takes
several rounds when most groups are all-right or all-wrong, and every round is a whole decode loop; cascade
now draws the missing count over the fraction of groups kept so far (default at most 4x). Both sides run
the same RLVR stage (the tiny recipe's IF-RL by default) from the same checkpoint and seed, one after the
other in child processes, alternating over `--rounds`; printed: generation rounds and groups generated per
step, seconds generating per step, the stage's seconds, and the held-out accuracy each side reached.

    PYTHONPATH=src python benchmarks/dynamic_filter_rounds.py --init runs/tiny/rlhf --data runs/tiny/data_if \
        [--domain if] [--steps 10] [--threads 2] [--rounds 1] [override ...]

`--init` and `--data` are what `make demo` leaves in runs/tiny (the RLHF checkpoint is IF-RL's input).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# recipes/tiny.yaml's IF-RL stage
STAGE_KEYS = [
    "prompts_per_step=8", "group_size=8", "max_response_len=128", "lr=8e-4", "dynamic_filter=true", "seed=0"
]


def run_side(args: argparse.Namespace, factor: float, out: Path) -> dict:
    argv = [sys.executable, "-m", "cascade_cli", "rlvr", "--domain", args.domain, "--init", args.init]
    argv += ["--data", args.data, "--out", str(out), f"steps={args.steps}", f"dynamic_filter_oversample={factor}"]
    argv += [f"eval_data={Path(args.data) / 'heldout.jsonl'}", *STAGE_KEYS, *args.overrides]
    env = {**os.environ, "CASCADE_THREADS": str(args.threads), "OMP_NUM_THREADS": str(args.threads)}
    began = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        sys.exit(f"oversample {factor} failed:\n{done.stderr[-3000:]}")
    steps = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    summary = json.loads((out / "cascade_stage.json").read_text())["metrics"]
    return {
        "seconds": seconds,
        "rounds": statistics.mean(s["generation_rounds"] for s in steps),
        "sampled": statistics.mean(s["groups_sampled"] for s in steps),
        "trained": statistics.mean(s["groups"] for s in steps),
        "generate_s": statistics.mean(s["time_generate"] for s in steps),
        "accuracy": (summary["heldout_accuracy_before"], summary["heldout_accuracy_after"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--init", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--domain", default="if")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    results: dict[float, list[dict]] = {1.0: [], 4.0: []}
    with tempfile.TemporaryDirectory() as scratch:
        for round_ in range(args.rounds):
            for factor in (1.0, 4.0) if round_ % 2 == 0 else (4.0, 1.0):
                results[factor].append(run_side(args, factor, Path(scratch) / f"{factor}-{round_}"))
    print(f"{args.domain} RL, {args.steps} steps from {args.init}, {args.threads} threads")
    print(f"{'oversample':<12}{'rounds':>8}{'drawn':>8}{'trained':>9}{'gen s/step':>12}{'stage s':>9}  held-out")
    for factor, runs in results.items():
        for run in runs:
            before, after = run["accuracy"]
            print(
                f"{factor:<12}{run['rounds']:>8.2f}{run['sampled']:>8.1f}{run['trained']:>9.1f}"
                f"{run['generate_s']:>12.2f}{run['seconds']:>9.1f}  {before:.3f} -> {after:.3f}"
            )

    def mean(factor: float, key: str) -> float:
        return statistics.mean(run[key] for run in results[factor])

    print(
        f"oversample 4 / 1: generating x{mean(4.0, 'generate_s') / mean(1.0, 'generate_s'):.2f} per step, "
        f"stage x{mean(4.0, 'seconds') / mean(1.0, 'seconds'):.2f}"
    )


if __name__ == "__main__":
    main()
