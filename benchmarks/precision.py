"""fp32 vs bf16 autocast on this CPU, for the parts of a GRPO step on a real model: the training pass
(forward + backward of cascade's chunked log-probs over 64 responses), rollout generation (the hf loop,
8 prompts x 8 samples) and, for RLHF and IF-RL's reward-model bonus, the reward model's scoring of those 64
answers (RewardModelScorer, as the stage calls it). The defaults (`dtype: auto` in GRPO and its reward
model's scoring, `bf16: true` in SFT and reward-model training) follow from what this prints. Runs both
precisions interleaved in one process; prints seconds, ratios, the training pass's share of the CPU's matmul
ceiling, and how far bf16 moves the reward model's scores (max difference, each group's best answer).

    PYTHONPATH=src python benchmarks/precision.py --model /work/models/smollm2-135m [--threads 2] [--reps 2]
        [--reward-model RUN/rm]   # a trained reward model (default: --model with a fresh score head)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

GROUP, PROMPTS, RESPONSE_TOKENS = 8, 8, 64


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="a model spec or directory (default: tiny)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--new-tokens", type=int, default=RESPONSE_TOKENS)
    parser.add_argument("--prompts", type=int, default=PROMPTS, help=f"prompts of {GROUP} responses each")
    parser.add_argument("--reward-model", help="the scoring part's reward model (default: --model, fresh head)")
    parser.add_argument("--parts", default="train,score,generate", help="which parts to time (comma-separated)")
    args = parser.parse_args()
    parts = [part for part in ("train", "score", "generate") if part in args.parts.split(",")]

    import torch
    from cpu_ceiling import ceiling_line, format_ceiling, measure_ceiling
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from cascade_cli.chat import render_prompt
    from cascade_cli.data import tiny_tasks
    from cascade_cli.engines.local.ops.logprobs import response_hidden, token_logprobs
    from cascade_cli.engines.local.rollout.generation import Generator
    from cascade_cli.models.loader import quiet_transformers
    from cascade_cli.models.resolve import resolve_model
    from cascade_cli.verifiers.reward_model import RewardModelScorer

    torch.set_num_threads(args.threads)
    quiet_transformers()
    model_dir = str(resolve_model(args.model))
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    params = sum(p.numel() for p in model.parameters())
    texts = [render_prompt(r["prompt"], "no_think") for r in tiny_tasks.generate("math", args.prompts, seed=0)]
    prompt_ids = [tokenizer.encode(t, add_special_tokens=False) for t in texts]
    gen = torch.Generator().manual_seed(0)
    responses = [
        torch.randint(0, tokenizer.vocab_size, (args.new_tokens,), generator=gen).tolist()
        for _ in range(GROUP * args.prompts)
    ]
    prompts = [p for p in prompt_ids for _ in range(GROUP)]
    pad = tokenizer.pad_token_id or 0

    def train_pass(bf16: bool) -> float:
        model.train()
        began = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            hidden, tokens, present = response_hidden(model, prompts, responses, pad, "cpu")
            logprobs, _ = token_logprobs(hidden, model.get_output_embeddings(), tokens)
        (logprobs * present).sum().backward()
        model.zero_grad(set_to_none=True)
        return time.perf_counter() - began

    # the reward model reads each prompt and response as one text (RLHF's rm_input shape); loaded only when timed
    scorer = RewardModelScorer(args.reward_model or model_dir, device="cpu", precision="float32") if "score" in parts else None
    scored_texts = [tokenizer.decode(p + r) for p, r in zip(prompts, responses, strict=True)]
    scored: dict[str, list[float]] = {}

    def score(bf16: bool) -> float:
        assert scorer is not None
        scorer.bf16 = bf16
        began = time.perf_counter()
        scored["bf16" if bf16 else "fp32"] = scorer.scores(scored_texts)
        return time.perf_counter() - began

    def generate(bf16: bool) -> tuple[float, int]:
        generator = Generator.from_model(model, tokenizer, seed=0, bf16=bf16)
        began = time.perf_counter()
        groups = generator.generate(texts, n=GROUP, max_new_tokens=args.new_tokens, temperature=1.0)
        return time.perf_counter() - began, sum(len(c.token_ids) for g in groups for c in g)

    ceiling = measure_ceiling()
    print(format_ceiling(ceiling, args.threads))
    print(f"{model_dir}: {params / 1e6:.1f}M parameters, {args.threads} threads")
    times: dict[str, list[float]] = {}
    tokens: dict[str, list[int]] = {}
    train_tokens = sum(len(r) for r in responses) + sum(len(p) for p in prompt_ids)
    for _ in range(args.reps):
        for label, bf16 in (("fp32", False), ("bf16", True)):
            if "train" in parts:
                times.setdefault(f"train {label}", []).append(train_pass(bf16))
                print(f"train {label} {times[f'train {label}'][-1]:.2f} s", flush=True)
            if "score" in parts:
                times.setdefault(f"score {label}", []).append(score(bf16))
                print(f"score {label} {times[f'score {label}'][-1]:.2f} s", flush=True)
            if "generate" in parts:
                seconds, count = generate(bf16)
                print(f"generate {label} {seconds:.2f} s, {count} tokens", flush=True)
                times.setdefault(f"generate {label}", []).append(seconds)
                tokens.setdefault(label, []).append(count)
    for name, values in times.items():
        print(f"{name:14s} median {statistics.median(values):7.2f} s  all " + " ".join(f"{v:.2f}" for v in values))
    for label in ("fp32", "bf16"):
        if "generate" in parts:
            print(f"generate {label}: {sum(tokens[label]) / sum(times[f'generate {label}']):.0f} tok/s")
        if "train" in parts:
            train_s = statistics.median(times[f"train {label}"])
            dtype = "float32" if label == "fp32" else "bfloat16"
            print(ceiling_line(ceiling, f"GRPO training pass {label}", params, train_tokens, train_s, dtype))
    for part in parts:
        ratio = statistics.median(times[f"{part} bf16"]) / statistics.median(times[f"{part} fp32"])
        print(f"ratio {part} bf16 / fp32 = {ratio:.2f}")
    if "score" not in parts:
        return
    fp32, bf16 = scored["fp32"], scored["bf16"]

    def best_answers(values: list[float]) -> list[int]:
        return [max(range(start, start + GROUP), key=values.__getitem__) for start in range(0, len(values), GROUP)]

    same_best = sum(a == b for a, b in zip(best_answers(fp32), best_answers(bf16), strict=True))
    print(f"score bf16 vs fp32: max |difference| {max(abs(a - b) for a, b in zip(fp32, bf16, strict=True)):.4f} "
          f"(fp32 scores span {min(fp32):.3f} to {max(fp32):.3f}); the same best answer in "
          f"{same_best} of {len(fp32) // GROUP} groups")


if __name__ == "__main__":
    main()
