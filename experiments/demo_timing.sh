#!/usr/bin/env bash
# `make demo` of an earlier revision and of the working tree, one after the other, each with an empty Inductor
# cache and each after a reference eager SFT (400 steps, batch 4, 2 threads) whose tok/s reads the machine's
# speed (this shared machine drifts ~3x within hours). Prints each side's wall seconds; the stage tables are in
# /tmp/demo_timing_{old,new}.log.
#
#     experiments/demo_timing.sh [REV]      # REV: the previous release, default HEAD~1
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:-HEAD~1}
old_tree=$(mktemp -d)
git worktree add -q --detach "$old_tree" "$rev"
trap 'git worktree remove --force "$old_tree"' EXIT
.venv/bin/cascade prepare-data --source tiny:sft --out /tmp/demo_timing_ref_data --n 1600 > /dev/null
for side in old new; do
  if [ "$side" = old ]; then src=$old_tree/src; else src=$PWD/src; fi
  rm -rf "/tmp/demo_timing_ref_$side" "/tmp/demo_timing_$side"
  PYTHONPATH=$src .venv/bin/python -m cascade_cli sft --init tiny --data /tmp/demo_timing_ref_data \
    --out "/tmp/demo_timing_ref_$side" max_steps=400 batch_size=4 threads=2 | grep -a "sft done" | sed "s/^/$side reference: /"
  start=$(date +%s)
  TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) PYTHONPATH=$src .venv/bin/python -m cascade_cli recipe run recipes/tiny.yaml \
    run_dir="/tmp/demo_timing_$side" > "/tmp/demo_timing_$side.log" 2>&1
  echo "$side make demo: $(( $(date +%s) - start )) s"
done
