"""Raw rows (after the field mapping) -> canonical rows.

The domain is the one asked for, else the row's own `domain`, else read off the columns: chosen+rejected ->
pref; a conversation -> sft; instruction ids -> if; an answer -> math; tests -> code; a patch -> swe;
a bare prompt -> general. Common column names are understood without a mapping (problem/question for the
prompt, Alpaca instruction/input/output, ShareGPT conversations, prompt+response).
"""

from __future__ import annotations

import json
from typing import Any

from cascade_cli.chat import THINK_OPEN
from cascade_cli.data.io import DOMAINS, row_error
from cascade_cli.errors import CascadeUsageError
from cascade_cli.records import last_boxed

PROMPT_ALIASES: tuple[str, ...] = ("prompt", "problem", "question")
ID_ALIASES: tuple[str, ...] = ("id", "unique_id", "instance_id", "task_id", "key", "problem_id")
RESPONSE_ALIASES: tuple[str, ...] = ("response", "completion", "output", "answer_text")
# Extra keys kept on canonical rows (everything else the source had is dropped).
KEPT_EXTRAS: tuple[str, ...] = ("reference", "task", "correct", "pass_rate", "pass_rate_k", "tools")
DOMAIN_MODES: dict[str, str] = {"math": "think", "code": "think", "swe": "think", "if": "no_think"}
SHAREGPT_ROLES = {  # ShareGPT speaker -> chat role (also data/formats.py)
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "system": "system",
    "tool": "tool",
    "function_call": "assistant",
    "observation": "tool",
}


