"""Greedy exact-answer accuracy on held-out math prompts, with transformers `generate`.

A training stage reports it for its init model and its result, so a recipe shows what the stage bought.
Scoring goes through the one scoring path (`cascade_cli.verifiers.verify_batch`, the math verifier).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from cascade_cli.chat import IM_END, MODES, prompt_messages, render_messages
from cascade_cli.errors import CascadeUsageError
from cascade_cli.records import (
    DATA_FILE,
    HELDOUT_FILE,
    iter_rows,
    resolve_rows_path,
    rollout_record,
    row_prompt,
)
from cascade_cli.verifiers import verify_batch


def resolve_prompt_file(path: str | Path) -> Path:
    """A .jsonl/.json/.parquet file, or a prepare-data folder (heldout.jsonl, else data.jsonl)."""
    return resolve_rows_path(path, names=(HELDOUT_FILE, DATA_FILE))


def load_math_prompts(path: str | Path, limit: int | None = None, tokenizer: Any = None) -> list[dict[str, Any]]:
    """Rows {id, prompt (rendered text), mode, label} from canonical math rows (prompt or messages), rendered
    with the project's ChatML or `tokenizer`'s own non-ChatML template."""
    path = resolve_prompt_file(path)
    prompts = []
    for line, row in iter_rows(path):
        where = f"{path}: row {line}"
        label = row.get("label")
        if isinstance(label, str):
            try:
                label = json.loads(label)
            except json.JSONDecodeError:
                label = {"answer": label}
        if not isinstance(label, dict) or "answer" not in label:
            raise CascadeUsageError(f"{where}: expected label.answer for a math prompt; found {label!r}")
        mode = row.get("mode") or "think"
        if mode not in MODES:
            raise CascadeUsageError(f"{where}: mode must be one of {', '.join(MODES)}; found {mode!r}")
        if "prompt" not in row and not isinstance(row.get("messages"), list):
            raise CascadeUsageError(f"{where}: expected `prompt` or `messages`; found keys {sorted(row)}")
        messages = prompt_messages(row_prompt(row))
        try:
            text = render_messages(messages, mode=mode, add_generation_prompt=True, tokenizer=tokenizer)
        except ValueError as error:
            raise CascadeUsageError(f"{where}: {error}") from None
        prompts.append({"id": row.get("id", f"row{line}"), "prompt": text, "mode": mode, "label": label})
        if limit is not None and len(prompts) >= limit:
            break
    if not prompts:
        raise CascadeUsageError(f"{path}: no prompts")
    return prompts


def score_math(records: list[dict[str, Any]]) -> list[bool]:
    """passed per rollout record, through the one scoring path (the cached math verifier)."""
    return [score.passed for score in verify_batch(records, domain="math")]


@torch.no_grad()
def generate_greedy(
    model, tokenizer, prompts: list[str], max_new_tokens: int, batch_size: int
) -> list[tuple[str, str]]:
    """(response text, finish_reason) per prompt; left-padded batches, greedy decoding, stop at <|im_end|>."""
    stop_ids = [tokenizer.convert_tokens_to_ids(IM_END), tokenizer.eos_token_id]
    stop_ids = list(dict.fromkeys(i for i in stop_ids if i is not None and i != tokenizer.unk_token_id))
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    results = []
    try:
        for start in range(0, len(prompts), batch_size):
            chunk = prompts[start : start + batch_size]
            inputs = tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
            output = model.generate(
                **inputs,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                eos_token_id=stop_ids,
                pad_token_id=tokenizer.pad_token_id,
            )
            for row in output[:, inputs["input_ids"].shape[1] :].tolist():
                stopped = next((i for i, token in enumerate(row) if token in stop_ids), None)
                kept = row if stopped is None else row[:stopped]
                text = tokenizer.decode(kept, skip_special_tokens=False)
                results.append((text, "length" if stopped is None else "stop"))
    finally:
        tokenizer.padding_side = side
        model.train(was_training)
    return results


def math_accuracy(
    model, tokenizer, prompts: list[dict[str, Any]], max_new_tokens: int, batch_size: int
) -> dict[str, Any]:
    """{"accuracy", "n", "samples"}: greedy decoding of every prompt, scored against label.answer."""
    outputs = generate_greedy(model, tokenizer, [p["prompt"] for p in prompts], max_new_tokens, batch_size)
    records = [
        rollout_record(p, text, domain="math", mode=p["mode"], finish_reason=reason)
        for p, (text, reason) in zip(prompts, outputs, strict=True)
    ]
    passed = score_math(records)
    return {
        "accuracy": sum(passed) / len(passed),
        "n": len(passed),
        "samples": [
            {"prompt": r["prompt"], "response": r["response"], "passed": ok}
            for r, ok in list(zip(records, passed, strict=True))[:3]
        ],
    }
