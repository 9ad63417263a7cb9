"""The data contracts of docs/architecture.md in one place: canonical rows, rollout records, the loader for
"a file or a prepare-data folder", a prompt's text, and the math answer box.

Canonical row (what `prepare-data` writes):
    {"id", "domain": "sft|pref|if|math|code|swe|general", "messages" | "prompt", "label", "mode", "source"}
Rollout record (what generation produces; what every verifier reads):
    {"id", "prompt", "response", "label", "domain", "mode", "finish_reason": "stop|length"}
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cascade_cli.errors import CascadeUsageError
from cascade_cli.jsonl import iter_jsonl

ROW_DOMAINS = ("sft", "pref", "if", "math", "code", "swe", "general")
ROLLOUT_FIELDS = ("id", "prompt", "response", "label", "domain", "mode", "finish_reason")
FINISH_REASONS = ("stop", "length")
DATA_FILE, HELDOUT_FILE = "data.jsonl", "heldout.jsonl"
ROW_SUFFIXES = (".jsonl", ".json", ".parquet")


# ---- rollout records ----------------------------------------------------------------------------------


def row_prompt(row: dict[str, Any]) -> str | list[dict[str, Any]]:
    """A row's prompt: `prompt` (string or messages), else `messages` without the final assistant turn."""
    if "prompt" in row:
        return row["prompt"]
    messages = list(row["messages"])
    while messages and messages[-1].get("role") == "assistant":
        messages.pop()
    return messages


def rollout_record(
    row: dict[str, Any],
    response: str,
    *,
    domain: str,
    mode: str,
    finish_reason: str,
    record_id: Any = None,
) -> dict[str, Any]:
    """The rollout record of one response to a canonical row. `record_id` defaults to the row's id."""
    return {
        "id": row.get("id") if record_id is None else record_id,
        "prompt": row.get("prompt", row.get("messages")),
        "response": response,
        "label": row.get("label"),
        "domain": domain,
        "mode": mode,
        "finish_reason": finish_reason,
    }


def first_value(row: dict[str, Any], *keys: str) -> Any:
    """The value of the first of `keys` that a raw row carries (not None), else None: one field, many names."""
    return next((row[key] for key in keys if row.get(key) is not None), None)


def prompt_text(prompt: Any) -> str:
    """The user-visible text of a prompt: a string, or the string contents of its non-system messages."""
    if isinstance(prompt, str):
        return prompt
    if not isinstance(prompt, list):
        return ""
    return "\n".join(
        message["content"]
        for message in prompt
        if isinstance(message, dict) and message.get("role") != "system" and isinstance(message.get("content"), str)
    )


# ---- "a file or a prepare-data folder" ----------------------------------------------------------------


def resolve_rows_path(path: str | Path, names: tuple[str, ...] = (DATA_FILE, "data.parquet")) -> Path:
    """A .jsonl/.json/.parquet file as given, or the first of `names` inside a prepare-data folder."""
    path = Path(path)
    if path.is_dir():
        for name in names:
            if (path / name).is_file():
                return path / name
        raise CascadeUsageError(
            f"{path}: directory has no {' or '.join(names)} (expected the output of cascade prepare-data)"
        )
    if not path.exists():
        raise CascadeUsageError(f"{path}: file not found")
    if path.suffix not in ROW_SUFFIXES:
        raise CascadeUsageError(
            f"{path}: expected a .jsonl, .json or .parquet file, found '{path.suffix or 'no suffix'}'"
        )
    return path


def iter_parquet(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(1-based row number, row) for every row of a parquet file, read in batches."""
    try:
        import pyarrow.parquet as pq

        parquet = pq.ParquetFile(path)
    except Exception as error:  # pyarrow raises several types for unreadable files
        raise CascadeUsageError(
            f"{path}: not a readable parquet file ({type(error).__name__}: {error})"
        ) from None
    number = 0
    for batch in parquet.iter_batches(batch_size=4096):
        for row in batch.to_pylist():
            number += 1
            yield number, row


def iter_rows(
    path: str | Path, names: tuple[str, ...] = (DATA_FILE, "data.parquet")
) -> Iterator[tuple[int, dict[str, Any]]]:
    """(row number, row) of a .jsonl/.json/.parquet file or of a prepare-data folder, unvalidated, in order.

    A malformed JSON line is a usage error naming the file and line.
    """
    file = resolve_rows_path(path, names)
    if file.suffix == ".parquet":
        yield from iter_parquet(file)
        return
    if file.suffix == ".json":
        try:
            data = json.loads(file.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            if error.msg == "Extra data":  # JSON Lines under a .json name: each row parsed (and named) alone
                yield from iter_jsonl(file)
                return
            raise CascadeUsageError(
                f"{file}: malformed JSON ({error.msg} at line {error.lineno}, column {error.colno})"
            ) from None
        if not isinstance(data, list):
            raise CascadeUsageError(f"{file}: expected a JSON list of rows, found {type(data).__name__}")
        yield from enumerate(data, start=1)
        return
    yield from iter_jsonl(file)


def load_rows(path: str | Path, names: tuple[str, ...] = (DATA_FILE, "data.parquet")) -> list[dict[str, Any]]:
    """The rows of a .jsonl/.json/.parquet file or of a prepare-data folder, unvalidated, in order."""
    return [row for _, row in iter_rows(path, names)]


# ---- the math answer box -------------------------------------------------------------------------------

_MAX_BOX_CANDIDATES = 8
_BOX_COMMAND = re.compile(r"\\(?:boxed|fbox)\s*")


def balanced_group(text: str, open_at: int) -> str | None:
    """The contents of the brace group starting at `text[open_at] == "{"`, or None when unbalanced."""
    depth = 0
    index = open_at
    while index < len(text):
        char = text[index]
        if char == "\\":  # an escaped brace `\{` does not count
            index += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[open_at + 1 : index]
        index += 1
    return None


def boxed_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, argument) of every complete `\\boxed{...}` / `\\fbox{...}` not inside another, in order.

    Like `last_boxed`, only the last few box commands are looked at (a flood of unclosed ones stays linear).
    """
    spans: list[tuple[int, int, str]] = []
    for match in list(_BOX_COMMAND.finditer(text))[-_MAX_BOX_CANDIDATES:]:
        box = None if spans and match.start() < spans[-1][1] else _box_at(text, match)  # nested: skip
        if box is not None:
            spans.append((match.start(), *box))
    return spans


def all_boxed(text: str) -> list[str]:
    """The arguments of the boxes in `text`, in order (a box nested in another counts once, as the outer)."""
    return [content for _, _, content in boxed_spans(text)]


def _box_at(text: str, match: re.Match[str]) -> tuple[int, str] | None:
    """(end, argument) of the box whose command `match` found, or None when it is not complete."""
    start = match.end()
    if start < len(text) and text[start] == "{":
        content = balanced_group(text, start)
        if content is not None:
            return start + len(content) + 2, content
    elif start < len(text) and match.group(0).endswith(" "):
        bare = re.match(r"[^\s$.,;]+", text[start:])
        if bare:
            return start + bare.end(), bare.group(0)
    return None


def last_boxed(text: str) -> str | None:
    """The argument of the last complete `\\boxed{...}` or `\\fbox{...}`; `\\boxed 5` also counts."""
    # Only the last few candidates: a flood of unclosed `\boxed{` would otherwise cost quadratic time.
    for match in list(_BOX_COMMAND.finditer(text))[-_MAX_BOX_CANDIDATES:][::-1]:
        box = _box_at(text, match)
        if box is not None:
            return box[1]
    return None
