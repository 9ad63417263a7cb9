"""Supervised fine-tuning on the local engine (PyTorch in this process; CPU or one GPU).

Reads top to bottom: load -> tokenize -> (resume) -> loop over optimizer steps -> save -> evaluate.
The loss is token-level over assistant tokens only: the sum of token losses of every micro-batch in a step,
divided by the number of assistant tokens in that whole step, so packing and gradient accumulation do not
change what is optimised.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict
from typing import Any

import torch
import torch.nn.functional as F

from cascade_cli.config.sft import SFTConfig
from cascade_cli.console import console, print_warning, status
from cascade_cli.engines.local.ops import compiled, optim
from cascade_cli.engines.local.rollout.generation import Generator
from cascade_cli.engines.local.train import heldout
from cascade_cli.engines.local.train.rl_data import check_rows
from cascade_cli.engines.local.train.rl_rewards import VerifierReward
from cascade_cli.engines.local.train.sft_data import BatchStream, Cursor, collate, load_examples
from cascade_cli.engines.local.train.stage import Stage
from cascade_cli.models.bf16 import autocast
from cascade_cli.progress import Progress
from cascade_cli.records import load_rows, resolve_rows_path
from cascade_cli.verifiers.batch import load_verifier

EVAL_DOMAIN = "math"  # `eval_prompts` are math rows: greedy exact-answer accuracy


def step_loss(
    model, batch: dict[str, Any], normalizer: int, device: str, bf16: bool, decoder: Any = None
) -> torch.Tensor:
    """Sum of next-token losses over this micro-batch's assistant tokens / assistant tokens in the step.
    Only assistant positions go through the LM head (cheap with large vocabularies). `decoder`: the module
    the decoder runs through (compiled.training_decoder), default the model's own."""
    input_ids = batch["input_ids"].to(device)
    labels = batch["labels"].to(device)
    position_ids = batch["position_ids"].to(device) if batch["position_ids"] is not None else None
    with autocast(device, bf16):
        decoder = model.get_decoder() if decoder is None else decoder
        hidden = decoder(input_ids=input_ids, position_ids=position_ids, use_cache=False)
        hidden = hidden.last_hidden_state[:, :-1]
        targets = labels[:, 1:]
        keep = targets != -100
        logits = model.get_output_embeddings()(hidden[keep])
    return F.cross_entropy(logits.float(), targets[keep], reduction="sum") / normalizer


def load_eval_rows(config: SFTConfig, train_file: Any) -> list[dict[str, Any]] | None:
    """The first `eval_limit` held-out math rows, checked (heldout.py: which file a folder gives)."""
    if not config.eval_prompts:
        return None
    path = heldout.heldout_file(config.eval_prompts, "eval_prompts", train_file)
    rows = load_rows(path)[: config.eval_limit]
    check_rows(rows, load_verifier(EVAL_DOMAIN, {}), path)
    return rows


def evaluate(model: Any, tokenizer: Any, rows: list[dict[str, Any]], config: SFTConfig, label: str) -> dict[str, Any]:
    """Greedy held-out math accuracy of `model` (heldout.py's greedy path)."""
    with status(f"held-out math accuracy ({label}, {len(rows)} prompts, greedy)"), compiled.eager_generation():
        generator = Generator.from_model(model, tokenizer, max_batch_size=config.eval_batch_size)
        return heldout.evaluate(
            generator, tokenizer, rows, mode="row", domain=EVAL_DOMAIN, reward=VerifierReward(EVAL_DOMAIN),
            max_new_tokens=config.eval_max_new_tokens,
        )


