"""SFT throughput: `cascade sft` vs transformers' `Trainer` and TRL's `SFTTrainer`, same model, same data.

Every side trains one epoch over the same canonical rows with assistant-only labels, the same batch size,
learning rate schedule, AdamW betas, precision and torch thread count; `packing=true` for cascade is
best-fit packing into `max_seq_len` rows, for TRL `packing=True` (its best-fit-decreasing strategy,
padding-free). Each side runs in its own child process, all started together so a busy shared machine slows
them alike. Tokens/s counts real (non-padding) tokens per second of the training loop; the end-to-end column
also counts loading, tokenizing and saving. Also prints the training passes' share of the CPU's matmul
ceiling (6 x params x tokens).

    PYTHONPATH=src python benchmarks/sft_throughput.py [--model smollm2-135m] [--rows 600] [--batch-size 16]
        [--bf16] [--sides trainer,trl-packed,cascade,cascade-packed,cascade-compiled]

`cascade-compiled` is `compile=true` (TorchInductor); its train tokens/s include the first step's compile,
the median step time does not (the tiny recipe's SFT shape, as quoted in the README: `--rows 800 --batch-size 4 --sides
cascade,cascade-compiled`).

Needs `accelerate` (transformers' Trainer requires it) and `trl`.
"""

from __future__ import annotations

import os

# Before torch loads. The sides run at once, so the machine is busy: the policy cascade picks then (cpu_load.py).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIDES = {
    "trainer": "transformers Trainer",
    "trl-packed": "TRL SFTTrainer packing=True",
    "cascade": "cascade sft",
    "cascade-packed": "cascade sft packing=true",
    "cascade-compiled": "cascade sft compile=true",
}


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


def run_cascade(model_dir: Path, data: Path, out: Path, args, packing: bool, compile_: bool) -> dict:
    from typer.testing import CliRunner

    from cascade_cli.cli import app
    from cascade_cli.manifest import read_manifest

    overrides = [
        f"batch_size={args.batch_size}",
        f"lr={args.lr}",
        "warmup_ratio=0.05",
        f"bf16={args.bf16}",
        f"max_seq_len={args.max_seq_len}",
        f"packing={packing}",
        "epochs=1",
        f"threads={args.threads}",
        f"compile={compile_}",
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
        "median_step_ms": 1000 * statistics.median(row["tokens"] / row["tokens_per_s"] for row in logged),
    }


def tokenized_rows(tokenizer, data: Path, max_seq_len: int) -> list[dict]:
    """input ids and assistant-token masks of every row, rendered as cascade renders them."""
    from cascade_cli.chat import render_segments
    from cascade_cli.jsonl import read_jsonl

    features = []
    for row in read_jsonl(data):
        ids, mask = [], []
        for text, trainable in render_segments(row["messages"], mode=row["mode"]):
            piece = tokenizer(text, add_special_tokens=False)["input_ids"]
            ids.extend(piece)
            mask.extend([int(trainable)] * len(piece))
        features.append({"input_ids": ids[:max_seq_len], "assistant_masks": mask[:max_seq_len]})
    return features


