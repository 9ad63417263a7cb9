#!/usr/bin/env bash
# The tiny cascade of recipes/tiny.yaml, chained by hand: the same checkpoints (and metrics) as
#   cascade recipe run recipes/tiny.yaml
# SFT -> reward model -> RLHF -> IF-RL -> math RL -> code RL -> SWE RL -> MOPD on the embedded tiny model and synthetic tasks,
# evaluated after every policy stage, then the report. Every command reads a checkpoint path and writes one;
# this script only passes paths along.
#
# Usage:  bash examples/tiny_cascade.sh
#         RUN_DIR=runs/short SFT_STEPS=20 RL_STEPS=4 bash examples/tiny_cascade.sh
# Every setting below can be overridden from the environment; the comment names the matching recipe override.
# SFT_ARGS / RM_ARGS / RL_ARGS add key=value overrides to those stages; EVAL=0 skips the evaluations and the
# report; STOP_AFTER=sft (or rlhf, if_rl, math_rl, code_rl, swe_rl) stops after that stage.
set -euo pipefail

RUN_DIR=${RUN_DIR:-runs/tiny_by_hand}    # run_dir=
SEED=${SEED:-0}                           # seed=
N_SFT=${N_SFT:-16000}                     # stages.data_sft.n=
SFT_MIX=${SFT_MIX:-"mix.math=0.5 mix.code=0.22 mix.swe=0.15 mix.if=0.065 mix.general=0.065"} # stages.data_sft.mix=
N_PREF=${N_PREF:-600}                     # stages.data_pref.n=
PREF_HOLDOUT=${PREF_HOLDOUT:-120}         # stages.data_pref.holdout=
N_CHAT=${N_CHAT:-200}                     # stages.data_chat.n=
CHAT_HOLDOUT=${CHAT_HOLDOUT:-32}          # stages.data_chat.holdout=
N_RL=${N_RL:-400}                         # stages.data_{if,math,code}.n=
N_SWE=${N_SWE:-96}                        # stages.data_swe.n=
HOLDOUT=${HOLDOUT:-128}                   # stages.data_{if,math,code,swe}.holdout=
SFT_STEPS=${SFT_STEPS:-4000}              # stages.sft.max_steps=
SFT_BATCH=${SFT_BATCH:-4}                 # stages.sft.batch_size=
SFT_EVAL_LIMIT=${SFT_EVAL_LIMIT:-32}      # stages.sft.eval_limit=
SFT_ARGS=${SFT_ARGS:-}                    # stages.sft.KEY=VALUE ...
RM_ARGS=${RM_ARGS:-}                      # stages.rm.KEY=VALUE ...
RLHF_STEPS=${RLHF_STEPS:-8}               # stages.rlhf.steps=
IF_RL_STEPS=${IF_RL_STEPS:-30}            # stages.if_rl.steps=
RL_STEPS=${RL_STEPS:-20}                  # stages.{math_rl,code_rl}.steps=
PROMPTS=${PROMPTS:-8}                     # stages.*.prompts_per_step=
IF_RESPONSE_LEN=${IF_RESPONSE_LEN:-128}   # stages.if_rl.max_response_len=
RESPONSE_LEN=${RESPONSE_LEN:-96}          # stages.code_rl.max_response_len=
RLHF_RESPONSE_LEN=${RLHF_RESPONSE_LEN:-64} # stages.rlhf.max_response_len=
# Math RL's response-length schedule (the paper's 24K -> 32K -> 40K, shrunk): stages.math_rl.phases=
MATH_PHASES=${MATH_PHASES:-"[{steps: 10, max_response_len: 96, temperature: 1.0, overlong_filter: true}, {steps: 10, max_response_len: 128, temperature: 1.0, overlong_filter: false}]"}
SWE_RL_STEPS=${SWE_RL_STEPS:-12}          # stages.swe_rl.steps=
SWE_PROMPTS=${SWE_PROMPTS:-4}             # stages.swe_rl.prompts_per_step=
SWE_RESPONSE_LEN=${SWE_RESPONSE_LEN:-160} # stages.swe_rl.max_response_len=
RL_ARGS=${RL_ARGS:-}                      # stages.{rlhf,if_rl,math_rl,code_rl,swe_rl}.KEY=VALUE ...
DISTILL_STEPS=${DISTILL_STEPS:-12}        # stages.distill.steps=
DISTILL_PROMPTS=${DISTILL_PROMPTS:-16}    # stages.distill.prompts_per_step=
DISTILL_RESPONSE_LEN=${DISTILL_RESPONSE_LEN:-160} # stages.distill.max_response_len=
DISTILL_ARGS=${DISTILL_ARGS:-}            # stages.distill.KEY=VALUE ...
EVAL=${EVAL:-1}                           # eval.after_each_stage=
EVAL_K=${EVAL_K:-4}                       # eval.k=
EVAL_LIMIT=${EVAL_LIMIT:-32}              # eval.limit=
EVAL_MAX_TOKENS=${EVAL_MAX_TOKENS:-160}   # eval.max_tokens=
STOP_AFTER=${STOP_AFTER:-}
BENCHMARKS=tiny_math,tiny_code,tiny_if,tiny_swe

