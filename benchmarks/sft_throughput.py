"""SFT throughput: `cascade sft` vs transformers' `Trainer`, same tiny model, same data, same process.

Both train one epoch over the same canonical rows with assistant-only labels, the same batch size, learning
rate schedule, AdamW betas, precision and torch thread count. Tokens/s counts real (non-padding) tokens per
second of the training loop; the end-to-end column also counts loading, tokenizing and saving.

    PYTHONPATH=src python benchmarks/sft_throughput.py [--rows 600] [--batch-size 16] [--bf16]

Needs `accelerate` (transformers' Trainer requires it).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch loads; `cascade` sets the same

import argparse
import json
import random
import tempfile
import time
from pathlib import Path


def make_rows(count: int, seed: int) -> list[dict]:
    """Math rows (short, thinking and not) mixed with chat rows whose answers run from a line to a
    paragraph: the length spread of real SFT data, where padding policy matters."""
    rng = random.Random(seed)
    words = [
        "the",
        "model",
        "reads",
        "a",
        "prompt",
        "and",
        "writes",
        "an",
        "answer",
        "with",
        "care",
        "so",
        "that",
        "each",
        "step",
        "is",
        "clear",
    ]
    rows = []
    for index in range(count):
        if index % 2 == 0:
            a, b = rng.randint(0, 50), rng.randint(0, 50)
            mode = rng.choice(["think", "no_think"])
            answer = f"\\boxed{{{a + b}}}"
            content = f"<think>\n{a}+{b} = {a + b}\n</think>\n\n{answer}" if mode == "think" else answer
            user = f"What is {a}+{b}?"
        else:
            mode = "no_think"
            user = "Explain: " + " ".join(rng.choices(words, k=rng.randint(3, 12)))
            content = " ".join(rng.choices(words, k=rng.randint(8, 60))) + "."
        messages = [{"role": "user", "content": user}, {"role": "assistant", "content": content}]
        rows.append(
            {"id": f"b{index}", "domain": "sft", "mode": mode, "messages": messages, "source": "bench"}
        )
    return rows


def run_cascade(model_dir: Path, data: Path, out: Path, args, packing: bool) -> dict:
    from typer.testing import CliRunner

    from cascade_cli.checkpoint import read_manifest
    from cascade_cli.cli import app

    overrides = [
        f"batch_size={args.batch_size}",
        f"lr={args.lr}",
        "warmup_ratio=0.05",
        f"bf16={args.bf16}",
        f"max_seq_len={args.max_seq_len}",
        f"packing={packing}",
        "epochs=1",
        f"threads={args.threads}",
    ]
    started = time.perf_counter()
    result = CliRunner().invoke(
        app, ["sft", "--init", str(model_dir), "--data", str(data), "--out", str(out), *overrides]
    )
    wall = time.perf_counter() - started
    if result.exit_code != 0:
        raise SystemExit(f"cascade sft failed: {result.output[-2000:]}")
    manifest = read_manifest(out)
    metrics = manifest["metrics"]
    logged = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return {
        "tokens": sum(row["tokens"] for row in logged),
        "train_s": manifest["timings"]["train_s"],
        "wall_s": wall,
        "mean_loss": sum(row["loss"] for row in logged) / len(logged),
        "steps": metrics["train/steps"],
    }


def run_trainer(model_dir: Path, data: Path, out: Path, args) -> dict:
    import torch
    from transformers import (
        AutoModelForCausalLM,
        AutoTokenizer,
        DataCollatorForSeq2Seq,
        Trainer,
        TrainingArguments,
    )

    from cascade_cli.chat import render_segments
    from cascade_cli.jsonl import read_jsonl

    started = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "right"
    features = []
    for row in read_jsonl(data):
        ids, labels = [], []
        for text, trainable in render_segments(row["messages"], mode=row["mode"]):
            piece = tokenizer(text, add_special_tokens=False)["input_ids"]
            ids.extend(piece)
            labels.extend(piece if trainable else [-100] * len(piece))
        features.append(
            {
                "input_ids": ids[: args.max_seq_len],
                "labels": labels[: args.max_seq_len],
                "attention_mask": [1] * min(len(ids), args.max_seq_len),
            }
        )
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    training_args = TrainingArguments(
        output_dir=str(out),
        per_device_train_batch_size=args.batch_size,
        num_train_epochs=1,
        learning_rate=args.lr,
        lr_scheduler_type="cosine",
        warmup_steps=0.05,
        adam_beta1=0.9,
        adam_beta2=0.95,
        weight_decay=1e-4,
        max_grad_norm=1.0,
        bf16=args.bf16,
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_steps=10**9,
        dataloader_num_workers=0,
        seed=0,
        disable_tqdm=True,
    )
    collator = DataCollatorForSeq2Seq(tokenizer, padding="longest", label_pad_token_id=-100)
    trainer = Trainer(model=model, args=training_args, train_dataset=features, data_collator=collator)
    torch.set_num_threads(args.threads)  # Trainer/accelerate may reset it; keep both sides equal
    train_started = time.perf_counter()
    output = trainer.train()
    train_s = time.perf_counter() - train_started
    trainer.save_model(str(out))
    tokenizer.save_pretrained(str(out))
    wall = time.perf_counter() - started
    tokens = sum(len(f["input_ids"]) for f in features)
    return {
        "tokens": tokens,
        "train_s": train_s,
        "wall_s": wall,
        "mean_loss": output.training_loss,
        "steps": output.global_step,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=240)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--max-seq-len", type=int, default=512)
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast on both sides")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: idle cores)")
    args = parser.parse_args()

    import torch

    from cascade_cli import tiny
    from cascade_cli.engines.local.model_io import configure_threads, quiet_transformers
    from cascade_cli.jsonl import write_jsonl

    args.threads = configure_threads(args.threads or None)
    quiet_transformers()
    work = Path(tempfile.mkdtemp(prefix="sft-bench-"))
    model_dir = tiny.build_tiny("tiny", work / "tiny")
    data = work / "data.jsonl"
    write_jsonl(data, make_rows(args.rows, seed=0))
    print(
        f"tiny model, {args.rows} rows, batch {args.batch_size}, {'bf16' if args.bf16 else 'fp32'}, "
        f"{torch.get_num_threads()} threads"
    )

    results = {
        "transformers Trainer": run_trainer(model_dir, data, work / "trainer", args),
        "cascade sft": run_cascade(model_dir, data, work / "cascade", args, packing=False),
        "cascade sft packing=true": run_cascade(model_dir, data, work / "cascade-packed", args, packing=True),
    }
    print(
        f"{'':26s} {'steps':>6s} {'tokens':>8s} {'train tok/s':>12s} {'end-to-end s':>13s} {'mean loss':>9s}"
    )
    for name, r in results.items():
        print(
            f"{name:26s} {r['steps']:6d} {r['tokens']:8d} {r['tokens'] / r['train_s']:12,.0f} "
            f"{r['wall_s']:13.1f} {r['mean_loss']:9.3f}"
        )
    base = results["transformers Trainer"]
    base_tps = base["tokens"] / base["train_s"]
    for name in ("cascade sft", "cascade sft packing=true"):
        r = results[name]
        print(
            f"ratio {name} / Trainer: train tokens/s x{r['tokens'] / r['train_s'] / base_tps:.2f}, "
            f"end-to-end x{base['wall_s'] / r['wall_s']:.2f}"
        )


if __name__ == "__main__":
    main()