def _decoded(value: Any) -> Any:
    if isinstance(value, str) and value.strip()[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def _messages(row: dict[str, Any]) -> list[dict[str, Any]] | None:
    if "messages" in row:
        messages = _decoded(row["messages"])
        if isinstance(messages, list):
            return [
                {**m, "content": m.get("content") if m.get("content") is not None else ""}
                if isinstance(m, dict)
                else m
                for m in messages
            ]
        return messages
    if isinstance(row.get("conversations"), list):  # ShareGPT
        turns = []
        for turn in row["conversations"]:
            if not isinstance(turn, dict):
                return None
            role = SHAREGPT_ROLES.get(str(turn.get("from", turn.get("role"))), str(turn.get("from")))
            turns.append({"role": role, "content": turn.get("value", turn.get("content"))})
        return turns
    if "instruction" in row and "output" in row:  # Alpaca
        prompt = row["instruction"] if not row.get("input") else f"{row['instruction']}\n\n{row['input']}"
        return [{"role": "user", "content": prompt}, {"role": "assistant", "content": row["output"]}]
    prompt = _prompt(row)
    for key in RESPONSE_ALIASES:
        if key in row and isinstance(prompt, str) and isinstance(row[key], str):
            messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": row[key]}]
            if isinstance(row.get("system"), str) and row["system"]:
                messages.insert(0, {"role": "system", "content": row["system"]})
            return messages
    return None


def _prompt(row: dict[str, Any]) -> Any:
    for key in PROMPT_ALIASES:
        if key in row and row[key] is not None:
            return _decoded(row[key]) if key == "prompt" else row[key]
    return None


def infer_domain(row: dict[str, Any]) -> str:
    label = _decoded(row.get("label"))
    if "chosen" in row and "rejected" in row:
        return "pref"
    if isinstance(label, dict):
        if "instruction_id_list" in label:
            return "if"
        if "golden_patch" in label:
            return "swe"
        if "kind" in label or "test" in label or "inputs" in label:
            return "code"
        if "answer" in label:
            return "math"
    if "instruction_id_list" in row:
        return "if"
    if "golden_patch" in row or "patch" in row:
        return "swe"
    if (
        ("test" in row and "entry_point" in row)
        or ("inputs" in row and "outputs" in row)
        or "input_output" in row
    ):
        return "code"
    if "answer" in row or isinstance(label, str):
        return "math"
    if _messages(row) is not None:
        return "sft"
    return "general"


def _math_label(row: dict[str, Any]) -> dict[str, Any]:
    label = _decoded(row.get("label"))
    answer = label.get("answer") if isinstance(label, dict) else label
    if answer is None:
        answer = row.get("answer")
    if answer is None:
        raise ValueError(
            "missing key 'answer' (math rows need the final answer; map it with --map answer=COLUMN)"
        )
    if isinstance(answer, (int, float)) and not isinstance(answer, bool):
        answer = str(int(answer)) if float(answer).is_integer() else str(answer)
    if not isinstance(answer, str):
        raise ValueError(f"'answer' must be a string or a number; found {type(answer).__name__}")
    boxed = last_boxed(answer)
    result = dict(label) if isinstance(label, dict) else {}
    result["answer"] = (boxed if boxed is not None else answer).strip()
    return result


def _if_label(row: dict[str, Any]) -> dict[str, Any]:
    label = _decoded(row.get("label"))
    source = label if isinstance(label, dict) else row
    ids = _decoded(source.get("instruction_id_list"))
    if ids is None:
        raise ValueError(
            "missing key 'instruction_id_list' (IFEval-style rows need instruction ids and kwargs)"
        )
    kwargs = _decoded(source.get("kwargs"))
    if kwargs is None and isinstance(ids, list):
        kwargs = [{} for _ in ids]
    if isinstance(kwargs, list):
        # Parquet/Arrow and the hub's IFEval give every kwargs object every key, unused ones as null.
        kwargs = [
            {k: v for k, v in item.items() if v is not None} if isinstance(item, dict) else item
            for item in kwargs
        ]
    result = dict(label) if isinstance(label, dict) else {}
    result.update(instruction_id_list=ids, kwargs=kwargs)
    return result


def _code_label(row: dict[str, Any]) -> dict[str, Any]:
    label = _decoded(row.get("label"))
    if isinstance(label, dict):
        return label
    if "test" in row and "entry_point" in row:
        return {"kind": "assert", "test": row["test"], "entry_point": row["entry_point"]}
    tests = _decoded(row.get("input_output")) if "input_output" in row else row  # APPS / TACO
    if not isinstance(tests, dict) or "inputs" not in tests or "outputs" not in tests:
        raise ValueError(
            "missing tests: expected 'label', 'test'+'entry_point', 'inputs'+'outputs' or 'input_output'"
        )
    inputs, outputs = _decoded(tests["inputs"]), _decoded(tests["outputs"])
    if tests.get("fn_name"):
        return {"kind": "call", "fn_name": tests["fn_name"], "inputs": inputs, "outputs": outputs}
    return {"kind": "stdio", "inputs": inputs, "outputs": outputs}


def _swe_label(row: dict[str, Any]) -> dict[str, Any]:
    label = _decoded(row.get("label"))
    if isinstance(label, dict):
        return label
    patch = row.get("golden_patch", row.get("patch"))
    if patch is None:
        raise ValueError("missing key 'golden_patch' (or 'patch')")
    result: dict[str, Any] = {"golden_patch": patch}
    if "original_files" in row:
        result["original_files"] = _decoded(row["original_files"])
    return result


_LABELS = {"math": _math_label, "if": _if_label, "code": _code_label, "swe": _swe_label}


def _mode(row: dict[str, Any], domain: str, mode: str | None, messages: list[dict[str, Any]] | None) -> str:
    if mode:
        return mode
    if row.get("mode") in ("think", "no_think"):
        return row["mode"]
    if messages:
        answers = [
            m.get("content") or "" for m in messages if isinstance(m, dict) and m.get("role") == "assistant"
        ]
        if answers:
            return "think" if any(THINK_OPEN in answer for answer in answers) else "no_think"
    return DOMAIN_MODES.get(domain, "think")


def normalize_row(
    row: dict[str, Any],
    *,
    number: int,
    where: str,
    source: str,
    domain: str | None = None,
    mode: str | None = None,
    id_prefix: str = "row",
) -> dict[str, Any]:
    """One raw row -> a validated canonical row; errors name `where` (the file) and the row number."""
    try:
        row_domain = domain or (row["domain"] if row.get("domain") in DOMAINS else None) or infer_domain(row)
        canonical: dict[str, Any] = {"id": None, "domain": row_domain}
        for key in ID_ALIASES:
            if row.get(key) is not None:
                canonical["id"] = str(row[key])
                break
        if canonical["id"] is None:
            canonical["id"] = f"{id_prefix}-{number}"
        messages = None
        if row_domain == "sft":
            messages = _messages(row)
            if messages is None:
                raise ValueError(
                    "missing key 'messages' (or conversations, instruction+output, prompt+response) for an sft row"
                )
            canonical["messages"] = messages
        elif row_domain == "pref":
            prompt = _prompt(row)
            if prompt is not None:
                canonical["prompt"] = prompt
            for key in ("chosen", "rejected"):
                if key in row:
                    canonical[key] = _decoded(row[key])
        else:
            prompt = _prompt(row)
            if prompt is None:
                raise ValueError(
                    "missing key 'prompt' (also read from 'problem' or 'question'; map others with --map prompt=COLUMN)"
                )
            canonical["prompt"] = prompt
            if row_domain in _LABELS:
                canonical["label"] = _LABELS[row_domain](row)
            elif "label" in row:
                canonical["label"] = _decoded(row["label"])
        canonical["mode"] = _mode(row, row_domain, mode, messages)
        canonical["source"] = row["source"] if isinstance(row.get("source"), str) else source
        for key in KEPT_EXTRAS:
            if key in row:
                canonical[key] = row[key]
    except ValueError as error:
        raise CascadeUsageError(f"{where}: row {number}: {error}") from None
    error_text = row_error(canonical)
    if error_text:
        raise CascadeUsageError(f"{where}: row {number}: {error_text}")
    return canonical