evaluate() {  # evaluate MODEL NAME: the recipe's `eval` block, after every stage that makes a policy
  [ "$EVAL" = 1 ] || return 0
  cascade eval --model "$1" --benchmarks "$BENCHMARKS" --out "$RUN_DIR/eval/$2" \
    --k "$EVAL_K" --limit "$EVAL_LIMIT" --max-tokens "$EVAL_MAX_TOKENS" \
    --temperature 0.6 --top-p 0.95 --backend hf --seed 0 --workers 1
}

finish() {  # the stage x benchmark table (report.md) and plot (report.png)
  if [ "$EVAL" = 1 ]; then cascade report "$RUN_DIR" --max-regression 3.0; fi
  echo "tiny cascade by hand: done -> $RUN_DIR"
  exit 0
}

stop_after() { [ "$STOP_AFTER" != "$1" ] || finish; }

# The starting point: `tiny` is a random-init, char-level Qwen3-architecture model built in memory.
evaluate tiny base

# 1. Data: canonical rows (data.jsonl), held-out rows (heldout.jsonl) and a data card, one folder each.
# shellcheck disable=SC2086 # SFT_MIX is a list of key=value words
cascade prepare-data --source tiny:sft --out "$RUN_DIR/data_sft" name=data_sft seed="$SEED" n="$N_SFT" $SFT_MIX
cascade prepare-data --source tiny:pref --out "$RUN_DIR/data_pref" name=data_pref seed="$SEED" n="$N_PREF" \
  holdout="$PREF_HOLDOUT" drop_math_code=true
cascade prepare-data --source tiny:general --out "$RUN_DIR/data_chat" name=data_chat seed="$SEED" \
  n="$N_CHAT" holdout="$CHAT_HOLDOUT"
for domain in if math code swe; do
  n=$N_RL
  [ "$domain" = swe ] && n=$N_SWE
  cascade prepare-data --source "tiny:$domain" --out "$RUN_DIR/data_$domain" name="data_$domain" seed="$SEED" \
    n="$n" holdout="$HOLDOUT"
done

# 2. SFT from `tiny` (assistant-only loss); the held-out math prompts measure it before and after.
# shellcheck disable=SC2086  # the *_ARGS variables are lists of key=value words
cascade sft --init tiny --data "$RUN_DIR/data_sft" --out "$RUN_DIR/sft" name=sft seed="$SEED" \
  max_steps="$SFT_STEPS" batch_size="$SFT_BATCH" lr=3e-3 min_lr=3e-4 bf16=false compile=true \
  eval_prompts="$RUN_DIR/data_math/heldout.jsonl" eval_limit="$SFT_EVAL_LIMIT" $SFT_ARGS
evaluate "$RUN_DIR/sft" sft
stop_after sft

# 3. RLHF: a Bradley-Terry reward model on preference pairs, started from the SFT policy (a reward model is
#    not a policy: nothing evaluates it and the next stage starts from sft again), then GRPO on its scores.
# shellcheck disable=SC2086
cascade rlhf rm --init "$RUN_DIR/sft" --data "$RUN_DIR/data_pref" --out "$RUN_DIR/rm" name=rm seed="$SEED" \
  lr=1.5e-3 epochs=1 bf16=false $RM_ARGS
# shellcheck disable=SC2086
cascade rlhf --init "$RUN_DIR/sft" --reward-model "$RUN_DIR/rm" --data "$RUN_DIR/data_chat" --out "$RUN_DIR/rlhf" \
  name=rlhf seed="$SEED" eval_data="$RUN_DIR/data_chat/heldout.jsonl" steps="$RLHF_STEPS" \
  prompts_per_step="$PROMPTS" group_size=4 max_response_len="$RLHF_RESPONSE_LEN" lr=1e-4 $RL_ARGS
evaluate "$RUN_DIR/rlhf" rlhf
stop_after rlhf

