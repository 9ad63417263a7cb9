"""What nucleus sampling (top-p < 1) costs vLLM's rollouts on this machine: the same prompts, one engine.

An RL step's generation is one vLLM `generate` over prompts x n samples at temperature 1. On a GPU the
sampler's top-p is a fused kernel; vLLM's CPU sampler sorts the whole vocabulary (49,152 entries for
SmolLM2) for every sequence at every decode step, which can cost more than the model's forward pass. This
script times the recipe's rollout shape with top-p 1.0 and with `--top-p`, alternating on one engine (so
engine start, compilation and caches are shared and load drifts hit both sides), and prints tokens/s per
side and the ratio.

    PYTHONPATH=src python experiments/rollout_top_p.py [--model smollm2-135m] [--prompts 26] [--n 8]
        [--max-new-tokens 192] [--top-p 0.95] [--rounds 2]

The prompts are IF-RL prompts of recipes/smol-if.yaml's source (shared/data/real), chat-templated.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--prompts", type=int, default=26, help="prompts per batch (a dynamic-filter round)")
    parser.add_argument("--n", type=int, default=8, help="samples per prompt (the group size)")
    parser.add_argument("--max-new-tokens", type=int, default=192)
    parser.add_argument("--top-p", type=float, default=0.95)
    parser.add_argument("--rounds", type=int, default=2, help="batches per side, alternating")
    args = parser.parse_args()

    from transformers import AutoTokenizer
    from vllm import SamplingParams

    from cascade_cli.engines.local.ops.compute import configure_threads
    from cascade_cli.engines.local.rollout import vllm_engine
    from cascade_cli.evaluation.benchmarks import shared_file
    from cascade_cli.models.resolve import resolve_model

    threads = configure_threads()
    model_dir = resolve_model(args.model)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    rows = [json.loads(line) for line in shared_file("real/prompts/oasst_prompt_lottery_en_250_text.jsonl", "smol-if prompts", "").open()]
    texts = [row if isinstance(row, str) else row["prompt"] for row in rows[: args.prompts]]
    prompts = [tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                             add_generation_prompt=True) for text in texts]
    llm = vllm_engine.acquire(model_dir, dtype=vllm_engine.resolve_dtype("auto", "cpu"), max_model_len=1024,
                              device="cpu", seed=0, options={})
    llm.generate(prompts[:2], SamplingParams(max_tokens=8), use_tqdm=False)  # warm-up: first-shape compilation

    rates: dict[float, list[float]] = {1.0: [], args.top_p: []}
    for round_index in range(args.rounds):
        for top_p in rates:
            params = SamplingParams(n=args.n, temperature=1.0, top_p=top_p, max_tokens=args.max_new_tokens)
            start = time.perf_counter()
            outputs = llm.generate(prompts, params, use_tqdm=False)
            seconds = time.perf_counter() - start
            tokens = sum(len(sample.token_ids) for output in outputs for sample in output.outputs)
            rates[top_p].append(tokens / seconds)
            print(f"round {round_index + 1} top_p={top_p}: {tokens} tokens in {seconds:.1f} s, "
                  f"{tokens / seconds:.0f} tok/s", flush=True)
    full, nucleus = statistics.median(rates[1.0]), statistics.median(rates[args.top_p])
    print(f"\n{args.model}, {args.prompts} prompts x n={args.n}, <= {args.max_new_tokens} tokens, "
          f"{threads} threads, median of {args.rounds}")
    print(f"top_p=1.0: {full:.0f} tok/s; top_p={args.top_p}: {nucleus:.0f} tok/s; "
          f"ratio top_p={args.top_p} / top_p=1.0: {nucleus / full:.2f}x")


if __name__ == "__main__":
    main()
