"""Canonical rows on disk: loading (`load_canonical`) and validation with errors that name file, row and key.

A canonical row is `{"id", "domain", "messages" | "prompt", "label", "mode", "source"}` (pref rows carry
`chosen` and `rejected` instead of a label); see docs/architecture.md for the label of each domain.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from cascade_cli.chat import MODES, ROLES
from cascade_cli.errors import CascadeUsageError
from cascade_cli.records import DATA_FILE as DATA_FILE  # re-exported for prepare-data and pass_rate
from cascade_cli.records import HELDOUT_FILE as HELDOUT_FILE
from cascade_cli.records import ROW_DOMAINS, iter_rows, resolve_rows_path

DOMAINS: tuple[str, ...] = ROW_DOMAINS
RL_DOMAINS: tuple[str, ...] = ("if", "math", "code", "swe")
CODE_KINDS: tuple[str, ...] = ("stdio", "call", "assert")
CARD_FILE = "data_card.json"


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def messages_error(messages: Any, key: str = "messages") -> str | None:
    if not isinstance(messages, list) or not messages:
        return f"'{key}' must be a non-empty list of {{role, content}} objects; found {_type_name(messages)}"
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            return f"'{key}[{index}]' must be an object; found {_type_name(message)}"
        if message.get("role") not in ROLES:
            return f"'{key}[{index}].role' must be one of {', '.join(ROLES)}; found {message.get('role')!r}"
        if not isinstance(message.get("content"), str):
            return f"'{key}[{index}].content' must be a string; found {_type_name(message.get('content'))}"
    return None


def _prompt_error(row: dict[str, Any]) -> str | None:
    if "prompt" not in row:
        return "missing key 'prompt' (a string or a list of messages)"
    prompt = row["prompt"]
    if isinstance(prompt, str):
        return None if prompt.strip() else "'prompt' is empty"
    return messages_error(prompt, "prompt")


def label_error(domain: str, label: Any) -> str | None:
    """None when `label` fits `domain`, else what was expected and what was found (keys named `label.x`)."""
    if domain in ("general", "sft"):
        return None
    if not isinstance(label, dict):
        return f"'label' must be an object for {domain} rows; found {_type_name(label)}"
    if domain == "math":
        if not isinstance(label.get("answer"), str):
            return f"'label.answer' must be a string; found {_type_name(label.get('answer'))}"
    elif domain == "if":
        ids, kwargs = label.get("instruction_id_list"), label.get("kwargs")
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
            return f"'label.instruction_id_list' must be a non-empty list of strings; found {ids!r}"
        if not isinstance(kwargs, list) or not all(isinstance(k, dict) for k in kwargs):
            return f"'label.kwargs' must be a list of objects; found {_type_name(kwargs)}"
        if len(kwargs) != len(ids):
            return f"'label.kwargs' has {len(kwargs)} entries for {len(ids)} instruction ids"
    elif domain == "code":
        kind = label.get("kind")
        if kind not in CODE_KINDS:
            return f"'label.kind' must be one of {', '.join(CODE_KINDS)}; found {kind!r}"
        if kind == "assert":
            for key in ("test", "entry_point"):
                if not isinstance(label.get(key), str):
                    return f"'label.{key}' must be a string; found {_type_name(label.get(key))}"
        else:
            for key in ("inputs", "outputs"):
                if not isinstance(label.get(key), list):
                    return f"'label.{key}' must be a list; found {_type_name(label.get(key))}"
            if len(label["inputs"]) != len(label["outputs"]):
                return f"'label.inputs' has {len(label['inputs'])} entries, 'label.outputs' {len(label['outputs'])}"
            if kind == "call" and not isinstance(label.get("fn_name"), str):
                return f"'label.fn_name' must be a string; found {_type_name(label.get('fn_name'))}"
            if kind == "stdio" and not all(isinstance(v, str) for v in label["inputs"] + label["outputs"]):
                return "'label.inputs' and 'label.outputs' must hold strings for stdio tests"
    elif domain == "swe":
        if not isinstance(label.get("golden_patch"), str):
            return f"'label.golden_patch' must be a string; found {_type_name(label.get('golden_patch'))}"
        if "original_files" in label and not isinstance(label["original_files"], dict):
            return f"'label.original_files' must be an object; found {_type_name(label['original_files'])}"
    return None


def _response_error(row: dict[str, Any], key: str) -> str | None:
    if key not in row:
        return f"missing key '{key}' (a string or a list of messages)"
    value = row[key]
    if isinstance(value, str):
        return None
    return messages_error(value, key)


def row_error(row: Any) -> str | None:
    """None when `row` is a valid canonical row, else the first problem found."""
    if not isinstance(row, dict):
        return f"expected a JSON object, found {_type_name(row)}"
    for key in ("id", "source"):
        if not isinstance(row.get(key), str):
            return (
                f"'{key}' must be a string; found {_type_name(row.get(key))}"
                if key in row
                else f"missing key '{key}'"
            )
    domain = row.get("domain")
    if domain not in DOMAINS:
        return f"'domain' must be one of {', '.join(DOMAINS)}; found {domain!r}"
    if row.get("mode") not in MODES:
        return f"'mode' must be one of {', '.join(MODES)}; found {row.get('mode')!r}"
    if domain == "sft":
        if "messages" not in row:
            return "missing key 'messages' (sft rows are conversations)"
        error = messages_error(row["messages"])
        if error:
            return error
        if not any(message["role"] == "assistant" for message in row["messages"]):
            return "'messages' has no assistant turn to train on"
        return None
    if domain == "pref":
        return _response_error(row, "chosen") or _response_error(row, "rejected")
    error = _prompt_error(row)
    if error:
        return error
    if domain in RL_DOMAINS and "label" not in row:
        return f"missing key 'label' ({domain} rows need their ground truth)"
    return label_error(domain, row.get("label"))


def _decode_json_strings(row: dict[str, Any]) -> dict[str, Any]:
    """Parquet and OpenRLHF store nested objects as JSON strings; decode the ones the contract nests."""
    for key in ("label", "messages", "prompt", "chosen", "rejected"):
        value = row.get(key)
        if isinstance(value, str) and value[:1] in ("[", "{"):
            with contextlib.suppress(json.JSONDecodeError):  # a prompt that merely starts with a bracket
                row[key] = json.loads(value)
    return row


def resolve_data_path(path: str | Path) -> Path:
    """A .jsonl/.json/.parquet file, or a prepare-data folder's data.jsonl (or data.parquet)."""
    return resolve_rows_path(path)


