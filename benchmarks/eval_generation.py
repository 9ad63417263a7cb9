"""Generated tokens/s for evaluation: vLLM versus transformers `generate` (and the Generator's own hf loop).

Same prompts and sampling for every side (n=8 samples per prompt, temperature 1, top-p 1 or --top-p, up to 256 new
tokens, stop at `<|im_end|>`; random-init models stop at random, so answer lengths vary), on two models:
the tiny model (`cascade_cli.models.tiny`, ~1.5M parameters) and a random-init Qwen3 of ~100M parameters with the
same character tokenizer. Each (model, side) runs in its own child process, one after the other, so no
side inherits another's threads or caches; every side runs on the GPU when there is one, and prints the device
its model's parameters are on. The transformers sides run with `--threads` torch threads,
by default the number vLLM's CPU engine gives its own OpenMP pool (all cores but one, which it keeps for its
scheduler), so both engines compute on the same number of cores. Prints tokens/s (generation only, and end to end with the model
load / engine start), the ratios, and whether `Generator(backend="auto")` picks the faster backend.

With `--model SPEC` (a real model, e.g. SmolLM2) only that model runs, the hf loop also under bf16 autocast
(`hf_loop_bf16`, measured to show that decoding gains nothing from it), vLLM's CPU engine computes on the
same `--threads` (`VLLM_CPU_OMP_THREADS_BIND=nobind`), and the `auto` rule (engines/local/rollout/rollout_backend.py)
is checked against the faster side with this run's token budget: auto must reach 0.95x of the best.
`--batches B` generates the same batch B times on one engine, as B steps of a GRPO stage do (the engine
start is paid once): one batch is an evaluation-sized job, several a stage.

    PYTHONPATH=src python benchmarks/eval_generation.py [--prompts 8] [--n 8] [--max-new-tokens 256] [--threads N]
    PYTHONPATH=src python benchmarks/eval_generation.py --model smollm2-135m --threads 2 \
        --sides vllm,hf_loop,hf_loop_bf16 [--batches 4] [--prompts 32 --max-new-tokens 192 --top-p 0.95]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIDES = ("vllm", "hf_generate", "hf_loop", "hf_loop_bf16")
LABELS = {
    "vllm": "vLLM (Generator backend=vllm)",
    "hf_generate": "transformers model.generate",
    "hf_loop": "Generator backend=hf (own loop)",
    "hf_loop_bf16": "Generator backend=hf, bf16 autocast",
}
AUTO_GOAL = 0.95
TIE_MARGIN = 1.10  # end-to-end speeds closer than 10% are a tie on a shared machine
# ~100M parameters with the tiny character vocabulary: 12 layers of width 768.
SHAPE_100M = {
    "hidden_size": 768,
    "intermediate_size": 2816,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "num_key_value_heads": 4,
    "head_dim": 64,
}


def build_models(root: Path) -> dict[str, Path]:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from cascade_cli.models.tiny import build_tiny

    tiny = build_tiny("tiny:0", root / "tiny")
    values = json.loads((tiny / "config.json").read_text())
    for derived in (
        "layer_types",
        "max_window_layers",
        "architectures",
        "model_type",
        "transformers_version",
    ):
        values.pop(derived, None)
    config = Qwen3Config(**{**values, **SHAPE_100M, "tie_word_embeddings": False})
    torch.manual_seed(0)
    big = root / "qwen3-100m"
    Qwen3ForCausalLM(config).save_pretrained(big)
    for name in os.listdir(tiny):  # same tokenizer files
        if "token" in name or name.endswith(".jinja"):
            (big / name).write_bytes((tiny / name).read_bytes())
    return {"tiny": tiny, "qwen3-100m": big}


def prompts(count: int) -> list[str]:
    from cascade_cli.chat import render_prompt

    questions = [
        f"What is {a}+{b}? Answer in \\boxed{{}}."
        for a, b in zip(range(3, 59, 7), range(11, 83, 9), strict=True)
    ]
    return [render_prompt(questions[i % len(questions)], "think") for i in range(count)]


# ---------------------------------------------------------------------------------------------------------
# one side, in a child process
# ---------------------------------------------------------------------------------------------------------


def run_side(
    side: str,
    model_dir: str,
    count: int,
    n: int,
    max_new_tokens: int,
    seed: int,
    threads: int,
    batches: int = 1,
    top_p: float = 1.0,
) -> dict:
    import torch

    if side != "vllm":
        torch.set_num_threads(threads)

    texts = prompts(count)
    started = time.perf_counter()
    if side in ("vllm", "hf_loop", "hf_loop_bf16"):
        from cascade_cli.engines.local.rollout.generation import Generator

        backend = "vllm" if side == "vllm" else "hf"
        generator = Generator(model_dir, backend=backend, seed=seed, bf16=side == "hf_loop_bf16")
        device = vllm_device(generator) if side == "vllm" else str(next(generator.model.parameters()).device)
        loaded = time.perf_counter()
        lengths = []
        for _ in range(batches):
            groups = generator.generate(texts, n=n, max_new_tokens=max_new_tokens, temperature=1.0, top_p=top_p)
            lengths += [len(c.token_ids) for group in groups for c in group]
        done = time.perf_counter()
        generator.close()
    else:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
        target = "cuda" if torch.cuda.is_available() else "cpu"  # where the Generator sides run
        model = AutoModelForCausalLM.from_pretrained(model_dir).to(target).eval()
        device = str(next(model.parameters()).device)
        torch.manual_seed(seed)
        loaded = time.perf_counter()
        batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
        # the model's own stop ids (generation_config), as vLLM uses them besides the <|im_end|> stop
        stops = model.generation_config.eos_token_id
        stops = set(stops if isinstance(stops, list) else [stops]) | {
            tokenizer.convert_tokens_to_ids("<|im_end|>")
        }
        lengths = []
        for _ in range(batches):
            with torch.inference_mode():
                out = model.generate(
                    **batch,
                    do_sample=True,
                    temperature=1.0,
                    top_p=top_p,
                    top_k=0,
                    num_return_sequences=n,
                    max_new_tokens=max_new_tokens,
                    eos_token_id=sorted(stops),
                    pad_token_id=tokenizer.pad_token_id,
                )
            new = out[:, batch["input_ids"].shape[1] :].tolist()
            lengths += [next((i + 1 for i, t in enumerate(row) if t in stops), len(row)) for row in new]
        done = time.perf_counter()
    tokens = sum(lengths)
    return {
        "side": side,
        "device": device,
        "tokens": tokens,
        "sequences": len(lengths),
        "mean_len": tokens / max(1, len(lengths)),
        "min_len": min(lengths),
        "max_len": max(lengths),
        "load_s": loaded - started,
        "gen_s": done - loaded,
        "gen_tok_s": tokens / (done - loaded),
        "total_tok_s": tokens / (done - started),
    }


def vllm_device(generator: object) -> str:
    """The device of the engine's model parameters (the configured device where the internals differ)."""
    engine = generator._llm.llm_engine
    try:
        runner = engine.model_executor.driver_worker.worker.model_runner
        model = runner.get_model() if hasattr(runner, "get_model") else runner.model
        return str(next(model.parameters()).device)
    except (AttributeError, StopIteration):
        return f"{engine.vllm_config.device_config.device} (configured)"


