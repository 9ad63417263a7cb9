"""Short pilot runs of a recipe's RL stage, side by side: one run per variant (recipe overrides), the same seed,
the same data, compared on what the stage itself measures.

Each variant runs `cascade recipe run RECIPE` in its own run directory with the per-stage benchmark evaluation
off and its overrides applied (the stages before the RL stage run too; data preparation is seconds). The
table compares the stage's held-out accuracy before and after (greedy, the stage's own `eval_data`: never a
reported benchmark, so choosing a setting here does not tune on the test set), the training reward and pass
rate of the first and last steps, the groups dynamic filtering drew per group trained on, truncation, and
seconds per step.

    python experiments/rl_pilots.py --recipe recipes/smol-if.yaml --stage if_rl --steps 12 \\
        --variant base "" --variant fraction "stages.if_rl.verifier_options.if.reward=fraction" \\
        --out ~/cascade-runs/pilots/if
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def run_variant(recipe: str, stage: str, steps: int, run_dir: Path, overrides: list[str], seed: int) -> int:
    argv = [sys.executable, "-m", "cascade_cli", "recipe", "run", recipe, f"run_dir={run_dir}", f"seed={seed}",
            "eval.after_each_stage=false", f"stages.{stage}.steps={steps}", *overrides]  # fmt: skip
    log_path = run_dir.with_suffix(".log")
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    print(f"$ {' '.join(shlex.quote(a) for a in argv[2:])}  (log: {log_path})", flush=True)
    with open(log_path, "a") as log:
        return subprocess.call(argv, stdout=log, stderr=subprocess.STDOUT)


def summary(run_dir: Path, stage: str) -> dict[str, Any]:
    manifest = json.loads((run_dir / stage / "cascade_stage.json").read_text())
    metrics = manifest.get("metrics") or {}
    lines = [json.loads(line) for line in (run_dir / stage / "metrics.jsonl").read_text().splitlines() if line]
    head, tail = lines[: max(1, len(lines) // 4)], lines[-max(1, len(lines) // 4) :]

    def mean(rows: list[dict[str, Any]], key: str) -> float:
        return statistics.fmean(row[key] for row in rows)

    return {
        "steps": len(lines),
        "heldout_before": metrics.get("heldout_accuracy_before"),
        "heldout_after": metrics.get("heldout_accuracy_after"),
        "reward_first": mean(head, "reward_mean"),
        "reward_last": mean(tail, "reward_mean"),
        "pass_first": mean(head, "pass_rate"),
        "pass_last": mean(tail, "pass_rate"),
        "drawn_per_kept": sum(r["groups_sampled"] for r in lines) / max(1, sum(r["groups"] for r in lines)),
        "trunc_last": mean(tail, "truncation_ratio"),
        "len_last": mean(tail, "response_len_mean"),
        "s_per_step": statistics.median(r["time_step"] for r in lines),
    }


def render(rows: dict[str, dict[str, Any]]) -> str:
    keys = ["steps", "heldout_before", "heldout_after", "reward_first", "reward_last", "pass_first", "pass_last",
            "drawn_per_kept", "trunc_last", "len_last", "s_per_step"]  # fmt: skip
    lines = ["| variant | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for name, row in rows.items():
        cells = [f"{row[k]:.3f}" if isinstance(row[k], float) else str(row[k]) for k in keys]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recipe", required=True)
    parser.add_argument("--stage", required=True)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("runs/pilots"))
    parser.add_argument("--variant", nargs=2, action="append", metavar=("NAME", "OVERRIDES"), required=True,
                        help='a name and its recipe overrides as one string ("" for the recipe as it is)')
    parser.add_argument("--report-only", action="store_true", help="read the runs already in --out")
    args = parser.parse_args()
    results: dict[str, dict[str, Any]] = {}
    for name, overrides in args.variant:
        run_dir = args.out / name
        began = time.perf_counter()
        if not args.report_only:
            code = run_variant(args.recipe, args.stage, args.steps, run_dir, shlex.split(overrides), args.seed)
            if code != 0:
                print(f"variant {name} failed (exit {code}); see {run_dir.with_suffix('.log')}", flush=True)
                continue
        results[name] = summary(run_dir, args.stage)
        print(f"variant {name}: {results[name]}  ({time.perf_counter() - began:.0f} s)", flush=True)
    table = render(results)
    (args.out / "pilots.md").write_text(f"# {args.recipe} {args.stage}, {args.steps} steps, seed {args.seed}\n\n"
                                        f"{table}\n")  # fmt: skip
    print(table)


if __name__ == "__main__":
    main()