def run_trl(model_dir: Path, data: Path, out: Path, args) -> dict:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    started = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    features = tokenized_rows(tokenizer, data, args.max_seq_len)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    config = SFTConfig(
        output_dir=str(out), per_device_train_batch_size=args.batch_size, num_train_epochs=1,
        learning_rate=args.lr, lr_scheduler_type="cosine", warmup_steps=0.05, adam_beta1=0.9, adam_beta2=0.95,
        weight_decay=1e-4, max_grad_norm=1.0, bf16=args.bf16, use_cpu=True, report_to=[], save_strategy="no",
        logging_steps=10**9, dataloader_num_workers=0, seed=0, disable_tqdm=True, packing=True,
        max_length=args.max_seq_len,
    )  # fmt: skip
    trainer = SFTTrainer(
        model=model, args=config, train_dataset=Dataset.from_list(features), processing_class=tokenizer
    )
    torch.set_num_threads(args.threads)
    train_started = time.perf_counter()
    output = trainer.train()
    train_s = time.perf_counter() - train_started
    trainer.save_model(str(out))
    return {
        "tokens": sum(len(f["input_ids"]) for f in features),
        "train_s": train_s,
        "wall_s": time.perf_counter() - started,
        "mean_loss": output.training_loss,
        "steps": output.global_step,
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


def run_side(side: str, model_dir: Path, data: Path, out: Path, args) -> dict:
    if side == "trainer":
        return run_trainer(model_dir, data, out, args)
    if side == "trl-packed":
        return run_trl(model_dir, data, out, args)
    packing, compile_ = side == "cascade-packed", side == "cascade-compiled"
    return run_cascade(model_dir, data, out, args, packing=packing, compile_=compile_)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="a model spec or directory (default: tiny)")
    parser.add_argument("--sides", default=",".join(SIDES))
    parser.add_argument("--worker", choices=SIDES)
    parser.add_argument("--work")
    parser.add_argument("--rows", type=int, default=240)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--max-seq-len", type=int, default=512)
    parser.add_argument("--bf16", action="store_true", help="bf16 autocast on both sides")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: idle cores)")
    args = parser.parse_args()


    from cascade_cli.engines.local.ops.compute import configure_threads
    from cascade_cli.jsonl import write_jsonl
    from cascade_cli.models.loader import quiet_transformers
    from cascade_cli.models.resolve import resolve_model

    args.threads = configure_threads(args.threads or None)
    quiet_transformers()
    if args.worker:
        work = Path(args.work)
        result = run_side(args.worker, Path(args.model), work / "data.jsonl", work / args.worker, args)
        print("RESULT " + json.dumps(result))
        return
    work = Path(tempfile.mkdtemp(prefix="sft-bench-"))
    model_dir = resolve_model(args.model)
    data = work / "data.jsonl"
    write_jsonl(data, make_rows(args.rows, seed=0))
    print(
        f"{model_dir}: {args.rows} rows, batch {args.batch_size}, max_seq_len {args.max_seq_len}, "
        f"{'bf16' if args.bf16 else 'fp32'}, {args.threads} threads each; load average {os.getloadavg()[0]:.1f}"
    )
    sides = args.sides.split(",")
    procs = {}
    for side in sides:
        command = [
            sys.executable, __file__, "--worker", side, "--work", str(work), "--model", str(model_dir),
            "--batch-size", str(args.batch_size), "--lr", str(args.lr), "--max-seq-len", str(args.max_seq_len),
            "--threads", str(args.threads), *(["--bf16"] if args.bf16 else []),
        ]  # fmt: skip
        procs[side] = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    results = {}
    for side, proc in procs.items():
        stdout, stderr = proc.communicate()
        lines = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
        if proc.returncode != 0 or not lines:
            sys.exit(f"{side} failed:\n{stderr[-3000:]}")
        results[SIDES[side]] = json.loads(lines[-1][len("RESULT ") :])
    print(
        f"{'':30s} {'steps':>6s} {'tokens':>8s} {'train tok/s':>12s} {'end-to-end s':>13s} {'mean loss':>9s} "
        f"{'median step ms':>14s}"
    )
    for name, r in results.items():
        median = f"{r['median_step_ms']:14.1f}" if "median_step_ms" in r else f"{'-':>14s}"
        print(
            f"{name:30s} {r['steps']:6d} {r['tokens']:8d} {r['tokens'] / r['train_s']:12,.0f} "
            f"{r['wall_s']:13.1f} {r['mean_loss']:9.3f} {median}"
        )
    report_ratios(results, model_dir, args)


def report_ratios(results: dict[str, dict], model_dir: Path, args) -> None:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    sys.path.insert(0, str(Path(__file__).parent))
    from cpu_ceiling import ceiling_line, format_ceiling, measure_ceiling

    def tok_s(r: dict) -> float:
        return r["tokens"] / r["train_s"]

    for base_name in (SIDES["trainer"], SIDES["trl-packed"]):
        base = results.get(base_name)
        for name in (SIDES["cascade"], SIDES["cascade-packed"]):
            if base is None or name not in results:
                continue
            r = results[name]
            print(
                f"ratio {name} / {base_name}: train tokens/s x{tok_s(r) / tok_s(base):.2f}, "
                f"end-to-end x{base['wall_s'] / r['wall_s']:.2f}"
            )
    eager, fused = results.get(SIDES["cascade"]), results.get(SIDES["cascade-compiled"])
    if eager and fused:
        print(
            f"ratio {SIDES['cascade-compiled']} / {SIDES['cascade']}: median step x"
            f"{eager['median_step_ms'] / fused['median_step_ms']:.2f} faster, train tokens/s (with the compile) "
            f"x{tok_s(fused) / tok_s(eager):.2f}, end-to-end x{eager['wall_s'] / fused['wall_s']:.2f}"
        )
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(model_dir))
    params = sum(p.numel() for p in model.parameters())
    ceiling = measure_ceiling()
    print(format_ceiling(ceiling, args.threads))
    dtype = "bfloat16" if args.bf16 else "float32"
    for name, r in results.items():
        print(ceiling_line(ceiling, name, params, r["tokens"], r["train_s"], dtype))
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
