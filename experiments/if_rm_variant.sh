#!/usr/bin/env bash
# Issue 50's length levers: smol-if-rm's IF-RL stage again with one change, everything else seed 0's run as it
# is (its reward model and IF-RL data are reused, its base evaluation is the start), so only IF-RL varies.
# The recipe's first budget, 192 tokens, cut ~47% of the first rollouts and paid each 0, which teaches "shorter"
# whatever the answer says; the variants change how a cut answer is treated or how long an answer may be (the
# recipe now has 384, the lever that kept answers long: docs/results.md, IF-RL section).
# Results: ~/cascade-runs/real/smol-if-rm-NAME/seed$SEED (the recipe's eval), gains via real_gains.py, the
# reward model's held-out score via rm_heldout.py, each step in ~/cascade-runs/real/smol-if-rm-NAME/log.
#
#   experiments/if_rm_variant.sh overlong stages.if_rl.max_response_len=192 stages.if_rl.overlong_filter=true
#   experiments/if_rm_variant.sh kl stages.if_rl.kl_coef=0.04                 # KL to the start on top of the recipe
#   SEED=1 experiments/if_rm_variant.sh len384 stages.if_rl.max_response_len=384   # another IF-RL seed
#   tail -f ~/cascade-runs/real/smol-if-rm-overlong/log
#
# Each input can come from elsewhere (a machine without smol-if-rm's seed-0 run): RM, a trained reward model
# (smol-rlhf's seed S trains the same one as smol-if-rm's seed S: same data, settings and seed); IF_DATA, a
# prepared IF-RL data folder (the seed's own split: `cascade recipe run recipes/smol-if-rm.yaml --only data_if_seed`,
# then `--only data_if`, with seed=S run_dir=DIR); START, a run whose eval/base holds the start's IFEval and IFBench
# (smol-if's); HELDOUT, the held-out HH prompts the reward model scores (smol-rlhf's data_chat/heldout.jsonl).
#   R=~/cascade-runs/real SEED=1 RM=$R/smol-rlhf/seed1/rm IF_DATA=$R/if-data-seed1/data_if START=$R/smol-if/seed0 \
#     HELDOUT=$R/smol-rlhf/seed1/data_chat/heldout.jsonl experiments/if_rm_variant.sh len384 stages.if_rl.max_response_len=384
# NICE (default 0) lowers the run's priority, so work started beside it (a test run) takes the CPU first.
set -euo pipefail
if [ $# -lt 2 ]; then
  echo "usage: experiments/if_rm_variant.sh NAME OVERRIDE [OVERRIDE ...]  (e.g. len192 stages.if_rl.max_response_len=192)" >&2
  exit 2
fi
name="$1"; shift
cd "$(dirname "$0")/.."
runs="${CASCADE_RUNS:-$HOME/cascade-runs}/real"
base="$runs/smol-if-rm/seed0"           # the recipe's seed-0 run: reward model, data, base evaluation
rm="${RM:-$base/rm}"
if_data="${IF_DATA:-$base/data_if}"
start="${START:-$base}"
heldout="${HELDOUT:-$runs/hh-chat-prompts/data_chat/heldout.jsonl}"
out="$runs/smol-if-rm-$name"
seed="${SEED:-0}"
python="${PYTHON:-.venv/bin/python}"
for need in "$rm" "$if_data" "$start/eval/base" "$heldout"; do
  if [ ! -e "$need" ]; then
    echo "$need: not found; run smol-if-rm's seed 0 first (benchmarks/real_runs.sh smol-if-rm) or set RM, IF_DATA, START and HELDOUT" >&2
    exit 2
  fi
done
mkdir -p "$out/rm_heldout"
# The start's answers to the held-out prompts are the same for every variant: reuse seed 0's, do not regenerate
# (rm_heldout.py reuses them only if they answered the same prompts).
start_answers="$runs/smol-if-rm/rm_heldout/rm_heldout.start.answers.jsonl"
[ -f "$start_answers" ] && [ ! -f "$out/rm_heldout/rm_heldout.start.answers.jsonl" ] && cp "$start_answers" "$out/rm_heldout/"
nohup nice -n "${NICE:-0}" bash -c '
  set -e
  python="$1"; rm="$2"; if_data="$3"; start="$4"; heldout="$5"; out="$6"; seed="$7"; name="$8"; shift 8
  echo "== $(date -u +%H:%M:%S) IF-RL seed $seed, variant $name ($*), reward model $rm, data $if_data"
  "$python" -m cascade_cli recipe run recipes/smol-if-rm.yaml --only if_rl seed="$seed" run_dir="$out/seed$seed" \
    stages.if_rl.reward_model="$rm" \
    stages.if_rl.data="$if_data" stages.if_rl.eval_data="$if_data/heldout.jsonl" \
    eval.after_each_stage=true eval.limit=null eval.k=1 eval.temperature=0.0 eval.max_tokens=512 "$@"
  echo "== $(date -u +%H:%M:%S) gains"
  "$python" benchmarks/real_gains.py --recipe recipes/smol-if-rm.yaml --seeds "$seed" --out "$out" --report-only \
    --base-from "$start"
  echo "== $(date -u +%H:%M:%S) reward model on held-out HH prompts"
  "$python" benchmarks/rm_heldout.py --reward-model "$rm" --prompts "$heldout" \
    --policy start=smollm2-135m --policy "$name$seed=$out/seed$seed/if_rl" --out "$out/rm_heldout/rm_heldout.json"
  echo "== $(date -u +%H:%M:%S) done"' if_rm_variant "$python" "$rm" "$if_data" "$start" "$heldout" "$out" "$seed" \
  "$name" "$@" >> "$out/log" 2>&1 &
echo "pid $!: log $out/log"
