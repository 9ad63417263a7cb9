"""Dynamic filtering's cost: what a step generates to keep `prompts_per_step` groups with a learning signal.

With DAPO dynamic filtering a step keeps generating until `prompts_per_step` groups carry a learning signal
(rewards not all equal). Two ways to generate less, each compared with its absence (`--compare`):
- `oversample`: a round draws the missing count over the fraction of groups kept so far (default at most 4x)
  instead of only the missing prompts (`dynamic_filter_oversample=1`, the previous behaviour): fewer rounds,
  and every round is a whole decode loop.
- `epoch_filter`: after each pass over the prompts, those the policy always or never solved leave the pool
  (the paper's epoch-level filtering; hard ones come back with p 0.1, easy ones 0.01), so later passes draw
  fewer groups that dynamic filtering would throw away.
Both sides run the same RLVR stage of the tiny recipe (`--domain if`: IF-RL, `swe`: SWE RL) from the same
checkpoint and seed, one after the other in child processes, alternating over `--rounds`; printed: generation
rounds and groups generated per step, seconds generating per step, the stage's seconds, and the held-out score
each side reached (accuracy; SWE: the mean reward, Eq. 2).

    PYTHONPATH=src python experiments/dynamic_filter_rounds.py --init runs/tiny/rlhf --data runs/tiny/data_if \
        [--compare oversample|epoch_filter] [--domain if|swe] [--steps 10] [--threads 2] [--rounds 1] [override ...]

`--init` and `--data` are what `make demo` leaves in runs/tiny (the RLHF checkpoint is IF-RL's input, code RL's
is SWE RL's: `--domain swe --init runs/tiny/code_rl --data runs/tiny/data_swe --steps 12`).
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

# recipes/tiny.yaml's IF-RL and SWE RL stages, but for the keys a comparison sets; `--compare oversample` runs
# them without epoch filtering (rlvr's default), as its README row was measured
STAGE_KEYS = {
    "if": ["prompts_per_step=8", "group_size=8", "max_response_len=128", "lr=8e-4"],
    "swe": ["prompts_per_step=4", "group_size=16", "max_response_len=160", "temperature=1.0", "lr=1e-4"],
}
# side name -> its keys: the baseline first
COMPARISONS = {
    "oversample": {"oversample 1": ["dynamic_filter_oversample=1"], "oversample 4": ["dynamic_filter_oversample=4"]},
    "epoch_filter": {"no epoch filter": ["epoch_filter=false"], "epoch filter": ["epoch_filter=true"]},
}
SCORE = {"swe": "reward"}  # the others: accuracy


def run_side(args: argparse.Namespace, side: str, out: Path) -> dict:
    argv = [sys.executable, "-m", "cascade_cli", "rlvr", "--domain", args.domain, "--init", args.init]
    argv += ["--data", args.data, "--out", str(out), f"steps={args.steps}", "dynamic_filter=true", "seed=0"]
    argv += [f"eval_data={Path(args.data) / 'heldout.jsonl'}", *STAGE_KEYS[args.domain]]
    argv += [*COMPARISONS[args.compare][side], *args.overrides]
    env = {**os.environ, "CASCADE_THREADS": str(args.threads), "OMP_NUM_THREADS": str(args.threads)}
    began = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    seconds = time.perf_counter() - began
    if done.returncode != 0:
        sys.exit(f"{side} failed:\n{done.stderr[-3000:]}")
    steps = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    summary = json.loads((out / "cascade_stage.json").read_text())["metrics"]
    score = SCORE.get(args.domain, "accuracy")
    return {
        "seconds": seconds,
        "rounds": statistics.mean(s["generation_rounds"] for s in steps),
        "sampled": statistics.mean(s["groups_sampled"] for s in steps),
        "trained": statistics.mean(s["groups"] for s in steps),
        "generate_s": statistics.mean(s["time_generate"] for s in steps),
        "score": (summary[f"heldout_{score}_before"], summary[f"heldout_{score}_after"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--init", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--compare", choices=sorted(COMPARISONS), default="oversample")
    parser.add_argument("--domain", choices=sorted(STAGE_KEYS), default="if")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    sides = list(COMPARISONS[args.compare])
    results: dict[str, list[dict]] = {side: [] for side in sides}
    with tempfile.TemporaryDirectory() as scratch:
        for round_ in range(args.rounds):
            for side in sides if round_ % 2 == 0 else sides[::-1]:
                results[side].append(run_side(args, side, Path(scratch) / f"{sides.index(side)}-{round_}"))
    print(f"{args.domain} RL, {args.steps} steps from {args.init}, {args.threads} threads")
    print(f"{'side':<17}{'rounds':>8}{'drawn':>8}{'trained':>9}{'gen s/step':>12}{'stage s':>9}  held-out")
    for side, runs in results.items():
        for run in runs:
            before, after = run["score"]
            print(
                f"{side:<17}{run['rounds']:>8.2f}{run['sampled']:>8.1f}{run['trained']:>9.1f}"
                f"{run['generate_s']:>12.2f}{run['seconds']:>9.1f}  {before:.3f} -> {after:.3f}"
            )

    def mean(side: str, key: str) -> float:
        return statistics.mean(run[key] for run in results[side])

    baseline, change = sides
    print(
        f"{change} / {baseline}: groups drawn x{mean(change, 'sampled') / mean(baseline, 'sampled'):.2f}, "
        f"generating x{mean(change, 'generate_s') / mean(baseline, 'generate_s'):.2f} per step, "
        f"stage x{mean(change, 'seconds') / mean(baseline, 'seconds'):.2f}"
    )


if __name__ == "__main__":
    main()