def child(side: str, model_dir: Path, args: argparse.Namespace) -> dict | None:
    command = [
        sys.executable, __file__, "--worker", side, "--model", str(model_dir), "--prompts", str(args.prompts),
        "--n", str(args.n), "--max-new-tokens", str(args.max_new_tokens), "--seed", str(args.seed),
        "--threads", str(args.threads), "--batches", str(args.batches), "--top-p", str(args.top_p),
    ]  # fmt: skip
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false"}
    if side != "vllm" or args.model:
        env["OMP_NUM_THREADS"] = str(args.threads)
    if args.model:
        env["VLLM_CPU_OMP_THREADS_BIND"] = "nobind"  # vLLM computes on --threads too, not all cores but one
    completed = subprocess.run(command, capture_output=True, text=True, env=env, timeout=args.timeout)
    if completed.returncode != 0:
        print(f"  {side}: FAILED\n{completed.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(completed.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batches", type=int, default=1, help="generate the batch B times on one engine")
    parser.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling (GRPO's rollouts use 0.95)")
    parser.add_argument("--models", default="tiny,qwen3-100m")
    parser.add_argument("--sides", default=",".join(SIDES))
    parser.add_argument("--timeout", type=int, default=900)
    parser.add_argument("--threads", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    parser.add_argument("--worker", choices=SIDES)
    parser.add_argument("--model", help="a real model spec or directory (default: the tiny and 100M models)")
    args = parser.parse_args()
    if args.worker:
        result = run_side(
            args.worker,
            args.model,
            args.prompts,
            args.n,
            args.max_new_tokens,
            args.seed,
            args.threads,
            args.batches,
            args.top_p,
        )
        print(json.dumps(result))
        return

    from cascade_cli.engines.local.rollout.generation import count_parameters, resolve_backend
    from cascade_cli.models.resolve import resolve_model

    device = "cuda" if _cuda() else "cpu"
    print(
        f"target device {device} (each side prints the device of its model's parameters); {args.batches} x "
        f"{args.prompts} prompts x n={args.n}, temperature 1, top-p {args.top_p}, up to {args.max_new_tokens} tokens"
    )
    with tempfile.TemporaryDirectory() as tmp:
        if args.model:
            models = {args.model: resolve_model(args.model)}
            args.models = args.model
        else:
            models = build_models(Path(tmp))
        print(f"{args.threads} threads per side; load average {os.getloadavg()[0]:.1f}")
        for name in args.models.split(","):
            model_dir = models[name]
            params = count_parameters(model_dir)
            print(f"\n== {name}: {params / 1e6:.1f}M parameters")
            results = {}
            for side in args.sides.split(","):
                result = child(side, model_dir, args)
                if result is None:
                    continue
                results[side] = result
                print(
                    f"  {LABELS[side]:34s} on {result['device']:6s} {result['gen_tok_s']:9.0f} tok/s generating, "
                    f"{result['total_tok_s']:9.0f} tok/s with load ({result['load_s']:.1f}s load, "
                    f"{result['tokens']} tokens, length {result['min_len']}-{result['max_len']}, "
                    f"mean {result['mean_len']:.0f})"
                )
            if "vllm" in results and "hf_generate" in results:
                for key, what in (("gen_tok_s", "generating"), ("total_tok_s", "with load")):
                    ratio = results["vllm"][key] / results["hf_generate"][key]
                    print(f"  ratio vLLM / transformers generate ({what}): {ratio:.2f}x")
            if "vllm" in results and "hf_loop" in results:
                for key, what in (("gen_tok_s", "generating"), ("total_tok_s", "with load")):
                    ratio = results["vllm"][key] / results["hf_loop"][key]
                    print(f"  ratio vLLM / Generator hf loop ({what}): {ratio:.2f}x")
                auto = resolve_backend("auto", model_dir, device, planned_tokens=planned_tokens(args))
                ratio = results["vllm"]["total_tok_s"] / results["hf_loop"]["total_tok_s"]
                faster = "vllm" if ratio > 1 else "hf"
                if 1 / TIE_MARGIN <= ratio <= TIE_MARGIN:
                    verdict = f"tie within {TIE_MARGIN - 1:.0%} (either choice is fine)"
                else:
                    verdict = "yes" if auto == faster else "NO"
                print(
                    f"  auto picks {auto}; faster end to end here: {faster}; auto picks the faster: {verdict}"
                )
            if args.model:
                check_auto(results, model_dir, params, device, args)
        print(f"load average at the end {os.getloadavg()[0]:.1f}")


def planned_tokens(args: argparse.Namespace) -> int:
    """The upper bound a trainer plans with: every response of every batch at full length."""
    return args.batches * args.prompts * args.n * args.max_new_tokens


def check_auto(results: dict, model_dir: Path, params: int, device: str, args: argparse.Namespace) -> None:
    """What `auto` gives a GRPO trainer with this run's token budget, against the best side measured."""
    from cascade_cli.engines.local.rollout.generation import resolve_backend

    planned = planned_tokens(args)
    backend = resolve_backend("auto", model_dir, device, planned_tokens=planned)
    side = "vllm" if backend == "vllm" else "hf_loop"  # a trainer's hf rollouts stay fp32 (precision.py)
    if side not in results:
        print(f"  auto picks {side} (not measured in this run)")
        return
    for key, what in (("gen_tok_s", "generating"), ("total_tok_s", "with engine start")):
        measured = {s: r[key] for s, r in results.items() if s != "hf_generate"}
        best = max(measured, key=measured.get)
        ratio = results[side][key] / measured[best]
        goal = "ok" if ratio >= AUTO_GOAL else "BELOW"
        print(
            f"  auto ({planned} planned tokens) picks {side}: {ratio:.2f}x the best ({best}) {what} "
            f"(goal >= {AUTO_GOAL}: {goal})"
        )


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


if __name__ == "__main__":
    main()
