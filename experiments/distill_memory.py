"""Memory of MOPD's teachers: peak RSS of one `cascade distill` step with N teachers against GRPO's step.

Each side is a fresh process (one step, the same prompts, rollouts and lengths): `cascade rlvr --domain math`
(no teacher), then `cascade distill` with 1..N teachers, each a distinct checkpoint directory (a copy of the
model's files, so no two teachers can share memory-mapped weight pages). Prints each side's peak RSS, the
growth per teacher, and what the teachers should cost: their parameters x the bytes of the weight dtype
(float32 on a CPU), once each, with no gradients and no optimizer state.

    python experiments/distill_memory.py [--model smollm2-135m] [--teachers 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# One teacher per domain (each needs its verifier's labels); the rows of the teachers' domains train.
DOMAINS = ("math", "if", "code")
ROW = {
    "math": lambda i: {"id": f"m{i}", "domain": "math", "prompt": f"What is {i} + {i + 1}?",
                       "label": {"answer": str(2 * i + 1)}},
    "if": lambda i: {"id": f"i{i}", "domain": "if", "prompt": f"Describe the number {i}. Do not use any commas.",
                     "label": {"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]}},
    "code": lambda i: {"id": f"c{i}", "domain": "code", "prompt": f"Write a Python program that prints {i}.",
                       "label": {"kind": "stdio", "inputs": [""], "outputs": [f"{i}\n"]}},
}  # fmt: skip
CHILD = """
import json, resource, sys
from cascade_cli.cli import main
sys.argv = ["cascade", *sys.argv[1:]]
try:
    main()
except SystemExit as done:
    if done.code:
        raise
print("PEAK_KIB " + str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss))
"""


def peak_mib(argv: list[str], threads: int) -> float:
    env = {**os.environ, "CASCADE_THREADS": str(threads), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", CHILD, *argv], capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv[:2])} failed:\n{done.stderr[-3000:]}")
    line = next(line for line in done.stdout.splitlines() if line.startswith("PEAK_KIB "))
    return int(line.split()[1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--teachers", type=int, default=len(DOMAINS))
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    from cascade_cli.models.resolve import resolve_model

    model = resolve_model(args.model)
    params = json.loads((model / "config.json").read_text())
    work = Path(tempfile.mkdtemp(prefix="distill-memory-"))
    rows = [ROW[DOMAINS[i % len(DOMAINS)]](i) for i in range(8)]
    (work / "rows.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows if row["domain"] == "math"))
    sizes = ["steps=1", "prompts_per_step=4", "group_size=4", "max_response_len=64", "rollout.backend=hf"]
    common = ["--init", str(model), "--data", str(work / "rows.jsonl"), *sizes]
    results = {"grpo (no teacher)": peak_mib(["rlvr", "--domain", "math", *common, "--out", str(work / "grpo")], args.threads)}
    for count in range(1, args.teachers + 1):
        teachers = []
        for index in range(count):
            link = work / f"teacher{index}"
            if not link.exists():
                shutil.copytree(model, link)
            teachers += ["--teachers", f"{DOMAINS[index]}={link}"]
        data = work / f"rows{count}.jsonl"
        data.write_text("".join(json.dumps(row) + "\n" for row in rows if row["domain"] in DOMAINS[:count]))
        argv = ["distill", "--init", str(model), *teachers, "--data", str(data), *sizes, "warmup_steps=0",
                "--out", str(work / f"d{count}")]
        results[f"distill, {count} teacher{'s' * (count > 1)}"] = peak_mib(argv, args.threads)
    from safetensors import safe_open

    weights = sum(
        handle.get_tensor(name).numel()
        for shard in model.glob("*.safetensors")
        for handle in [safe_open(str(shard), framework="pt")]
        for name in handle.keys()  # noqa: SIM118
    )
    expected = weights * 4 / 2**20
    base = results["grpo (no teacher)"]
    print(f"model {args.model}: {weights / 1e6:.1f}M weights in its files ({params.get('tie_word_embeddings')} tied)")
    for side, mib in results.items():
        print(f"{side:22s} peak RSS {mib:8.0f} MiB  (+{mib - base:6.0f} over GRPO)")
    counts = list(range(1, args.teachers + 1))
    per = [(results[f"distill, {n} teacher{'s' * (n > 1)}"] - base) / n for n in counts]
    print(f"per teacher: {', '.join(f'{p:.0f}' for p in per)} MiB; its float32 weights: {expected:.0f} MiB")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
