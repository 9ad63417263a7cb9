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
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from omegaconf import OmegaConf

from cascade_cli.checkpoint import MetricsLog, fingerprint_path, write_manifest
from cascade_cli.config.sft import SFTConfig
from cascade_cli.console import console, print_warning, status
from cascade_cli.engines.local import checkpoint, compiled, heldout_eval, model_io, optim
from cascade_cli.engines.local.sft_data import BatchStream, Cursor, collate, load_examples
from cascade_cli.errors import CascadeUsageError
from cascade_cli.progress import Progress
from cascade_cli.records import resolve_rows_path


def _config_dict(config: SFTConfig) -> dict[str, Any]:
    return OmegaConf.to_container(OmegaConf.structured(config), resolve=True)  # type: ignore[return-value]


def _check_config(config: SFTConfig) -> None:
    """What a run needs beyond the config's own checks (config/sft.py): where to start and where to write."""
    if not config.init:
        raise CascadeUsageError("init: missing (give --init MODEL: tiny, a checkpoint directory or a hub id)")
    if not config.out:
        raise CascadeUsageError("out: missing (give --out DIR)")


def step_loss(
    model, batch: dict[str, Any], normalizer: int, device: str, bf16: bool, decoder: Any = None
) -> torch.Tensor:
    """Sum of next-token losses over this micro-batch's assistant tokens / assistant tokens in the step.
    Only assistant positions go through the LM head (cheap with large vocabularies). `decoder`: the module
    the decoder runs through (compiled.training_decoder), default the model's own."""
    input_ids = batch["input_ids"].to(device)
    labels = batch["labels"].to(device)
    position_ids = batch["position_ids"].to(device) if batch["position_ids"] is not None else None
    with model_io.autocast(device, bf16):
        decoder = model.get_decoder() if decoder is None else decoder
        hidden = decoder(input_ids=input_ids, position_ids=position_ids, use_cache=False)
        hidden = hidden.last_hidden_state[:, :-1]
        targets = labels[:, 1:]
        keep = targets != -100
        logits = model.get_output_embeddings()(hidden[keep])
    return F.cross_entropy(logits.float(), targets[keep], reduction="sum") / normalizer


def _evaluate(model, tokenizer, prompts, config: SFTConfig, label: str) -> dict[str, Any]:
    with status(f"held-out math accuracy ({label}, {len(prompts)} prompts, greedy)"), compiled.eager_generation():
        return heldout_eval.math_accuracy(
            model, tokenizer, prompts, config.eval_max_new_tokens, config.eval_batch_size
        )


def run_sft(config: SFTConfig) -> dict[str, Any]:
    """Train, write the HF checkpoint + `cascade_stage.json` into `config.out`, return the metrics."""
    started = time.time()
    _check_config(config)
    out = Path(config.out)  # type: ignore[arg-type]
    data_file = resolve_rows_path(config.data)
    config_dict = _config_dict(config)
    data_print = checkpoint.input_fingerprints(config.init, data=data_file)
    if not config.dry_run:
        try:
            begin = checkpoint.start(
                out, config_dict, kind="sft", restart=config.restart, resume=config.resume, fingerprints=data_print
            )
        except checkpoint.StageComplete as done:
            console.print(done.message, soft_wrap=True)
            return done.metrics
    threads = model_io.configure_threads(config.threads or None)
    device = model_io.pick_device()
    torch.manual_seed(config.seed)

    tokenizer = model_io.load_tokenizer(config.init)  # type: ignore[arg-type]
    examples = load_examples(data_file, tokenizer, config.max_seq_len)
    if examples.truncated or examples.dropped:
        print_warning(
            f"{data_file}: {examples.truncated} examples truncated to max_seq_len={config.max_seq_len}"
            f", {examples.dropped} dropped (no assistant token left)"
        )
    eval_prompts = (
        heldout_eval.load_math_prompts(config.eval_prompts, config.eval_limit, tokenizer)
        if config.eval_prompts
        else None
    )
    stream = BatchStream(
        examples, config.batch_size, config.seed, config.packing, config.max_seq_len, config.shuffle
    )
    micro_per_epoch = len(stream.plan(0))
    total_steps = config.max_steps or max(1, math.ceil(config.epochs * micro_per_epoch / config.grad_accum))
    warmup_steps = int(config.warmup_ratio * total_steps)
    fingerprints = dict(data_print)
    if config.eval_prompts:
        fingerprints["eval_prompts"] = fingerprint_path(heldout_eval.resolve_prompt_file(config.eval_prompts))
    if config.dry_run:
        console.print(
            f"sft dry run: {len(examples)} examples, {micro_per_epoch} micro-batches per epoch, "
            f"{total_steps} optimizer steps, {threads} threads on {device}"
        )
        return {"examples": len(examples), "total_steps": total_steps}

    model = model_io.load_model(config.init, dtype="float32", device=device)  # type: ignore[arg-type]
    model.config.use_cache = False
    model = model_io.prepare_for_training(model, config, tokens=config.batch_size * config.max_seq_len)
    decoder = compiled.training_decoder(model, config.compile, device)
    optimizer = optim.adamw(model, config.lr, (config.beta1, config.beta2), config.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, optim.warmup_cosine(total_steps, warmup_steps, config.lr, config.min_lr)
    )

    step = begin.step
    metrics: dict[str, Any] = begin.extra.get("metrics", {})
    if eval_prompts is not None and "eval/init_accuracy" not in metrics:
        init_eval = _evaluate(model, tokenizer, eval_prompts, config, "init model")
        metrics["eval/init_accuracy"] = init_eval["accuracy"]
        metrics["eval/n"] = init_eval["n"]
    if begin.resumed:
        checkpoint.load_state(begin, model, optimizer, scheduler)
        stream.cursor = Cursor(**begin.extra["cursor"])

    def record(status: str, **timings: float) -> None:
        write_manifest(
            out,
            stage=config.name or "sft",
            kind="sft",
            config=config_dict,
            init=config.init,
            data_fingerprints=fingerprints,
            metrics=metrics,
            status=status,
            timings=timings,
        )

    record("running")
    log = MetricsLog(out, tensorboard=config.tensorboard, truncate_after_step=step if begin.resumed else None)

    def save_state() -> None:
        checkpoint.save_state(
            out,
            step=step,
            config=config_dict,
            model=model,
            optimizer=optimizer,
            scheduler=scheduler,
            extra={"cursor": asdict(stream.cursor), "total_steps": total_steps, "metrics": metrics},
            fingerprints=data_print,
        )

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
                save_state()
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
    save_state()
    if step < total_steps:
        record("stopped", train_s=train_seconds)
        console.print(f"stopped after step {step}/{total_steps}; rerun the same command to resume")
        return metrics

    checkpoint.save_final(out, model, tokenizer)
    eval_seconds = 0.0
    if eval_prompts is not None:
        eval_started = time.time()
        result = _evaluate(model, tokenizer, eval_prompts, config, "trained model")
        eval_seconds = time.time() - eval_started
        metrics["eval/accuracy"] = result["accuracy"]
        metrics["eval/n"] = result["n"]
        console.print(
            f"held-out math accuracy (greedy, n={result['n']}): init {metrics.get('eval/init_accuracy', 0):.3f}"
            f" -> trained {result['accuracy']:.3f}"
        )
    record("completed", train_s=train_seconds, eval_s=eval_seconds, total_s=time.time() - started)
    console.print(
        f"sft done: {step} steps, final loss {metrics['train/loss']:.4f}, "
        f"{metrics['train/tokens_per_s']:,.0f} tok/s -> {out}"
    )
    return metrics
