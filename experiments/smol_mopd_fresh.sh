#!/usr/bin/env bash
# smol-mopd's row on a machine that has none of its inputs yet: its two teachers, then the distillation.
#   1. smol-if, seed 0 (benchmarks/real_gains.py): the IF teacher, evaluated (its row in docs/results.md);
#   2. smol-math, seed 0, trained only (`recipe run`, no evaluation): the math teacher;
#   3. smol-mopd, seed 0 (real_gains.py): the student before and after, teachers 1 and 2 (its base evaluation
#      is its own: --base-from shares a start only when the sources cover every benchmark, and here no source
#      evaluated GSM8K).
# Each step resumes where an interrupted run stopped and skips what is done, so run it again after a cut.
# Results and logs: $CASCADE_RUNS/real/{smol-if,smol-math,smol-mopd} (default ~/cascade-runs), progress in
# $CASCADE_RUNS/real/smol-mopd-fresh.log.
#
#   experiments/smol_mopd_fresh.sh            # in the background, one step after another
#   tail -f ~/cascade-runs/real/smol-mopd-fresh.log
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${CASCADE_RUNS:-$HOME/cascade-runs}/real"
mkdir -p "$runs"
python="${PYTHON:-.venv/bin/python}"
nohup bash -c '
  set -e
  runs="$1"; python="$2"
  echo "== $(date -u +%H:%M:%S) 1/3 smol-if seed 0 (the IF teacher; log $runs/smol-if.log)"
  "$python" benchmarks/real_gains.py --recipe recipes/smol-if.yaml --seeds 0 --out "$runs/smol-if" \
    >> "$runs/smol-if.log" 2>&1
  echo "== $(date -u +%H:%M:%S) 2/3 smol-math seed 0, trained only (the math teacher; log $runs/smol-math.log)"
  "$python" -m cascade_cli recipe run recipes/smol-math.yaml seed=0 run_dir="$runs/smol-math/seed0" \
    eval.after_each_stage=false >> "$runs/smol-math.log" 2>&1
  echo "== $(date -u +%H:%M:%S) 3/3 smol-mopd seed 0 (log $runs/smol-mopd.log)"
  "$python" benchmarks/real_gains.py --recipe recipes/smol-mopd.yaml --seeds 0 --out "$runs/smol-mopd" \
    stages.distill.teachers.if="$runs/smol-if/seed0/if_rl" \
    stages.distill.teachers.math="$runs/smol-math/seed0/math_rl" >> "$runs/smol-mopd.log" 2>&1
  echo "== $(date -u +%H:%M:%S) done"' smol_mopd_fresh "$runs" "$python" >> "$runs/smol-mopd-fresh.log" 2>&1 &
echo "pid $!: smol-if, smol-math (trained only), smol-mopd, one after another; log $runs/smol-mopd-fresh.log"
