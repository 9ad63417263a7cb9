#!/usr/bin/env bash
# The start rows of the real-model results under both chat templates (issue 54): SmolLM2-135M-Instruct evaluated
# greedy (k = 1, temperature 0, <= 512 new tokens, every problem) as the real recipes evaluate their base model,
# once with its own template (chat_template model: its system prompt, no mode flag; what `auto` picks for a stock
# model) and once with cascade's (ChatML, ` /no_think` on each user turn: how the README's start rows were measured
# before). Results go to $CASCADE_RUNS/real/starts/<template>/ (results.json, samples.jsonl per benchmark).
#
#   experiments/template_starts.sh                       # every benchmark, both templates, in the background
#   BENCHMARKS=gsm8k,mbpp TEMPLATES=model experiments/template_starts.sh
#   tail -f ~/cascade-runs/real/starts.log
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${CASCADE_RUNS:-$HOME/cascade-runs}/real/starts"
mkdir -p "$runs"
python="${PYTHON:-.venv/bin/python}"
benchmarks="${BENCHMARKS:-ifeval,ifbench,gsm8k,math500,mbpp,humaneval}"
templates="${TEMPLATES:-model cascade}"
nohup bash -c '
  runs="$1"; python="$2"; benchmarks="$3"; shift 3
  for template in "$@"; do
    for benchmark in ${benchmarks//,/ }; do
      [ -f "$runs/$template/$benchmark/results.json" ] && continue  # done in an earlier run
      echo "== $(date -u +%H:%M:%S) $template $benchmark"
      "$python" -m cascade_cli eval --model smollm2-135m --benchmarks "$benchmark" --chat-template "$template" \
        --k 1 --temperature 0 --max-tokens 512 --out "$runs/$template/$benchmark" --report-to "[]"
    done
  done
  echo "== $(date -u +%H:%M:%S) done"' template_starts "$runs" "$python" "$benchmarks" $templates >> "$runs.log" 2>&1 &
echo "pid $!: $benchmarks under $templates; log $runs.log"
