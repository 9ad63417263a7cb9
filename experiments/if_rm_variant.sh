#!/usr/bin/env bash
# Issue 50's length levers: smol-if-rm's IF-RL stage again with one change, everything else seed 0's run as it
# is (its reward model and IF-RL data are reused, its base evaluation is the start), so only IF-RL varies.
# smol-if-rm cuts ~47% of its first rollouts at 192 tokens and pays each 0, which teaches "shorter" whatever the
# answer says; the variants change how a cut answer is treated or how long an answer may be.
# Results: ~/cascade-runs/real/smol-if-rm-NAME/seed$SEED (the recipe's eval), gains via real_gains.py, the
# reward model's held-out score via rm_heldout.py, each step in ~/cascade-runs/real/smol-if-rm-NAME/log.
#
#   experiments/if_rm_variant.sh overlong stages.if_rl.overlong_filter=true    # cut answers masked out of the loss
#   experiments/if_rm_variant.sh len384 stages.if_rl.max_response_len=384      # a budget that fits the answers
#   SEED=1 experiments/if_rm_variant.sh len384 stages.if_rl.max_response_len=384   # another IF-RL seed
#   tail -f ~/cascade-runs/real/smol-if-rm-len384/log
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: experiments/if_rm_variant.sh NAME OVERRIDE [OVERRIDE ...]  (e.g. len384 stages.if_rl.max_response_len=384)" >&2
  exit 2
fi
name="$1"; shift
cd "$(dirname "$0")/.."
runs="${CASCADE_RUNS:-$HOME/cascade-runs}/real"
base="$runs/smol-if-rm/seed0"           # the recipe's seed-0 run: reward model, data, base evaluation
out="$runs/smol-if-rm-$name"
seed="${SEED:-0}"
python="${PYTHON:-.venv/bin/python}"
if [ ! -d "$base/rm" ] || [ ! -d "$base/data_if" ]; then
  echo "$base: no reward model or IF-RL data; run smol-if-rm's seed 0 first (benchmarks/real_runs.sh smol-if-rm)" >&2
  exit 2
fi
mkdir -p "$out/rm_heldout"
# The start's answers to the held-out prompts are the same for every variant: reuse seed 0's, do not regenerate.
start_answers="$runs/smol-if-rm/rm_heldout/rm_heldout.start.answers.jsonl"
[ -f "$start_answers" ] && [ ! -f "$out/rm_heldout/rm_heldout.start.answers.jsonl" ] && cp "$start_answers" "$out/rm_heldout/"
nohup bash -c '
  set -e
  python="$1"; base="$2"; out="$3"; seed="$4"; runs="$5"; name="$6"; shift 6
  echo "== $(date -u +%H:%M:%S) IF-RL seed $seed, variant $name ($*), reward model $base/rm"
  "$python" -m cascade_cli recipe run recipes/smol-if-rm.yaml --only if_rl seed="$seed" run_dir="$out/seed$seed" \
    stages.if_rl.reward_model="$base/rm" \
    stages.if_rl.data="$base/data_if" stages.if_rl.eval_data="$base/data_if/heldout.jsonl" \
    eval.after_each_stage=true eval.limit=null eval.k=1 eval.temperature=0.0 eval.max_tokens=512 "$@"
  echo "== $(date -u +%H:%M:%S) gains"
  "$python" benchmarks/real_gains.py --recipe recipes/smol-if-rm.yaml --seeds "$seed" --out "$out" --report-only \
    --base-from "$base"
  echo "== $(date -u +%H:%M:%S) reward model on held-out HH prompts"
  "$python" benchmarks/rm_heldout.py --reward-model "$base/rm" \
    --prompts "$runs/hh-chat-prompts/data_chat/heldout.jsonl" \
    --policy start=smollm2-135m --policy "$name$seed=$out/seed$seed/if_rl" --out "$out/rm_heldout/rm_heldout.json"
  echo "== $(date -u +%H:%M:%S) done"' if_rm_variant "$python" "$base" "$out" "$seed" "$runs" "$name" "$@" \
  >> "$out/log" 2>&1 &
echo "pid $!: log $out/log"
