"""Regional vs whole-decoder `torch.compile` of the tiny SFT step: compile seconds and step time.

`cascade sft compile=true` compiles each decoder layer in place (engines/local/ops/compiled.py): the layers run
the same code, so Dynamo and Inductor build it once. The previous release compiled the whole decoder, six
layers inlined into one graph. Each side trains the same steps of `tiny:sft` rows (batch 4, fp32) in its own
child process with an empty Inductor cache (a first `make demo`), one side after another so that no compile
competes with another for the cores; `--rounds 2` runs the sides twice, alternating, because this shared
machine's speed drifts. Compile seconds are the steps slower than 1 s (the first step and the recompile for
longer batches, compiled.py); the step time is the median of the rest.

    PYTHONPATH=src python benchmarks/compile_regional.py [--steps 300] [--threads 2] [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIDES = ("eager", "whole", "regional")


def child(side: str, data: str, steps: int, threads: int) -> dict:
    import torch

    from cascade_cli.engines.local.ops import compiled, optim
    from cascade_cli.engines.local.train.sft import step_loss
    from cascade_cli.engines.local.train.sft_data import BatchStream, collate, load_examples
    from cascade_cli.models import loader

    torch.manual_seed(0)
    torch.set_num_threads(threads)
    tokenizer = loader.load_tokenizer("tiny")
    examples = load_examples(data, tokenizer, 512)
    stream = BatchStream(examples, 4, 0, False, 512, True)
    model = loader.load_model("tiny", dtype="float32", device="cpu")
    model.config.use_cache = False
    model.train()
    if side == "whole":
        decoder = torch.compile(model.get_decoder(), dynamic=True)  # the previous release's compile
    else:
        decoder = compiled.training_decoder(model, enabled=side == "regional", device="cpu")
    optimizer = optim.adamw(model, 3e-3, (0.9, 0.95), 0.0)
    seconds = []
    for _ in range(steps):
        began = time.perf_counter()
        batch = collate(stream.take(1)[0], examples, tokenizer.pad_token_id)
        step_loss(model, batch, batch["trainable"], "cpu", False, decoder).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        seconds.append(time.perf_counter() - began)
    compiling = [s for s in seconds if s > 1.0]
    return {
        "side": side,
        "compile_s": sum(compiling),
        "compiles": len(compiling),
        "median_step_ms": 1000 * statistics.median(s for s in seconds if s <= 1.0),
        "total_s": sum(seconds),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.data, args.steps, args.threads)))
        return
    with tempfile.TemporaryDirectory() as scratch:
        data = Path(scratch) / "sft"
        prepare = [sys.executable, "-m", "cascade_cli", "prepare-data", "--source", "tiny:sft", "--out", str(data)]
        subprocess.run([*prepare, "--n", str(4 * args.steps)], check=True, capture_output=True)
        results: dict[str, list[dict]] = {side: [] for side in SIDES}
        for round_ in range(args.rounds):
            for side in SIDES if round_ % 2 == 0 else tuple(reversed(SIDES)):
                env = {"TORCHINDUCTOR_CACHE_DIR": str(Path(scratch) / f"inductor-{side}-{round_}")}
                argv = [sys.executable, __file__, "--child", side, "--data", str(data)]
                argv += ["--steps", str(args.steps), "--threads", str(args.threads)]
                done = subprocess.run(argv, env={**os.environ, **env}, capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    sys.exit(f"{side} failed:\n{done.stderr[-3000:]}")
                results[side].append(json.loads(done.stdout.strip().splitlines()[-1]))
    print(f"tiny SFT, {args.steps} steps of batch 4, {args.threads} threads, cold Inductor cache per side")
    print(f"{'side':<10}{'compile s':>12}{'compiles':>10}{'median step ms':>16}{'total s':>10}")
    for side, runs in results.items():
        for run in runs:
            print(
                f"{side:<10}{run['compile_s']:>12.1f}{run['compiles']:>10}{run['median_step_ms']:>16.1f}"
                f"{run['total_s']:>10.1f}"
            )

    def mean(side: str, key: str) -> float:
        return statistics.mean(run[key] for run in results[side])

    print(
        f"regional / whole: compile x{mean('regional', 'compile_s') / mean('whole', 'compile_s'):.2f}, "
        f"median step x{mean('regional', 'median_step_ms') / mean('whole', 'median_step_ms'):.2f}, "
        f"total x{mean('regional', 'total_s') / mean('whole', 'total_s'):.2f}; "
        f"regional / eager: median step x{mean('regional', 'median_step_ms') / mean('eager', 'median_step_ms'):.2f}"
    )


if __name__ == "__main__":
    main()
