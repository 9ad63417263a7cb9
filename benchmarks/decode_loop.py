"""Milliseconds per decode step of the hf rollout loop, before and after the sort-free sampler and on-device
bookkeeping: `before` is the previous loop (benchmarks/decode_baseline.py: a full-vocabulary sort for top-p,
`torch.multinomial`, host reads and Python per row each step), `after` is `Generator(backend="hf")`.

Batches of 16, 64 and 256 rows (prompts x 8 samples), greedy and top-p 0.95 at temperature 1, on two models:
- `loop`: random-init with SmolLM2's 30 layers, 49,152-token vocabulary and tokenizer but hidden size 64, so
  the model computes next to nothing and what is measured is the loop's own cost. A random model's
  next-token distributions are nearly flat: the top-p 0.95 nucleus is most of the vocabulary (printed),
  the hardest case for a sampler that looks for it.
- `smollm2`: SmolLM2-135M-Instruct, where sampling's share of a real step shows (top-p vs greedy).
A step is (generate S+1 tokens - generate 1 token) / S: prefill and set-up cancel. Sides alternate in one
process, best of --rounds. Then torch.profiler's top-10 operators (self time) over S steps of the largest
batch with top-p, both sides, and the goals: `loop` after <= 60 ms/step at batch 256 top-p; SmolLM2 top-p
after <= 1.2x its greedy step at batch 256. Each model's device is read from its parameters.

    PYTHONPATH=src python benchmarks/decode_loop.py [--models loop,smollm2] [--batches 16,64,256] \
        [--steps 16] [--rounds 2] [--threads 2] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

LOOP_SHAPE = {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 2, "num_key_value_heads": 1,
              "head_dim": 32}  # fmt: skip
SETTINGS = {"greedy": {"temperature": 0.0}, "top-p 0.95": {"temperature": 1.0, "top_p": 0.95}}
LOOP_GOAL_MS = 60.0
SAMPLING_GOAL = 1.2
TOPICS = ["the sea", "a city at night", "an old clock", "winter", "a long journey", "a lost key", "rivers",
          "the first computer"]  # fmt: skip


def build_loop_model(smollm2_dir: Path, out: Path) -> Path:
    """SmolLM2's config and tokenizer with LOOP_SHAPE's widths, random weights (seed 0)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(smollm2_dir)
    for key, value in LOOP_SHAPE.items():
        setattr(config, key, value)
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).save_pretrained(out)
    for path in smollm2_dir.iterdir():
        if "token" in path.name or path.suffix == ".jinja" or path.name == "generation_config.json":
            shutil.copy(path, out / path.name)
    return out


def prompts_for(tokenizer: Any, count: int) -> list[str]:
    from cascade_cli.chat import render_prompt

    return [
        render_prompt(f"Write a long story about {TOPICS[i % len(TOPICS)]}, number {i}.", "no_think", tokenizer)
        for i in range(count)
    ]


def model_device(model: Any) -> str:
    return str(next(model.parameters()).device)


def sides(generator: Any) -> dict[str, Callable[..., Any]]:
    """`before` and `after` generate functions over one hf Generator (the same model and RNG)."""
    import decode_baseline

    return {
        "before": lambda prompts, **kw: decode_baseline.generate(generator, prompts, **kw),
        "after": generator.generate,
    }


def step_ms(generate: Callable[..., Any], prompts: list[str], steps: int, setting: dict[str, float]) -> float:
    """ms per decode step: (S+1 tokens - 1 token) / S, with no stop strings."""
    began = time.perf_counter()
    generate(prompts, n=8, max_new_tokens=1, stop=[], **setting)
    one = time.perf_counter() - began
    began = time.perf_counter()
    groups = generate(prompts, n=8, max_new_tokens=steps + 1, stop=[], **setting)
    many = time.perf_counter() - began
    finished_early = sum(len(c.token_ids) <= steps for group in groups for c in group)
    if finished_early:
        print(f"    ({finished_early} rows stopped early: the batch shrank)")
    return (many - one) / steps * 1000


def nucleus_size(generator: Any, prompts: list[str], top_p: float = 0.95) -> float:
    """Mean number of tokens in the top-p nucleus of the prompts' next-token distributions."""
    import torch

    tokenizer, model = generator.tokenizer, generator.model
    sizes = []
    with torch.inference_mode():
        for prompt in prompts:
            ids = torch.tensor([tokenizer.encode(prompt, add_special_tokens=False)], device=model.device)
            probs = model(input_ids=ids).logits[0, -1].float().softmax(-1).sort(descending=True).values
            sizes.append(int(((probs.cumsum(-1) - probs) < top_p).sum()))
    return sum(sizes) / len(sizes)


