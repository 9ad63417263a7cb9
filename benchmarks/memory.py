"""Peak memory of one GRPO micro-batch on a real model: chunked log-probs vs a full log-softmax, gradient
checkpointing off vs on.

One micro-batch of B responses x T tokens after a short shared prompt (default 8 x 1024 on SmolLM2-135M,
vocabulary 49,152), forward + backward of the token-level GRPO loss with the entropy metric. `full` is the usual
computation (the model's [B, T, V] logits, a float32 log-softmax and entropy over them); `chunked` is cascade's
(engines/local/ops/logprobs.py: hidden states, then the LM head `--chunk` positions at a time). With checkpointing
the decoder layers are recomputed in backward (transformers' non-reentrant checkpointing; the trainer then runs
each row as prompt + response, engines/local/ops/grad_checkpointing.py). Each case runs in a fresh process
(benchmarks/logprob_memory.py's worker), so its peak RSS is its own; a case that would not fit in the memory
free at the start fails with an allocation error and is reported as such.

Measured 2026-12-01 (SmolLM2-135M, 2 threads, a quiet 23 GiB machine, the closed-form LM head; peak RSS
growth in MiB):
    8 x 256:   chunked/off 4,530  chunked/on 2,247
    8 x 512:   chunked/off 6,983  chunked/on 3,628   (1.20 MiB per token without checkpointing)
    8 x 1024:  full/off 21,027  chunked/off 12,936 (0.62x)  full/on 10,344  chunked/on 4,624 (0.45x full/on,
               0.22x full/off); each case 58-62 s

    python benchmarks/memory.py [--model smollm2-135m] [--batch 8] [--length 1024] [--chunk 1024] [--threads 1]
                                [--cases full-off,chunked-off,full-on,chunked-on]
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

FALLBACK = {"smollm2-135m": Path("/work/models/smollm2-135m")}  # until the spec resolves everywhere
CASES = [("full", False), ("chunked", False), ("full", True), ("chunked", True)]


def _worker():
    spec = importlib.util.spec_from_file_location("logprob_memory", Path(__file__).with_name("logprob_memory.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def resolve(model: str) -> str:
    """A local HF model directory for `model` (a cascade model spec, a directory, or the fallback path)."""
    from cascade_cli.models.resolve import resolve_model

    try:
        path = resolve_model(model)
    except Exception:  # noqa: BLE001 - an unknown spec in this checkout: try the fallback
        path = Path(model)
    if not (path / "config.json").is_file() and model in FALLBACK:
        path = FALLBACK[model]
    if not (path / "config.json").is_file():
        raise SystemExit(f"--model {model}: no HF model directory found (tried {path})")
    return str(path)


def free_bytes() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m", help="model spec or HF directory")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--length", type=int, default=1024)
    parser.add_argument("--chunk", type=int, default=1024, help="positions per LM-head chunk (the GRPO default)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cases", default="full-off,chunked-off,full-on,chunked-on",
                        help="comma-separated PATH-CHECKPOINTING cases to run")
    args = parser.parse_args()
    worker, model = _worker(), resolve(args.model)
    # Address-space limit per case: what is free now plus room for the libraries' mappings (not resident).
    limit = free_bytes() + 4 * 2**30
    print(f"{args.model} ({model}): one micro-batch of {args.batch} x {args.length} response tokens, "
          f"{free_bytes() / 2**30:.1f} GiB free, {args.threads} thread(s)")
    results = {}
    wanted = {tuple(case.split("-")) for case in args.cases.split(",")}
    for path, checkpointing in [case for case in CASES if (case[0], "on" if case[1] else "off") in wanted]:
        results[path, checkpointing] = result = worker.measure(
            path, 0, args.batch, args.length, args.chunk, model=model, checkpointing=checkpointing,
            threads=args.threads, limit_bytes=limit,
        )
        label = f"{path:8s} checkpointing {'on ' if checkpointing else 'off'}"
        if "error" in result:
            print(f"{label}  did not fit: {result['error']}", flush=True)
        else:
            print(f"{label}  peak growth {result['peak_growth_mib']:8,.0f} MiB  peak RSS "
                  f"{result['peak_rss_mib']:8,.0f} MiB  {result['seconds']:6.1f} s", flush=True)

    def ratio(a: tuple[str, bool], b: tuple[str, bool], key: str) -> str:
        if any("error" in results.get(case, {"error": "not run"}) for case in (a, b)):
            return "n/a"
        return f"{results[a][key] / results[b][key]:.3f}"

    for on in (False, True):
        print(f"chunked / full peak growth, checkpointing {'on' if on else 'off'}: "
              f"{ratio(('chunked', on), ('full', on), 'peak_growth_mib')}")
    for path in ("chunked", "full"):
        print(f"{path}: checkpointing on / off peak growth {ratio((path, True), (path, False), 'peak_growth_mib')}, "
              f"time {ratio((path, True), (path, False), 'seconds')}")


if __name__ == "__main__":
    main()
