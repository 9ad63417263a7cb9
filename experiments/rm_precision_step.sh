#!/usr/bin/env bash
# smol-if-rm's own IF-RL step with the reward model scored in fp32 (an earlier revision, REV) and as the working
# tree scores it (`dtype: auto`: bf16 autocast where it pays), one after the other on seed 0's reward model and
# IF-RL data: the same recipe stage a user runs, cut to STEPS steps, no held-out or benchmark evaluation. Prints
# each side's per-step seconds (generation, waiting for rewards, training, the step) and the ratio of their
# medians; each side's log is /tmp/rm_precision_step_{old,new}.log.
#
#     experiments/rm_precision_step.sh [REV] [STEPS]   # REV: default d76c221~1 (fp32 scoring); STEPS: default 2
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:-d76c221~1}
steps=${2:-2}
base="${CASCADE_RUNS:-$HOME/cascade-runs}/real/smol-if-rm/seed0"
python="${PYTHON:-.venv/bin/python}"
if [ ! -d "$base/rm" ] || [ ! -d "$base/data_if" ]; then
  echo "$base: no reward model or IF-RL data; run smol-if-rm's seed 0 first (benchmarks/real_runs.sh smol-if-rm)" >&2
  exit 2
fi
old_tree=$(mktemp -d)
git worktree add -q --detach "$old_tree" "$rev"
trap 'git worktree remove --force "$old_tree"' EXIT
for side in old new; do
  if [ "$side" = old ]; then src=$old_tree/src; else src=$PWD/src; fi
  run="/tmp/rm_precision_step_$side"
  rm -rf "$run"
  PYTHONPATH=$src "$python" -m cascade_cli recipe run recipes/smol-if-rm.yaml --only if_rl seed=0 run_dir="$run" \
    stages.if_rl.reward_model="$base/rm" stages.if_rl.data="$base/data_if" stages.if_rl.eval_data=null \
    stages.if_rl.steps="$steps" stages.if_rl.save_every=0 eval.after_each_stage=false > "$run.log" 2>&1
done
"$python" - <<'EOF'
import json, statistics

parts = ("time_generate", "time_verify_wait", "time_train", "time_step")
medians = {}
for side in ("old", "new"):
    rows = [json.loads(line) for line in open(f"/tmp/rm_precision_step_{side}/if_rl/metrics.jsonl") if line.strip()]
    rows = [row for row in rows if "time_step" in row]
    for row in rows:
        print(f"{side} step {row['step']}: " + ", ".join(f"{p.removeprefix('time_')} {row[p]:.1f} s" for p in parts)
              + f", groups drawn {row['groups_sampled']}")
    medians[side] = {p: statistics.median(row[p] for row in rows) for p in parts}
for part in parts:
    old, new = medians["old"][part], medians["new"][part]
    print(f"median {part.removeprefix('time_')}: fp32 {old:.1f} s, bf16 autocast {new:.1f} s, ratio {new / old:.2f}")
EOF
