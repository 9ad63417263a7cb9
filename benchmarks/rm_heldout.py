"""The reward model's score of each policy's answers to held-out general prompts, with paired intervals.

What IF-RL with the reward-model bonus must not lose (issue 50): a policy that learns the instructions'
form (short answers that pass the constraints) and not better answers shows it here, as a lower mean
reward-model score than the start's on prompts that carry no constraint at all.

Each policy answers every prompt greedily (its own chat template as `cascade eval` renders it:
chat_template auto), the answers are scored by the reward model as RLHF scores them (the prompt in
cascade's ChatML, the answer after `</think>`), and each policy after the first is compared with the first
on the same prompts: the mean change with a 95% paired bootstrap interval, beside the median answer length.

    python benchmarks/rm_heldout.py --reward-model RUN/rm --prompts PREPARED/heldout.jsonl \
        --policy start=smollm2-135m --policy seed0=RUN/seed0/if_rl [--max-tokens 512] [--out FILE.json]

The prompts: smol-rlhf's 64 held-out HH first turns (no math or code, disjoint from every reward-model pair):
    cascade recipe run recipes/smol-rlhf.yaml run_dir=RUNS/hh-chat-prompts eval.after_each_stage=false --only data_pref
    cascade recipe run recipes/smol-rlhf.yaml run_dir=RUNS/hh-chat-prompts eval.after_each_stage=false --only data_chat
Answers are cached beside --out (one file per policy, reused only for the same policy, prompts and token
limit), so a rerun only scores.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from cascade_cli.chat import render_prompt
from cascade_cli.evaluation.intervals import bootstrap
from cascade_cli.models.loader import load_model, load_tokenizer
from cascade_cli.template_choice import choose_template
from cascade_cli.verifiers.reward_model import RewardModelScorer, rm_text


def read_prompts(path: Path, limit: int | None) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows[:limit] if limit else rows


def greedy_answers(spec: str, prompts: list[dict[str, Any]], max_tokens: int, batch_size: int) -> list[str]:
    """The policy's greedy answer to each prompt, rendered as `cascade eval` renders it (chat_template auto)."""
    import torch

    tokenizer = load_tokenizer(spec)
    use = choose_template(tokenizer, "auto", model_dir=spec)
    print(use.line(spec), flush=True)
    model = load_model(spec, device="cpu").eval()
    tokenizer.padding_side = "left"
    texts = [render_prompt(row["prompt"], "no_think", tokenizer) for row in prompts]
    answers: list[str] = []
    for start in range(0, len(texts), batch_size):
        batch = tokenizer(texts[start : start + batch_size], return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.inference_mode():
            output = model.generate(
                **batch, max_new_tokens=max_tokens, do_sample=False, pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )
        answers += tokenizer.batch_decode(output[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
        print(f"  {spec}: {len(answers)}/{len(texts)} answered", flush=True)
    return [answer.strip() for answer in answers]


def answers_header(spec: str, prompts: list[dict[str, Any]], max_tokens: int) -> dict[str, Any]:
    """What a cached answer file was generated from: the policy, the token limit and the prompts themselves
    (a digest), so answers to another prompt set (another seed's held-out split) are never reused."""
    digest = hashlib.sha256("\n".join(json.dumps(row["prompt"], sort_keys=True) for row in prompts).encode())
    return {"model": spec, "max_tokens": max_tokens, "prompts_sha256": digest.hexdigest()}


def cached_answers(cache: Path, spec: str, prompts: list[dict[str, Any]], max_tokens: int) -> list[str] | None:
    """The answers `cache` holds when it was generated from exactly these inputs, else None."""
    if not cache.is_file():
        return None
    lines = cache.read_text().splitlines()
    if not lines or json.loads(lines[0]) != answers_header(spec, prompts, max_tokens):
        return None
    return [json.loads(line)["answer"] for line in lines[1:]]


def write_answers(cache: Path, spec: str, prompts: list[dict[str, Any]], max_tokens: int, answers: list[str]) -> None:
    lines = [json.dumps(answers_header(spec, prompts, max_tokens))]
    lines += [json.dumps({"id": row.get("id"), "answer": a}) for row, a in zip(prompts, answers, strict=True)]
    cache.write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reward-model", required=True)
    parser.add_argument("--prompts", type=Path, required=True, help="a .jsonl of canonical prompt rows")
    parser.add_argument("--policy", action="append", required=True, metavar="NAME=MODEL",
                        help="the first one is the baseline every other is compared with")
    parser.add_argument("--limit", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--rm-max-len", type=int, default=1024)
    parser.add_argument("--out", type=Path, default=Path("runs/rm_heldout.json"))
    args = parser.parse_args()
    policies = [tuple(item.split("=", 1)) for item in args.policy]
    if any(len(p) != 2 for p in policies):
        sys.exit("--policy: expected NAME=MODEL")
    prompts = read_prompts(args.prompts, args.limit)
    args.out.parent.mkdir(parents=True, exist_ok=True)

    answers: dict[str, list[str]] = {}
    for name, spec in policies:
        cache = args.out.with_name(f"{args.out.stem}.{name}.answers.jsonl")
        cached = cached_answers(cache, spec, prompts, args.max_tokens)
        answers[name] = cached if cached is not None else greedy_answers(spec, prompts, args.max_tokens, args.batch_size)
        if cached is None:
            write_answers(cache, spec, prompts, args.max_tokens, answers[name])

    # fp32: the held-out scores of every variant compare with one another and with earlier runs
    scorer = RewardModelScorer(
        args.reward_model, batch_size=8, max_len=args.rm_max_len, device="cpu", precision="float32"
    )
    scores = {
        name: scorer.scores([rm_text(row["prompt"], answer, "no_think") for row, answer in zip(prompts, texts, strict=True)])
        for name, texts in answers.items()
    }
    baseline = policies[0][0]
    result: dict[str, Any] = {"reward_model": args.reward_model, "prompts": str(args.prompts), "n": len(prompts),
                              "max_tokens": args.max_tokens, "policies": {}}
    print(f"\nreward-model score on {len(prompts)} held-out prompts ({args.prompts}), RM {args.reward_model}")
    print(f"{'policy':<12} {'mean RM':>8} {'median words':>13}  change vs {baseline} [95% paired]")
    for name, spec in policies:
        mean = statistics.fmean(scores[name])
        words = statistics.median(len(a.split()) for a in answers[name])
        entry: dict[str, Any] = {"model": spec, "mean": mean, "median_words": words}
        change = ""
        if name != baseline:
            delta, low, high = bootstrap(scores[name], scores[baseline], scale=1)
            entry["change"] = {"mean": delta, "low": low, "high": high}
            change = f"{delta:+.3f} [{low:+.3f}, {high:+.3f}]"
        result["policies"][name] = entry
        print(f"{name:<12} {mean:>8.3f} {words:>13.0f}  {change}")
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"written: {args.out}")


if __name__ == "__main__":
    main()
