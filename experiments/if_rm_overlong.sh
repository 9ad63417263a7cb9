#!/usr/bin/env bash
# Issue 50's length lever: smol-if-rm's IF-RL with overlong filtering (a response cut at max_response_len is
# masked out of the loss instead of paid 0). smol-if-rm truncates ~47% of its first rollouts at 192 tokens; paid
# 0, each of those teaches "shorter" whatever its content, and IFEval's "at least N words" constraints cannot
# pass inside the budget at all. The paper filters overlong responses in its thinking IF-RL's second stage.
# Everything else is seed 0's run as it is: its reward model and IF-RL data are reused (only IF-RL varies), its
# base evaluation is the start. Results: $OUT/seed0 (the recipe's eval), gains via real_gains.py, the reward
# model's held-out score via rm_heldout.py, each in $OUT/log.
#
#   experiments/if_rm_overlong.sh            # in the background; tail -f ~/cascade-runs/real/smol-if-rm-overlong/log
#   SEED=1 experiments/if_rm_overlong.sh     # another IF-RL seed (same reward model and data)
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${CASCADE_RUNS:-$HOME/cascade-runs}/real"
base="$runs/smol-if-rm/seed0"           # the recipe's seed-0 run: reward model, data, base evaluation
out="$runs/smol-if-rm-overlong"
seed="${SEED:-0}"
python="${PYTHON:-.venv/bin/python}"
mkdir -p "$out"
nohup bash -c '
  set -e
  python="$1"; base="$2"; out="$3"; seed="$4"; runs="$5"
  echo "== $(date -u +%H:%M:%S) IF-RL seed $seed, overlong filtering, reward model $base/rm"
  "$python" -m cascade_cli recipe run recipes/smol-if-rm.yaml --only if_rl seed="$seed" run_dir="$out/seed$seed" \
    stages.if_rl.overlong_filter=true stages.if_rl.reward_model="$base/rm" \
    stages.if_rl.data="$base/data_if" stages.if_rl.eval_data="$base/data_if/heldout.jsonl" \
    eval.after_each_stage=true eval.limit=null eval.k=1 eval.temperature=0.0 eval.max_tokens=512
  echo "== $(date -u +%H:%M:%S) gains"
  "$python" benchmarks/real_gains.py --recipe recipes/smol-if-rm.yaml --seeds "$seed" --out "$out" --report-only \
    --base-from "$base"
  echo "== $(date -u +%H:%M:%S) reward model on held-out HH prompts"
  "$python" benchmarks/rm_heldout.py --reward-model "$base/rm" \
    --prompts "$runs/hh-chat-prompts/data_chat/heldout.jsonl" \
    --policy start=smollm2-135m --policy "overlong$seed=$out/seed$seed/if_rl" --out "$out/rm_heldout/rm_heldout.json"
  echo "== $(date -u +%H:%M:%S) done"' if_rm_overlong "$python" "$base" "$out" "$seed" "$runs" >> "$out/log" 2>&1 &
echo "pid $!: log $out/log"