# 4. RLVR, one domain after another, each from the previous stage's checkpoint, the verifier as the reward.
# shellcheck disable=SC2086
cascade rlvr --domain if --init "$RUN_DIR/rlhf" --data "$RUN_DIR/data_if" --out "$RUN_DIR/if_rl" \
  name=if_rl seed="$SEED" eval_data="$RUN_DIR/data_if/heldout.jsonl" steps="$IF_RL_STEPS" \
  prompts_per_step="$PROMPTS" group_size=8 max_response_len="$IF_RESPONSE_LEN" lr=8e-4 dynamic_filter=true \
  epoch_filter=true $RL_ARGS
evaluate "$RUN_DIR/if_rl" if_rl
stop_after if_rl

# shellcheck disable=SC2086
cascade rlvr --domain math --init "$RUN_DIR/if_rl" --data "$RUN_DIR/data_math" --out "$RUN_DIR/math_rl" \
  name=math_rl seed="$SEED" eval_data="$RUN_DIR/data_math/heldout.jsonl" steps="$RL_STEPS" \
  prompts_per_step="$PROMPTS" group_size=8 lr=1e-4 "phases=$MATH_PHASES" dynamic_filter=true epoch_filter=true \
  $RL_ARGS
evaluate "$RUN_DIR/math_rl" math_rl
stop_after math_rl

# shellcheck disable=SC2086
cascade rlvr --domain code --init "$RUN_DIR/math_rl" --data "$RUN_DIR/data_code" --out "$RUN_DIR/code_rl" \
  name=code_rl seed="$SEED" eval_data="$RUN_DIR/data_code/heldout.jsonl" steps="$RL_STEPS" \
  prompts_per_step="$PROMPTS" group_size=8 max_response_len="$RESPONSE_LEN" temperature=1.3 lr=2e-4 \
  dynamic_filter=true $RL_ARGS
evaluate "$RUN_DIR/code_rl" code_rl
stop_after code_rl

# SWE RL: 16 patches per issue (the paper's group size), the execution-free patch-similarity reward.
# shellcheck disable=SC2086
cascade rlvr --domain swe --init "$RUN_DIR/code_rl" --data "$RUN_DIR/data_swe" --out "$RUN_DIR/swe_rl" \
  name=swe_rl seed="$SEED" eval_data="$RUN_DIR/data_swe/heldout.jsonl" steps="$SWE_RL_STEPS" \
  prompts_per_step="$SWE_PROMPTS" group_size=16 max_response_len="$SWE_RESPONSE_LEN" temperature=1.0 lr=1e-4 \
  dynamic_filter=true epoch_filter=true $RL_ARGS
evaluate "$RUN_DIR/swe_rl" swe_rl
stop_after swe_rl

# 5. MOPD: the SWE RL model samples on every domain's prompts; each prompt goes to its domain's teacher, whose
#    log-probs of the sampled tokens are the per-token advantage: for IF and math the best checkpoint so far (the
#    recipe's `best:tiny_*`, which `cascade report --best` names; base is `tiny` itself), for code and SWE their
#    RL stages (the tiny benchmarks of 32 problems cannot tell those apart). Without the evaluations: each
#    domain's RL stage.
teacher() {  # teacher BENCHMARK STAGE_WITHOUT_EVALS -> a checkpoint
  local stage=$2
  if [ "$EVAL" = 1 ]; then stage=$(cascade report "$RUN_DIR" --best "$1"); fi
  if [ "$stage" = base ]; then echo tiny; else echo "$RUN_DIR/$stage"; fi
}
teachers="if=$(teacher tiny_if if_rl),math=$(teacher tiny_math math_rl)"
teachers="$teachers,code=$RUN_DIR/code_rl,swe=$RUN_DIR/swe_rl"
heldout="$RUN_DIR/data_if/heldout.jsonl,$RUN_DIR/data_math/heldout.jsonl"
heldout="$heldout,$RUN_DIR/data_code/heldout.jsonl,$RUN_DIR/data_swe/heldout.jsonl"
# shellcheck disable=SC2086
cascade distill --init "$RUN_DIR/swe_rl" --teachers "$teachers" --data "$RUN_DIR/data_if" --data "$RUN_DIR/data_math" \
  --data "$RUN_DIR/data_code" --data "$RUN_DIR/data_swe" --out "$RUN_DIR/distill" name=distill seed="$SEED" \
  "eval_data=[$heldout]" eval_limit=32 steps="$DISTILL_STEPS" prompts_per_step="$DISTILL_PROMPTS" \
  max_response_len="$DISTILL_RESPONSE_LEN" lr=2e-4 warmup_steps=3 warmup_start_lr=2e-5 $DISTILL_ARGS
evaluate "$RUN_DIR/distill" distill

finish
