"""Time a recipe's own RL step, as `cascade recipe run` runs it: where each step's seconds go.

Writes a copy of the recipe with the chosen stage cut to its first N steps (a phased stage keeps its first
phase's settings), no held-out or per-stage evaluation, and its run directory under --out, then runs
`cascade recipe run` on it in a subprocess, exactly as a user would (the stages before it, data preparation
included, run first; an earlier training stage trains in full). Reads the stage's metrics.jsonl and run.json
and prints, per step: seconds in generation, verification, training and weight sync, generation rounds and
groups drawn by dynamic filtering for the groups trained on, tokens generated per second; and the stage's
set-up (model load, rollout engine start: the stage's wall time minus its steps).

    python experiments/recipe_step.py --recipe recipes/smol-if.yaml --stage if_rl --steps 3
    python experiments/recipe_step.py --recipe recipes/smol-code.yaml --stage code_rl --steps 3 [override ...]

How this differs from benchmarks/grpo_vs_trl.py: that script times one synthetic GRPO step (a fixed batch of
prompts x completions, no dynamic filtering, a toy reward) against TRL's on the same batch; this one times the
recipe's step, whose generation is as many rounds as dynamic filtering needs to fill the step and whose
scoring is the stage's real verifier.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

COLUMNS = ("time_step", "time_generate", "time_verify_wait", "time_train", "time_sync", "generation_rounds",
           "groups_sampled", "groups", "pass_rate", "reward_mean", "truncation_ratio", "tokens_per_s")


def trimmed_recipe(recipe: Path, stage: str, steps: int, run_dir: Path) -> dict[str, Any]:
    """The recipe with `stage` cut to `steps` steps and every evaluation off."""
    from omegaconf import OmegaConf

    config = OmegaConf.to_container(OmegaConf.load(recipe), resolve=False)
    stages = config["stages"]
    if stage not in stages:
        sys.exit(f"{recipe}: no stage {stage!r}; stages: {', '.join(stages)}")
    # The stages after `stage` are not run.
    names = list(stages)
    config["stages"] = {name: stages[name] for name in names[: names.index(stage) + 1]}
    target = config["stages"][stage]
    if target.get("phases"):
        target["phases"] = [{**target["phases"][0], "steps": steps}]
    target["steps"] = steps
    target.pop("eval_data", None)
    target["save_every"] = 0
    config["run_dir"] = str(run_dir)
    config["eval"] = {**config.get("eval", {}), "after_each_stage": False, "include_base": False}
    return config


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--recipe", type=Path, default=Path("recipes/smol-if.yaml"))
    parser.add_argument("--stage", default="if_rl")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("runs/recipe_step"))
    parser.add_argument("overrides", nargs="*", help="recipe dotlist overrides (stages.if_rl.lr=2e-5)")
    args = parser.parse_args()
    from omegaconf import OmegaConf

    run_dir = args.out / f"{args.recipe.stem}-{args.stage}"
    args.out.mkdir(parents=True, exist_ok=True)
    copy = args.out / f"{args.recipe.stem}-{args.stage}.yaml"
    OmegaConf.save(OmegaConf.create(trimmed_recipe(args.recipe, args.stage, args.steps, run_dir)), copy)
    argv = [sys.executable, "-m", "cascade_cli", "recipe", "run", str(copy), *args.overrides]
    if (run_dir / "run.json").is_file():  # the stages before it are done: run the stage again from scratch
        argv += ["--from", args.stage]
    began = time.perf_counter()
    print(f"$ {' '.join(argv[2:])}  (log: {run_dir}.log)", flush=True)
    with open(f"{run_dir}.log", "w") as log:
        code = subprocess.call(argv, stdout=log, stderr=subprocess.STDOUT)
    if code != 0:
        sys.exit(f"recipe run failed (exit {code}); see {run_dir}.log")
    wall = time.perf_counter() - began
    report(run_dir, args.stage, wall)


def report(run_dir: Path, stage: str, wall: float) -> None:
    lines = [json.loads(line) for line in (run_dir / stage / "metrics.jsonl").read_text().splitlines() if line]
    run = json.loads((run_dir / "run.json").read_text())
    stage_seconds = run["stages"][stage]["seconds"]
    steps_seconds = sum(line["time_step"] for line in lines)
    print(f"\n{run_dir.name}: {len(lines)} steps; stage {stage_seconds:.0f} s, of which set-up (model load, "
          f"rollout engine start, final save) {stage_seconds - steps_seconds:.0f} s; whole run {wall:.0f} s")
    print("| step | " + " | ".join(name.removeprefix("time_") for name in COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 1) + "|")
    for line in lines:
        cells = [f"{line[name]:.2f}" if isinstance(line[name], float) else str(line[name]) for name in COLUMNS]
        print(f"| {line['step']} | " + " | ".join(cells) + " |")
    median = {name: statistics.median(line[name] for line in lines) for name in COLUMNS}
    print("| median | " + " | ".join(f"{median[name]:.2f}" for name in COLUMNS) + " |")


if __name__ == "__main__":
    main()
