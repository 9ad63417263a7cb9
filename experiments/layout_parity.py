"""Compare two runs of experiments/layout_parity.yaml: every metrics, manifest, data, rollout, evaluation and
held-out file byte for byte once the timing keys (and the fingerprints, which hash paths and times) are left
out and the run folder is named RUN; exit 1 naming the first difference. Usage: layout_parity.py OUT_A OUT_B
[KEY ...] (KEY: a config key one revision added, left out as well)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

TIMING = ("_s", "_per_s", "seconds", "elapsed", "wall", "timings", "time", "started", "finished", "date", "written_at", "evaluated_at",
          "fingerprint")  # a manifest fingerprint hashes paths and times; the files themselves are compared
FILES = ("metrics.jsonl", "heldout_rows.jsonl", "rollouts.jsonl", "cascade_stage.json", "run.json", "data.jsonl",
         "heldout.jsonl", "dropped.jsonl", "pass_rate.json", "data_card.json")


IGNORED: set[str] = set()  # config keys added between the two revisions (the command line's KEY ...)


def timing(key: str) -> bool:
    return key in IGNORED or any(part in key for part in TIMING)


def scrub(value, root: str):
    if isinstance(value, dict):
        return {k: scrub(v, root) for k, v in value.items() if not timing(k)}
    if isinstance(value, list):
        return [scrub(v, root) for v in value]
    if isinstance(value, str):
        return value.replace(root, "RUN")
    return value


def normal(path: Path, root: Path) -> str:
    text = path.read_text()
    if path.suffix == ".jsonl":
        return "\n".join(json.dumps(scrub(json.loads(line), str(root))) for line in text.splitlines() if line)
    if path.suffix == ".json":
        return json.dumps(scrub(json.loads(text), str(root)), indent=1)
    return text.replace(str(root), "RUN")


def compared(root: Path) -> dict[str, Path]:
    files = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if "tensorboard" in rel.parts:  # event files name the host, the process and the time
            continue
        if path.is_file() and (path.name in FILES or rel.parts[0] == "eval"):
            files[str(rel)] = path
    return files


def main(a: str, b: str) -> int:
    root_a, root_b = Path(a) / "run", Path(b) / "run"
    files_a, files_b = compared(root_a), compared(root_b)
    if set(files_a) != set(files_b):
        print("different files:", sorted(set(files_a) ^ set(files_b)))
        return 1
    for rel in files_a:
        if normal(files_a[rel], root_a) != normal(files_b[rel], root_b):
            print("differs:", rel)
            return 1
    print(f"identical: {len(files_a)} files (timings left out)")
    return 0


if __name__ == "__main__":
    IGNORED.update(sys.argv[3:])
    sys.exit(main(*sys.argv[1:3]))