def run_sft(config: SFTConfig) -> dict[str, Any]:
    """Train, write the HF checkpoint + `cascade_stage.json` into `config.out`, return the metrics."""
    started = time.time()
    data_file = resolve_rows_path(config.data)
    eval_file = heldout.heldout_file(config.eval_prompts, "eval_prompts", data_file) if config.eval_prompts else None
    stage = Stage.open(config, data=data_file, eval_prompts=eval_file)
    if stage.completed is not None:
        return stage.completed
    device = stage.setup(threads=config.threads or None)

    tokenizer = stage.load_tokenizer()
    examples = load_examples(data_file, tokenizer, config.max_seq_len)
    stage.rendered(examples.first_prompt)
    if examples.truncated or examples.dropped:
        print_warning(
            f"{data_file}: {examples.truncated} examples truncated to max_seq_len={config.max_seq_len}"
            f", {examples.dropped} dropped (no assistant token left)"
        )
    eval_rows = load_eval_rows(config, data_file)
    stream = BatchStream(
        examples, config.batch_size, config.seed, config.packing, config.max_seq_len, config.shuffle
    )
    micro_per_epoch = len(stream.plan(0))
    total_steps = config.max_steps or max(1, math.ceil(config.epochs * micro_per_epoch / config.grad_accum))
    warmup_steps = int(config.warmup_ratio * total_steps)

    model = stage.load_model(dtype="float32")
    model.config.use_cache = False
    model = stage.prepare_for_training(model, tokens=config.batch_size * config.max_seq_len)
    decoder = compiled.training_decoder(model, config.compile, device)
    optimizer = optim.adamw(model, config.lr, (config.beta1, config.beta2), config.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, optim.warmup_cosine(total_steps, warmup_steps, config.lr, config.min_lr)
    )

    step = stage.begin.step
    metrics: dict[str, Any] = stage.begin.extra.get("metrics", {})
    if eval_rows is not None and "eval/init_accuracy" not in metrics:
        init_eval = evaluate(model, tokenizer, eval_rows, config, "init model")
        metrics["eval/init_accuracy"] = init_eval["accuracy"]
        metrics["eval/n"] = init_eval["n"]
    if stage.begin.resumed:
        stage.load_state(model, optimizer, scheduler)
        stream.cursor = Cursor(**stage.begin.extra["cursor"])

    stage.record("running", metrics)
    log = stage.metrics_log()

    def state_extra() -> dict[str, Any]:
        return {"cursor": asdict(stream.cursor), "total_steps": total_steps, "metrics": metrics}

    model.train()
    train_started = time.time()
    tokens_seen = 0
    stop_at = min(total_steps, config.stop_after) if config.stop_after else total_steps
    with Progress(config.name or "sft", total_steps, done=step) as bar:
        while step < stop_at:
            tick = time.perf_counter()
            batches = [collate(b, examples, tokenizer.pad_token_id) for b in stream.take(config.grad_accum)]
            normalizer = sum(b["trainable"] for b in batches)
            loss_sum = 0.0
            for batch in batches:
                loss = step_loss(model, batch, normalizer, device, config.bf16, decoder)
                loss.backward()
                loss_sum += loss.item()
            grad_norm = (
                torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm).item()
                if config.max_grad_norm > 0
                else float("nan")
            )
            lr = scheduler.get_last_lr()[0]
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            seconds = time.perf_counter() - tick
            step_tokens = sum(b["tokens"] for b in batches)
            tokens_seen += step_tokens
            metrics["train/loss"] = loss_sum
            if step % config.log_every == 0 or step == stop_at:
                log.log(
                    step,
                    {
                        "loss": loss_sum,
                        "lr": lr,
                        "grad_norm": grad_norm,
                        "tokens": step_tokens,
                        "loss_tokens": normalizer,
                        "tokens_per_s": step_tokens / max(seconds, 1e-9),
                        "epoch": stream.epoch_progress(),
                    },
                )
            tokens_per_s = tokens_seen / max(time.time() - train_started, 1e-9)
            bar.advance(note=f"loss {loss_sum:.4f}, {tokens_per_s:,.0f} tok/s")
            if config.save_every and step % config.save_every == 0 and step < stop_at:
                stage.save_state(step, model, optimizer, scheduler, state_extra())
    log.close()
    train_seconds = time.time() - train_started
    metrics.update(
        {
            "train/steps": step,
            "train/total_steps": total_steps,
            "train/examples": len(examples),
            "train/tokens_per_s": tokens_seen / max(train_seconds, 1e-9),
        }
    )
    stage.save_last_state(step, total_steps, model, optimizer, scheduler, state_extra())
    if step < total_steps:
        return stage.stopped(step, total_steps, metrics, train_s=train_seconds)

    stage.save_final(model, tokenizer)
    eval_seconds = 0.0
    if eval_rows is not None:
        eval_started = time.time()
        result = evaluate(model, tokenizer, eval_rows, config, "trained model")
        eval_seconds = time.time() - eval_started
        metrics["eval/accuracy"] = result["accuracy"]
        metrics["eval/n"] = result["n"]
        console.print(
            f"held-out math accuracy (greedy, n={result['n']}): init {metrics.get('eval/init_accuracy', 0):.3f}"
            f" -> trained {result['accuracy']:.3f}"
        )
    console.print(
        f"sft done: {step} steps, final loss {metrics['train/loss']:.4f}, "
        f"{metrics['train/tokens_per_s']:,.0f} tok/s -> {stage.out}"
    )
    return stage.complete(metrics, train_s=train_seconds, eval_s=eval_seconds, total_s=time.time() - started)