def profile_table(run: Callable[[], Any], device: str, rows: int = 10) -> str:
    """torch.profiler's top operators by self time over one call of `run`."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.startswith("cuda") else [])
    with profile(activities=activities) as profiler:
        run()
    key = "self_cuda_time_total" if device.startswith("cuda") else "self_cpu_time_total"
    return profiler.key_averages().table(sort_by=key, row_limit=rows)


def measure_model(name: str, model_dir: Path, args: argparse.Namespace) -> dict[str, Any]:
    from cascade_cli.engines.local.rollout.generation import Generator

    generator = Generator(model_dir, backend="hf", seed=0, device=args.device, max_batch_size=max(args.batches))
    print(f"\n== {name}: {model_dir.name}, device {model_device(generator.model)}, "
          f"top-p 0.95 nucleus of a prompt's first token: {nucleus_size(generator, prompts_for(generator.tokenizer, 4)):.0f}"
          f" of {generator.model.config.vocab_size} tokens")  # fmt: skip
    functions = sides(generator)
    for function in functions.values():  # warm-up: kernels, caches and the allocator
        function(prompts_for(generator.tokenizer, 2), n=8, max_new_tokens=3, stop=[], temperature=1.0, top_p=0.95)
    results: dict[str, Any] = {}
    print(f"  {'batch':>5} {'setting':>11} {'before ms':>10} {'after ms':>9} {'speed-up':>9}")
    for batch in args.batches:
        prompts = prompts_for(generator.tokenizer, batch // 8)
        for label, setting in SETTINGS.items():
            times: dict[str, list[float]] = {"before": [], "after": []}
            for round_ in range(args.rounds):
                for side in ("before", "after") if round_ % 2 == 0 else ("after", "before"):
                    times[side].append(step_ms(functions[side], prompts, args.steps, setting))
            best = {side: min(values) for side, values in times.items()}
            results[f"{batch}/{label}"] = best
            print(f"  {batch:5d} {label:>11} {best['before']:10.1f} {best['after']:9.1f} "
                  f"{best['before'] / best['after']:8.1f}x")  # fmt: skip
    largest = max(args.batches)
    prompts = prompts_for(generator.tokenizer, largest // 8)
    for side, function in functions.items():
        print(f"\n  torch.profiler, {name} {side}, batch {largest}, top-p 0.95, {args.steps} steps:")
        table = profile_table(
            lambda f=function: f(prompts, n=8, max_new_tokens=args.steps, stop=[], **SETTINGS["top-p 0.95"]),
            args.device,
        )
        print("\n".join("  " + line for line in table.splitlines()))
    generator.close()
    return results


def report_goals(results: dict[str, dict[str, Any]], batch: int) -> None:
    print(f"\nGoals (this machine; load average now {os.getloadavg()[0]:.1f}):")
    loop = results.get("loop", {}).get(f"{batch}/top-p 0.95")
    if loop:
        verdict = "met" if loop["after"] <= LOOP_GOAL_MS else f"missed by {loop['after'] - LOOP_GOAL_MS:.0f} ms"
        print(f"  loop's own cost, batch {batch}, top-p 0.95: {loop['before']:.0f} -> {loop['after']:.0f} ms/step "
              f"(goal <= {LOOP_GOAL_MS:.0f}: {verdict})")  # fmt: skip
    smol = results.get("smollm2", {})
    if f"{batch}/top-p 0.95" in smol:
        for side in ("before", "after"):
            ratio = smol[f"{batch}/top-p 0.95"][side] / smol[f"{batch}/greedy"][side]
            goal = f" (goal <= {SAMPLING_GOAL}x: {'met' if ratio <= SAMPLING_GOAL else 'missed'})" if side == "after" else ""
            print(f"  SmolLM2, batch {batch}, top-p 0.95 / greedy step, {side}: {ratio:.2f}x{goal}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="loop,smollm2")
    parser.add_argument("--batches", default="16,64,256")
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # progress shows in a log as it happens
    args.batches = [int(b) for b in args.batches.split(",")]
    if any(b % 8 for b in args.batches):
        parser.error(f"--batches: expected multiples of 8 (prompts x 8 samples); found {args.batches}")

    import torch

    from cascade_cli.models.resolve import resolve_model

    torch.set_num_threads(args.threads)
    args.device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    print(f"torch {torch.__version__}, {args.threads} threads, load average {os.getloadavg()[0]:.1f}; "
          f"{args.steps} steps per timing, best of {args.rounds}")  # fmt: skip
    smollm2 = resolve_model("smollm2-135m")
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        paths = {"loop": lambda: build_loop_model(smollm2, Path(tmp) / "loop"), "smollm2": lambda: smollm2}
        for name in args.models.split(","):
            results[name] = measure_model(name, paths[name](), args)
    report_goals(results, max(args.batches))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
