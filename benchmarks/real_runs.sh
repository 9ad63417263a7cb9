#!/usr/bin/env bash
# Start the real-model runs in the background (a real recipe takes about an hour per seed on a 2-core CPU).
# Each recipe's runs go to $CASCADE_RUNS/real/<recipe> (default ~/cascade-runs), outside the work tree, with
# their progress in <recipe>.log beside them. Run it again after an interruption: `recipe run` resumes every
# stage where it stopped and real_gains.py reuses the evaluations already done.
#
#   benchmarks/real_runs.sh smol-if [smol-math ...]       # then: tail -f ~/cascade-runs/real/smol-if.log
#   python benchmarks/real_gains.py --recipe recipes/smol-if.yaml --seeds 0 1 \
#       --out ~/cascade-runs/real/smol-if --report-only      # the table, from what has finished
#
# REAL_GAINS_ARGS go to real_gains.py as they are (smol-mopd's teachers and shared base evaluations):
#   SEEDS=0 REAL_GAINS_ARGS="--base-from $HOME/cascade-runs/real/smol-if/seed0
#     --base-from $HOME/cascade-runs/real/smol-math/seed0
#     stages.distill.teachers.if=$HOME/cascade-runs/real/smol-if/seed0/if_rl
#     stages.distill.teachers.math=$HOME/cascade-runs/real/smol-math/seed0/math_rl" benchmarks/real_runs.sh smol-mopd
#
# CASCADE_THREADS pins torch's thread count; unset, each stage takes the cores idle when it starts, which on
# a machine shared with other (niced) work may be one.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${CASCADE_RUNS:-$HOME/cascade-runs}/real"
mkdir -p "$runs"
python="${PYTHON:-.venv/bin/python}"
# One recipe after another (two at once on two cores would each run at far less than half speed).
recipes=("${@:-smol-if}")
nohup bash -c '
  runs="$1"; python="$2"; shift 2
  for recipe in "$@"; do
    "$python" benchmarks/real_gains.py --recipe "recipes/$recipe.yaml" --seeds ${SEEDS:-0 1} \
      --out "$runs/$recipe" ${REAL_GAINS_ARGS:-} >> "$runs/$recipe.log" 2>&1
  done' real_runs "$runs" "$python" "${recipes[@]}" > /dev/null 2>&1 &
echo "pid $!: ${recipes[*]}, one after another; logs $runs/<recipe>.log"
