#!/usr/bin/env bash
# Before/after parity of a refactor: run experiments/layout_parity.yaml with the source tree SRC into OUT, then
# (with a second OUT) compare every metrics and evaluation file byte for byte, timings left out.
#   experiments/layout_parity.sh run SRC OUT        e.g. run /work/main/src /tmp/layout-before
#   experiments/layout_parity.sh diff OUT_A OUT_B [KEY ...]    KEY: a config key added in between, left out
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python}
case "$1" in
  run)
    mkdir -p "$3"
    cd "$3"
    PYTHONPATH="$2" CASCADE_THREADS=1 nice -n 10 "$python" -m cascade_cli recipe run "$here/layout_parity.yaml" \
      run_dir="$3/run" 2>&1 | tee "$3/log.txt"
    ;;
  diff)
    shift; "$python" "$here/layout_parity.py" "$@"
    ;;
  *) echo "usage: $0 run SRC OUT | diff OUT_A OUT_B" >&2; exit 2 ;;
esac
