"""Drop rows whose answers switch language or script away from their prompt's (the paper's filter)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from cascade_cli.data.prompt_filters import prompt_text
from cascade_cli.verifiers.code_switch import detect_code_switch


def answer_texts(row: dict[str, Any]) -> list[str]:
    """The texts a row teaches: assistant turns, a pair's chosen side, or a plain response."""
    texts = [
        str(message.get("content", ""))
        for message in row.get("messages") or []
        if isinstance(message, dict) and message.get("role") == "assistant"
    ]
    chosen = row.get("chosen")
    if isinstance(chosen, str):
        texts.append(chosen)
    elif isinstance(chosen, list):
        texts += [str(m.get("content", "")) for m in chosen if isinstance(m, dict) and m.get("role") == "assistant"]
    if isinstance(row.get("response"), str):
        texts.append(row["response"])
    return texts


def drop_code_switched(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(kept rows, report naming how many were dropped per foreign script/language and a few ids)."""
    kept: list[dict[str, Any]] = []
    reasons: Counter[str] = Counter()
    examples: list[str] = []
    for index, row in enumerate(rows):
        prompt = prompt_text(row)
        switch = next(
            (result for text in answer_texts(row) if (result := detect_code_switch(prompt, text)).switched), None
        )
        if switch is None:
            kept.append(row)
            continue
        reasons[switch.foreign_language or ",".join(sorted(switch.foreign_scripts)) or "other"] += 1
        if len(examples) < 5:
            examples.append(str(row.get("id", index)))
    return kept, {"kept": len(kept), "dropped": dict(reasons), "dropped_examples": examples}
