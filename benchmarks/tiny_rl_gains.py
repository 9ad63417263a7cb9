"""What each RLVR stage of the tiny cascade buys, over several seeds.

Runs `cascade recipe run recipes/tiny.yaml seed=S` once per seed (data, SFT, RM, RLHF and every RL stage all
reseeded), then reads each `rlvr` stage's manifest: greedy held-out accuracy of its input checkpoint
(`heldout_accuracy_before`) and of its result (`heldout_accuracy_after`) on its domain's held-out prompts;
for SWE RL the mean held-out reward (`heldout_reward_*`, the paper's Eq. 2: -1 unparsable, 0 no-op, lexical
similarity, 1 exact), with the exact-patch accuracy alongside. Prints one row per stage and seed, then the
mean gain per stage over the seeds.

    python benchmarks/tiny_rl_gains.py [--seeds 0 1 2] [--parallel 2] [--out runs/rl_gains] [override ...]

Overrides are recipe dotlist overrides. The evaluations after each stage stay on: the recipe's last stage
(distill) takes its teachers from them (`best:tiny_*`; experiments/tiny_mopd_gains.py measures it).
With --parallel N, N seeds run at once, each with 2/N torch threads.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

RL_STAGES = ("if_rl", "math_rl", "code_rl", "swe_rl")
GAIN_METRIC = {"swe_rl": "reward"}  # the others: accuracy


def run_seed(seed: int, out: Path, overrides: list[str], threads: int) -> subprocess.Popen:
    run_dir = out / f"seed{seed}"
    env = {**os.environ, "CASCADE_THREADS": str(threads), "OMP_NUM_THREADS": str(threads)}
    argv = [sys.executable, "-m", "cascade_cli", "recipe", "run", "recipes/tiny.yaml"]
    argv += [f"seed={seed}", f"run_dir={run_dir}", *overrides]
    log = open(out / f"seed{seed}.log", "w")  # noqa: SIM115 (closed with the process)
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)


def run_seeds(seeds: list[int], out: Path, overrides: list[str], parallel: int) -> None:
    """Run the recipe once per seed, `parallel` at a time (each with its share of the cores); exit on a failure."""
    threads = max(1, (os.cpu_count() or 2) // parallel)
    pending = list(seeds)
    running: dict[int, subprocess.Popen] = {}
    while pending or running:
        while pending and len(running) < parallel:
            seed = pending.pop(0)
            running[seed] = run_seed(seed, out, overrides, threads)
        for seed, proc in list(running.items()):
            if proc.poll() is not None:
                del running[seed]
                if proc.returncode != 0:
                    sys.exit(f"seed {seed} failed (exit {proc.returncode}); see {out}/seed{seed}.log")
        time.sleep(2)


def stage_gains(run_dir: Path) -> dict[str, tuple[float, float, str]]:
    """stage -> (before, after, extra): the stage's gain metric and, for a reward metric, the accuracies."""
    gains = {}
    for stage in RL_STAGES:
        if not (run_dir / stage).is_dir():  # a recipe without this stage (recipes/tiny.yaml has no swe_rl yet)
            continue
        manifest = json.loads((run_dir / stage / "cascade_stage.json").read_text())
        metrics = manifest["metrics"]
        metric = GAIN_METRIC.get(stage, "accuracy")
        extra = ""
        if metric != "accuracy":
            extra = f"accuracy {metrics['heldout_accuracy_before']:.3f} -> {metrics['heldout_accuracy_after']:.3f}"
        gains[stage] = (metrics[f"heldout_{metric}_before"], metrics[f"heldout_{metric}_after"], extra)
    return gains


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("runs/rl_gains"))
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    run_seeds(args.seeds, args.out, args.overrides, args.parallel)

    print(f"{'stage':8s} {'seed':>4s} {'before':>7s} {'after':>7s} {'gain':>7s}")
    per_stage: dict[str, list[float]] = {}
    for seed in args.seeds:
        for stage, (before, after, extra) in stage_gains(args.out / f"seed{seed}").items():
            per_stage.setdefault(stage, []).append(after - before)
            print(f"{stage:8s} {seed:4d} {before:7.3f} {after:7.3f} {after - before:+7.3f}  {extra}")
    print()
    for stage, gains in per_stage.items():
        spread = statistics.stdev(gains) if len(gains) > 1 else 0.0
        print(
            f"{stage:8s} mean gain {statistics.mean(gains):+.3f} (sd {spread:.3f}, min {min(gains):+.3f}) "
            f"in held-out {GAIN_METRIC.get(stage, 'accuracy')} over {len(gains)} seeds"
        )
    print(f"wall {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
