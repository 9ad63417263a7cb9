#!/usr/bin/env bash
# Score another system's outputs with cascade's verifiers: no model, no generation, just `cascade eval --responses`.
#
# Usage:  bash examples/score_external_outputs.sh
#         OUT=runs/external SHARED_DATA=/path/to/shared/data bash examples/score_external_outputs.sh
#
# A responses file is JSON Lines, one row per problem ({"id" | "prompt", "response"} or "responses": [k samples])
# or per sample. Rows are matched to a benchmark's problems by id or prompt text; with `--domain D` and no
# benchmark, each row carries its own `label` (the canonical label of that domain).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT=${OUT:-runs/external}
# The shared benchmark data: $SHARED_DATA, $CASCADE_SHARED_DATA, or the first shared/data beside the checkout or
# any folder above it (where `cascade eval` looks too).
SHARED_DATA=${SHARED_DATA:-${CASCADE_SHARED_DATA:-}}
if [ -z "$SHARED_DATA" ]; then
  dir="$(cd "$HERE/.." && pwd)"
  while [ "$dir" != / ]; do
    dir="$(dirname "$dir")"
    if [ -d "$dir/shared/data" ]; then SHARED_DATA="$dir/shared/data"; break; fi
  done
fi

# 1. A small file shipped with the examples: 4 math problems, 2 samples each, labels inline.
#    Expected: avg@2 62.5, pass@2 75.0 (one sample is a wrong sum, one never closes its <think>).
cascade eval --responses "$HERE/data/other_system_math.jsonl" --domain math --out "$OUT/math_example"

# 2. GPT-4's published IFEval responses (google-research's instruction_following_eval data), scored against the
#    IFEval revision they were written for. Expected: prompt strict 76.71, inst strict 83.45, prompt loose
#    79.30, inst loose 85.37 (the paper publishes 76.89 / 83.57 / 79.30 / 85.37).
GPT4="$SHARED_DATA/ifeval/input_response_data_gpt4_20231107_145030.jsonl"
if [ -f "$GPT4" ]; then
  cascade eval --responses "$GPT4" --benchmark-file "$SHARED_DATA/ifeval/input_data_066e1eda.jsonl" \
    --domain if --workers 2 --out "$OUT/ifeval_gpt4"
else
  echo "skip IFEval GPT-4 responses: no shared data found (set SHARED_DATA)" >&2
fi
echo "scores: $OUT/*/results.json"