def load_canonical(path: str | Path, domain: str | None = None) -> list[dict[str, Any]]:
    """Read and validate canonical rows; `domain` (optional) requires every row to be of that domain."""
    file = resolve_data_path(path)
    rows: list[dict[str, Any]] = []
    for number, row in iter_rows(file):
        row = _decode_json_strings(row)
        error = row_error(row)
        if error is None and domain is not None and row["domain"] != domain:
            error = f"'domain' must be {domain!r} here; found {row['domain']!r}"
        if error:
            raise CascadeUsageError(f"{file}: row {number}: {error}")
        rows.append(row)
    if not rows:
        raise CascadeUsageError(f"{file}: no rows")
    return rows


def pref_pair(row: dict[str, Any]) -> tuple[list[dict[str, Any]], str, str]:
    """(prompt messages, chosen answer, rejected answer) for a pref row, whichever form it was written in.

    `chosen`/`rejected` are either the answer text (with `prompt` beside them) or whole conversations whose
    last turn is the assistant's answer (then the prompt is the conversation before it).
    """
    prompt = row.get("prompt")
    messages: list[dict[str, Any]] = (
        [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt or [])
    )
    answers = []
    for key in ("chosen", "rejected"):
        value = row[key]
        if isinstance(value, str):
            answers.append(value)
            continue
        if not value or value[-1].get("role") != "assistant":
            raise CascadeUsageError(f"row {row.get('id')}: '{key}' must end with an assistant turn")
        if not messages:
            messages = list(value[:-1])
        answers.append(value[-1]["content"])
    return messages, answers[0], answers[1]
