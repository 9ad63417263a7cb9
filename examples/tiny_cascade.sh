#!/usr/bin/env bash
# The tiny cascade of recipes/tiny.yaml, chained by hand: the same checkpoints (and metrics) as
#   cascade recipe run recipes/tiny.yaml
# Every command reads a checkpoint path and writes one; this script only passes paths along.
#
# Usage:  bash examples/tiny_cascade.sh                       # the full tiny cascade (a few minutes on CPU)
#         RUN_DIR=runs/short SFT_STEPS=4 bash examples/tiny_cascade.sh   # any setting below can be overridden
# SFT_ARGS adds key=value overrides to the SFT stage (e.g. SFT_ARGS="max_seq_len=256 threads=1"); EVAL=0 skips
# the evaluations and the report. The matching recipe overrides are in the comments (stages.NAME.KEY=VALUE).
# After the recipe's stages the script goes on through the rest of the cascade on tiny data (reward model,
# RLHF, IF / math / code RLVR), a few GRPO steps each; FULL=0 stops where recipes/tiny.yaml stops.
set -euo pipefail

RUN_DIR=${RUN_DIR:-runs/tiny_by_hand}   # run_dir=
SEED=${SEED:-0}                          # seed=
N_SFT=${N_SFT:-2000}                     # stages.data_sft.n=
N_MATH=${N_MATH:-400}                    # stages.data_math.n=
HOLDOUT=${HOLDOUT:-100}                  # stages.data_math.holdout=
SFT_STEPS=${SFT_STEPS:-300}              # stages.sft.max_steps=
SFT_BATCH=${SFT_BATCH:-16}               # stages.sft.batch_size=
SFT_LR=${SFT_LR:-1e-3}                   # stages.sft.lr=
SFT_ARGS=${SFT_ARGS:-}                   # stages.sft.KEY=VALUE ...
EVAL=${EVAL:-1}                          # eval.after_each_stage=
EVAL_K=${EVAL_K:-4}                      # eval.k=
EVAL_LIMIT=${EVAL_LIMIT:-50}             # eval.limit=
EVAL_MAX_TOKENS=${EVAL_MAX_TOKENS:-96}   # eval.max_tokens=
FULL=${FULL:-1}                          # the stages after recipes/tiny.yaml's
RL_STEPS=${RL_STEPS:-8}                  # GRPO steps of each RL stage
RL_ARGS=${RL_ARGS:-prompts_per_step=8 group_size=4 max_response_len=48}   # key=value for every RL stage
N_RL=${N_RL:-200}                        # rows of each RL / preference data set
BENCHMARKS=tiny_math,tiny_code,tiny_if

evaluate() {  # evaluate MODEL STAGE: the recipe's `eval` block, after every stage that makes a model
  [ "$EVAL" = 1 ] || return 0
  cascade eval --model "$1" --benchmarks "$BENCHMARKS" --out "$RUN_DIR/eval/$2" \
    --k "$EVAL_K" --limit "$EVAL_LIMIT" --max-tokens "$EVAL_MAX_TOKENS" \
    --temperature 0.6 --top-p 0.95 --backend hf --seed 0 --workers 1
}

# The starting point: `tiny` is a random-init, char-level Qwen3-architecture model built in memory.
evaluate tiny base

# 1. Data: synthetic SFT conversations, and math problems whose held-out part measures the SFT stage.
cascade prepare-data --source tiny:sft --out "$RUN_DIR/data_sft" name=data_sft n="$N_SFT" seed="$SEED"
cascade prepare-data --source tiny:math --out "$RUN_DIR/data_math" name=data_math \
  n="$N_MATH" holdout="$HOLDOUT" seed="$SEED"

# 2. SFT from `tiny`; the checkpoint lands in $RUN_DIR/sft with cascade_stage.json and metrics.jsonl.
# shellcheck disable=SC2086  # SFT_ARGS is a list of key=value words
cascade sft --init tiny --data "$RUN_DIR/data_sft" --out "$RUN_DIR/sft" name=sft seed="$SEED" \
  max_steps="$SFT_STEPS" batch_size="$SFT_BATCH" lr="$SFT_LR" \
  eval_prompts="$RUN_DIR/data_math/heldout.jsonl" $SFT_ARGS
evaluate "$RUN_DIR/sft" sft

if [ "$FULL" = 1 ]; then
  # 3. RLHF: a Bradley-Terry reward model on preference pairs (from the SFT model; a reward model is not a
  #    policy, so nothing evaluates it), then GRPO on its scores, half the prompts thinking, half not.
  cascade prepare-data --source tiny:pref --out "$RUN_DIR/data_pref" name=data_pref n="$N_RL" seed="$SEED"
  cascade prepare-data --source tiny:general --out "$RUN_DIR/data_rlhf" name=data_rlhf n="$N_RL" seed="$SEED"
  cascade rlhf rm --init "$RUN_DIR/sft" --data "$RUN_DIR/data_pref" --out "$RUN_DIR/reward_model" \
    name=reward_model seed="$SEED"
  # shellcheck disable=SC2086
  cascade rlhf --init "$RUN_DIR/sft" --reward-model "$RUN_DIR/reward_model" --data "$RUN_DIR/data_rlhf" \
    --out "$RUN_DIR/rlhf" name=rlhf seed="$SEED" steps="$RL_STEPS" $RL_ARGS
  evaluate "$RUN_DIR/rlhf" rlhf

  # 4. RLVR, one domain after another, each starting from the previous stage's checkpoint.
  cascade prepare-data --source tiny:if --out "$RUN_DIR/data_if" name=data_if n="$N_RL" seed="$SEED"
  cascade prepare-data --source tiny:code --out "$RUN_DIR/data_code" name=data_code n="$N_RL" seed="$SEED"
  init="$RUN_DIR/rlhf"
  for domain in if math code; do
    # shellcheck disable=SC2086
    cascade rlvr --domain "$domain" --init "$init" --data "$RUN_DIR/data_$domain" --out "$RUN_DIR/${domain}_rl" \
      name="${domain}_rl" seed="$SEED" steps="$RL_STEPS" $RL_ARGS
    evaluate "$RUN_DIR/${domain}_rl" "${domain}_rl"
    init="$RUN_DIR/${domain}_rl"
  done
fi

# 5. The stage x benchmark table (report.md) and plot (report.png).
if [ "$EVAL" = 1 ]; then
  cascade report "$RUN_DIR" --max-regression 3.0
fi
echo "tiny cascade by hand: done -> $RUN_DIR"
