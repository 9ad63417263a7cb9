"""Decoding n samples per prompt: the prompt's KV cache held once (`SharedPrompt`) vs repeated n times.

The hf rollout loop (engines/local/rollout/generation.py) prefills each prompt once. It used to copy the prompt's
keys and values for every sample, so each decode step read them n times; now the samples attend to one
copy (engines/local/ops/fast_attention.py, `SharedPrompt`). Both sides sample the same tokens from the same
seed (checked), so the comparison is pure speed. The shapes are the tiny recipe's: its RL domains' prompts
with the stages' group sizes and response limits, and the per-stage evaluation (k=4, 160 tokens). Sides
run in child processes, alternating, `--rounds` times each (this shared machine's speed drifts).

    PYTHONPATH=src python benchmarks/shared_prompt.py [--model tiny | CHECKPOINT] [--threads 2] [--rounds 2]

A random-init `tiny` rarely stops, so its responses run to the limit; an SFT'd checkpoint (`runs/tiny/sft`
after `make demo`) gives the recipe's real response lengths.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time

# (name, tiny task source, prompts per call, samples per prompt, max new tokens): recipes/tiny.yaml's shapes
CASES = [
    ("if_rl", "if", 23, 8, 128),  # 8 prompts kept of ~23 drawn per step (dynamic filtering)
    ("swe_rl", "swe", 9, 16, 160),  # 4 kept of ~9, 16 rollouts each
    ("eval", "math", 32, 4, 160),  # a benchmark of the per-stage evaluation
]


def worker(
    model: str, source: str, prompts: int, n: int, max_new_tokens: int, shared: bool, threads: int
) -> dict:
    import torch

    from cascade_cli.chat import render_prompt
    from cascade_cli.data.tiny_tasks import generate
    from cascade_cli.engines.local.rollout.generation import Generator
    from cascade_cli.models.resolve import resolve_model
    from cascade_cli.records import row_prompt

    torch.set_num_threads(threads)
    generator = Generator(str(resolve_model(model)), backend="hf", seed=0, share_prompt=shared)
    texts = [render_prompt(row_prompt(row), "think") for row in generate(source, prompts, seed=7)]
    generator.generate(texts[:2], n=2, max_new_tokens=4)  # warm-up
    began = time.perf_counter()
    groups = generator.generate(texts, n=n, max_new_tokens=max_new_tokens)
    seconds = time.perf_counter() - began
    tokens = [c.token_ids for group in groups for c in group]
    fingerprint = hashlib.sha256(str(tokens).encode()).hexdigest()
    return {"seconds": seconds, "tokens": sum(map(len, tokens)), "fingerprint": fingerprint}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        source, prompts, n, max_new_tokens, shared = args.worker
        sizes = int(prompts), int(n), int(max_new_tokens)
        print(json.dumps(worker(args.model, source, *sizes, shared == "1", args.threads)))
        return
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    print(f"model {args.model}, {args.threads} threads; seconds per generate call (best of {args.rounds})")
    header = ("case", "prompts x n", "max tokens", "tokens", "repeated s", "shared s", "speed-up")
    print("".join(f"{h:<8}" if i == 0 else f"{h:>12}" for i, h in enumerate(header)))
    for name, source, prompts, n, max_new_tokens in CASES:
        runs: dict[str, list[dict]] = {"0": [], "1": []}
        for round_ in range(args.rounds):
            for shared in ("0", "1") if round_ % 2 == 0 else ("1", "0"):
                argv = [sys.executable, __file__, "--model", args.model, "--threads", str(args.threads)]
                argv += ["--worker", source, str(prompts), str(n), str(max_new_tokens), shared]
                done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
                if done.returncode != 0:
                    sys.exit(f"{name} shared={shared} failed:\n{done.stderr[-3000:]}")
                runs[shared].append(json.loads(done.stdout.strip().splitlines()[-1]))
        if len({run["fingerprint"] for run in runs["0"] + runs["1"]}) != 1:
            sys.exit(f"{name}: the two sides sampled different tokens")
        repeated = min(run["seconds"] for run in runs["0"])
        shared_s = min(run["seconds"] for run in runs["1"])
        cells = (f"{prompts} x {n}", max_new_tokens, runs["1"][0]["tokens"], f"{repeated:.2f}", f"{shared_s:.2f}")
        print(f"{name:<8}" + "".join(f"{cell:>12}" for cell in cells) + f"{repeated / shared_s:>11.2f}x")


if __name__ == "__main__":
    main()
