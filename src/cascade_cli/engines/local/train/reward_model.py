"""Bradley-Terry reward model on the local engine: `cascade rlhf rm` (Nemotron-Cascade §2.1).

The model is the init checkpoint's transformer with a linear head of ONE output named `score`
(`AutoModelForSequenceClassification`, `num_labels=1`); its reward is the head's value at the last
non-pad token. That is exactly OpenRLHF's reward-model layout (`base_model_prefix` + `score`), so the
saved directory works as `AutoModelForSequenceClassification.from_pretrained(DIR)` and as OpenRLHF's
`--reward.model_name_or_path DIR`.

Training, top to bottom: read and check the pairs (bad rows fail before training, or are dropped with
`skip_bad_rows`), render each side as the conversation with the answer only (the text after `</think>`, as
RLHF scores it), then per step: loss = -log sigmoid(r_chosen - r_rejected) over the batch, one AdamW step
(cosine schedule with warmup). One epoch by default (the paper found more epochs worse). Held-out pairwise
accuracy and mean margin are measured before and after.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from cascade_cli.chat import prompt_messages
from cascade_cli.config.rm import RewardModelConfig
from cascade_cli.console import print_warning
from cascade_cli.engines.local.ops import optim
from cascade_cli.engines.local.train.heldout import heldout_file
from cascade_cli.engines.local.train.stage import Stage
from cascade_cli.errors import CascadeUsageError
from cascade_cli.models.bf16 import autocast
from cascade_cli.models.loader import SCORE_HEAD
from cascade_cli.progress import Progress
from cascade_cli.records import HELDOUT_FILE, load_rows, resolve_rows_path
from cascade_cli.verifiers.reward_model import encode, rewards_of, rm_text, score_texts

# ---------------------------------------------------------------------------------------------------------
# Pairs
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pair:
    prompt: list[dict[str, Any]]
    chosen: str
    rejected: str
    mode: str
    row: int  # 1-based row number in its file


class BadPair(ValueError):
    pass


def _side(value: Any, name: str) -> tuple[str, list[dict[str, Any]] | None]:
    """A side as (response text, the conversation before it when the side is a message list)."""
    if isinstance(value, dict) and "content" in value:
        value = [value]
    if isinstance(value, list):
        if not value or not all(isinstance(m, dict) for m in value):
            raise BadPair(f"{name}: expected text or a list of messages, found {value!r:.60}")
        last = value[-1]
        if last.get("role", "assistant") != "assistant":
            raise BadPair(f"{name}: expected the last message to be the assistant's, found {last.get('role')!r}")
        content = last.get("content")
        if not isinstance(content, str):
            raise BadPair(f"{name}: expected the assistant content to be text, found {type(content).__name__}")
        return content, [dict(m) for m in value[:-1]]
    if isinstance(value, str):
        return value, None
    raise BadPair(f"{name}: expected text or a list of messages, found {type(value).__name__}")


def parse_pair(row: Any, number: int) -> Pair:
    """One canonical pref row -> Pair; raises BadPair (missing field, empty side, identical sides)."""
    if not isinstance(row, dict):
        raise BadPair(f"expected a JSON object, found {type(row).__name__}")
    for name in ("chosen", "rejected"):
        if row.get(name) is None:
            raise BadPair(f"missing field {name!r} (a pref row needs prompt, chosen and rejected)")
    chosen, chosen_context = _side(row["chosen"], "chosen")
    rejected, rejected_context = _side(row["rejected"], "rejected")
    prompt = row.get("prompt")
    if prompt is None:
        prompt = chosen_context or rejected_context
    if prompt is None or prompt == "" or prompt == []:
        raise BadPair("missing field 'prompt' (a string, a message list, or message-list sides that carry it)")
    try:
        messages = prompt_messages(prompt)
    except (TypeError, AttributeError):
        raise BadPair(f"prompt: expected text or a list of messages, found {type(prompt).__name__}") from None
    if not chosen.strip():
        raise BadPair("chosen is empty (expected a non-empty response)")
    if not rejected.strip():
        raise BadPair("rejected is empty (expected a non-empty response)")
    if chosen.strip() == rejected.strip():
        raise BadPair("chosen and rejected are identical (expected two different responses)")
    mode = row.get("mode") or "no_think"
    if mode not in ("think", "no_think"):
        raise BadPair(f"mode: expected think or no_think, found {mode!r}")
    return Pair(messages, chosen, rejected, mode, number)


def load_pairs(path: str | Path, skip_bad_rows: bool = False) -> tuple[list[Pair], int]:
    """The file's pairs and how many bad rows were dropped. Without `skip_bad_rows` any bad row is a
    usage error naming the file and row (all bad rows are counted; the first few are named)."""
    where = resolve_rows_path(path)
    rows = load_rows(where)
    pairs, bad = [], []
    for number, row in enumerate(rows, start=1):
        try:
            pairs.append(parse_pair(row, number))
        except BadPair as error:
            bad.append(f"{where}: row {number}: {error}")
    if bad and not skip_bad_rows:
        more = f" (and {len(bad) - 3} more bad rows; --skip-bad-rows drops them)" if len(bad) > 3 else ""
        shown = "; ".join(bad[:3])
        raise CascadeUsageError(f"{shown}{more}" if more else f"{shown} (--skip-bad-rows drops bad rows)")
    if bad:
        print_warning(f"{where}: dropped {len(bad)} bad rows; first: {bad[0]}")
    if not pairs:
        raise CascadeUsageError(f"{where}: no usable preference pairs")
    return pairs, len(bad)


# ---------------------------------------------------------------------------------------------------------
# Loss and held-out metrics (the model, its scores and the text it reads: verifiers/reward_model.py)
# ---------------------------------------------------------------------------------------------------------


def bradley_terry_loss(chosen: torch.Tensor, rejected: torch.Tensor) -> torch.Tensor:
    return -F.logsigmoid(chosen - rejected).mean()


def pairwise_metrics(model, tokenizer, pairs: list[Pair], config: RewardModelConfig) -> dict[str, float]:
    """Held-out pairwise accuracy (chosen scored above rejected) and mean margin."""
    texts = [rm_text(p.prompt, side, p.mode, config.strip_thinking) for p in pairs for side in (p.chosen, p.rejected)]
    scores = score_texts(model, tokenizer, texts, config.max_seq_len, batch_size=2 * config.micro_batch)
    margins = [scores[2 * i] - scores[2 * i + 1] for i in range(len(pairs))]
    return {
        "accuracy": sum(m > 0 for m in margins) / len(margins),
        "margin": sum(margins) / len(margins),
        "reward_chosen": sum(scores[0::2]) / len(pairs),
        "reward_rejected": sum(scores[1::2]) / len(pairs),
        "n": len(pairs),
    }


# ---------------------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------------------


def split_pairs(config: RewardModelConfig) -> tuple[list[Pair], list[Pair], int, dict[str, str | None]]:
    """(train pairs, held-out pairs, bad rows dropped, the inputs to fingerprint by name: the paths as the config
    names them, so a folder's covers its heldout.jsonl). Held out: `eval_data` (the rule of heldout.py), else
    the data folder's heldout.jsonl, else a seeded `heldout_fraction` of the data."""
    data_file = resolve_rows_path(config.data)
    train, dropped = load_pairs(data_file, config.skip_bad_rows)
    eval_file = None
    if config.eval_data is not None:
        eval_file = heldout_file(config.eval_data, "eval_data", data_file)
    elif Path(config.data).is_dir() and (Path(config.data) / HELDOUT_FILE).is_file():
        eval_file = Path(config.data) / HELDOUT_FILE
    files = {"data": config.data, "eval_data": config.eval_data}
    if eval_file is not None:
        heldout, more = load_pairs(eval_file, config.skip_bad_rows)
        return train, heldout, dropped + more, files
    count = int(round(len(train) * config.heldout_fraction))
    if count == 0:
        return train, [], dropped, files
    order = list(range(len(train)))
    random.Random(config.seed).shuffle(order)
    held = set(order[:count])
    train, heldout = [p for i, p in enumerate(train) if i not in held], [p for i, p in enumerate(train) if i in held]
    return train, heldout, dropped, files


def _next_batch(encoded: list, order: list[int], rng: random.Random, size: int) -> list:
    """`size` pairs, drawn without replacement from a reshuffled order each time it runs out."""
    batch = []
    while len(batch) < min(size, len(encoded)):
        if not order:
            order.extend(range(len(encoded)))
            rng.shuffle(order)
        batch.append(encoded[order.pop()])
    return batch


def train_reward_model(
    stage: Stage,
    train: list[Pair],
    heldout: list[Pair],
    on_step: Callable[[int, int, dict[str, float]], None] | None = None,
) -> tuple[Any, Any, dict[str, Any]]:
    """Train from `stage.begin` (a fresh start for a `Stage(config, init)` with no OUT) and return (model, tokenizer, summary metrics).
    With `config.out` set, trainer_state/ is saved every `save_every` steps and at the end."""
    config, begin = stage.config, stage.begin
    device = stage.setup()
    tokenizer = stage.load_tokenizer()
    model = stage.load_model(head="score", pad_id=tokenizer.pad_token_id)
    tokens = 2 * config.micro_batch * config.max_seq_len
    model = stage.prepare_for_training(model, tokens, keep=(SCORE_HEAD,))  # the score head trains fully
    pad = tokenizer.pad_token_id
    encoded = [
        (
            encode(tokenizer, [rm_text(p.prompt, p.chosen, p.mode, config.strip_thinking)], config.max_seq_len)[0],
            encode(tokenizer, [rm_text(p.prompt, p.rejected, p.mode, config.strip_thinking)], config.max_seq_len)[0],
        )
        for p in train
    ]
    steps_per_epoch = max(1, math.ceil(len(encoded) / config.batch_size))
    total = config.max_steps or max(1, math.ceil(steps_per_epoch * config.epochs))
    warmup = int(config.warmup_ratio * total)
    optimizer = optim.adamw(model, config.lr, (config.beta1, config.beta2), config.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, optim.warmup_cosine(total, warmup, config.lr, config.min_lr)
    )
    saved = begin.extra
    before = saved.get("before") or (pairwise_metrics(model, tokenizer, heldout, config) if heldout else None)
    rng = random.Random(config.seed)
    order: list[int] = list(saved.get("order", []))
    step, tokens, last = begin.step, int(saved.get("tokens", 0)), dict(saved.get("last", {}))
    if begin.resumed:
        stage.load_state(model, optimizer, scheduler)
        version, internal, gauss = saved["rng"]
        rng.setstate((version, tuple(internal), gauss))
    log = stage.metrics_log()

    def state_extra() -> dict[str, Any]:
        return {"order": order, "rng": rng.getstate(), "tokens": tokens, "last": last, "before": before}

    model.train()
    started = time.perf_counter()
    stop_at = min(total, config.stop_after) if config.stop_after else total
    while step < stop_at:
        batch = _next_batch(encoded, order, rng, config.batch_size)
        lr = scheduler.get_last_lr()[0]
        optimizer.zero_grad(set_to_none=True)
        loss_sum = correct = margin_sum = 0.0
        for start in range(0, len(batch), config.micro_batch):
            micro = batch[start : start + config.micro_batch]
            seqs = [c for c, _ in micro] + [r for _, r in micro]  # one forward for both sides
            with autocast(device, config.bf16):
                rewards = rewards_of(model, seqs, pad)
            chosen, rejected = rewards[: len(micro)], rewards[len(micro) :]
            loss = bradley_terry_loss(chosen, rejected) * len(micro) / len(batch)
            loss.backward()
            loss_sum += float(loss.detach())
            diff = (chosen - rejected).detach()
            correct += float((diff > 0).sum())
            margin_sum += float(diff.sum())
            tokens += sum(len(s) for s in seqs)
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
        optimizer.step()
        scheduler.step()
        step += 1
        elapsed = time.perf_counter() - started
        last = {
            "loss": loss_sum,
            "accuracy": correct / len(batch),
            "margin": margin_sum / len(batch),
            "grad_norm": float(grad_norm),
            "lr": lr,
            "tokens_per_s": tokens / max(elapsed, 1e-9),
        }
        if step % config.log_every == 0 or step == stop_at:
            log.log(step, last)
        if on_step is not None:
            on_step(step, total, last)
        if config.save_every and step % config.save_every == 0 and step < stop_at:
            stage.save_state(step, model, optimizer, scheduler, state_extra())
    log.close()
    stage.save_last_state(step, total, model, optimizer, scheduler, state_extra())
    train_s = time.perf_counter() - started
    summary: dict[str, Any] = {
        "steps": step,
        "total_steps": total,
        "train_pairs": len(encoded),
        "heldout_pairs": len(heldout),
        "final_loss": last.get("loss"),
        "train_tokens": tokens,
        "tokens_per_s": tokens / max(train_s, 1e-9),
        "train_s": train_s,
    }
    if heldout and step == total:
        after = pairwise_metrics(model, tokenizer, heldout, config)
        assert before is not None
        summary.update(
            heldout_accuracy_before=before["accuracy"],
            heldout_accuracy=after["accuracy"],
            heldout_margin_before=before["margin"],
            heldout_margin=after["margin"],
            heldout_reward_chosen=after["reward_chosen"],
            heldout_reward_rejected=after["reward_rejected"],
        )
    return model, tokenizer, summary


def run_reward_model(config: RewardModelConfig) -> dict[str, Any]:
    """`cascade rlhf rm`: train, save the HF checkpoint (+ `score` head) and the stage manifest, through the
    stage lifecycle (stage.py): resume a stopped or killed run, or report a completed one."""
    started = time.perf_counter()
    train, heldout, dropped, files = split_pairs(config)
    stage = Stage.open(config, **files)
    if stage.completed is not None:
        return stage.completed
    stage.record("running")
    with Progress(config.name or "reward model", done=stage.begin.step) as progress:

        def on_step(step: int, total: int, metrics: dict[str, float]) -> None:
            progress.update(
                done=step, total=total,
                note=f"loss {metrics['loss']:.3f} acc {metrics['accuracy']:.2f} margin {metrics['margin']:.2f}",
            )

        model, tokenizer, summary = train_reward_model(stage, train, heldout, on_step)
    summary["bad_rows_dropped"] = dropped
    summary["wall_s"] = time.perf_counter() - started
    timings = {"wall_s": summary["wall_s"], "train_s": summary["train_s"]}
    if summary["steps"] < summary["total_steps"]:
        return stage.stopped(summary["steps"], summary["total_steps"], summary, **timings)
    stage.save_final(model, tokenizer)
    return stage.complete(summary, **timings)
