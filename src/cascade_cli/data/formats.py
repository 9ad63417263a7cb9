"""Named source formats (`--format NAME`, or detected from a row's columns) -> rows `normalize_row` reads.

Each format knows the columns a public dataset uses and turns one of its rows into the field names of the
canonical row (prompt, messages, label, mode, tools, id), with the domain fixed. `normalize_row` then does the
validation shared by every source. A row that lacks a column its format needs is refused with the column's
name. Formats (the released Nemotron-Cascade sets and common public ones):

    nemotron-sft        Nemotron-Cascade SFT stage-1/2 and SFT-SWE: `messages` (thinking answers carry a
                        think block or `reasoning_content`), optional `tools`
    nemotron-rl-math    Nemotron-Cascade-RL-Math: `problem`, `answer`
    nemotron-rl-if      Nemotron-Cascade-RL-Instruction-Following: `prompt`, `instruction_id_list`, `kwargs`
    nemotron-rl-swe     Nemotron-Cascade-RL-SWE: `prompt` (or `problem_statement`), `golden_patch`, the
                        relevant files' contents (`relevant_file_contents` / `original_files` / `file_contents`)
    openai              OpenAI chat `messages` with `tool_calls` / `tool` turns and a `tools` list
    alpaca              `instruction`, `input`, `output`
    sharegpt            `conversations` of {from, value}
    livecodebench       `question_content`, `public_test_cases` (+ `private_test_cases`, `metadata.func_name`)
    taco / apps         `question`, `input_output` (a JSON string of inputs/outputs[/fn_name])
    gsm8k, mbpp, hh-rlhf, oasst-tree, prompts: the real public sets (data/formats_real.py)

Auto-detection picks the first format whose distinguishing columns a row has; rows that already carry a
`domain` or a `label` (canonical rows) and rows no format claims keep the generic path of `normalize_row`.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import zlib
from typing import Any

from cascade_cli.chat import THINK_CLOSE, THINK_OPEN
from cascade_cli.data.format_base import Format, FormatError
from cascade_cli.data.formats_real import MULTI_ROW, REAL_DETECTION, REAL_FORMATS
from cascade_cli.data.normalize import ID_ALIASES, KEPT_EXTRAS, SHAREGPT_ROLES
from cascade_cli.records import first_value

AUTO = "auto"


# -- helpers -----------------------------------------------------------------------------------------------


def _json(value: Any, column: str) -> Any:
    """A JSON-string column decoded (parquet and hub dumps store nested values as strings).

    Only strings that look like JSON arrays/objects are decoded; others pass through for the canonical-row
    validation to name.
    """
    if isinstance(value, str) and value.lstrip()[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except json.JSONDecodeError as error:
            raise FormatError(f"column '{column}': not valid JSON ({error.msg})") from None
    return value


def _carry(row: dict[str, Any], result: dict[str, Any], *columns: str) -> dict[str, Any]:
    for column in columns:
        if row.get(column) is not None and column not in result:
            result[column] = row[column]
    return result


def tool_call_text(name: str, arguments: Any) -> str:
    """One call as the chat format writes it: `<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`."""
    return (
        "<tool_call>\n"
        + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
        + "\n</tool_call>"
    )


def _assistant_content(message: dict[str, Any], index: int) -> str:
    """An assistant turn's text: think block (from `reasoning_content`), content, then its tool calls."""
    content = message.get("content")
    if content is None:
        content = ""
    if not isinstance(content, str):
        raise FormatError(f"messages[{index}].content: expected a string; found {type(content).__name__}")
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    if isinstance(reasoning, str) and reasoning.strip() and THINK_OPEN not in content:
        content = f"{THINK_OPEN}\n{reasoning.strip()}\n{THINK_CLOSE}\n\n{content.lstrip()}"
    calls = []
    for number, call in enumerate(message.get("tool_calls") or []):
        function = call.get("function", call) if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise FormatError(
                f"messages[{index}].tool_calls[{number}]: expected {{function: {{name, arguments}}}}"
            )
        arguments = function.get("arguments", {})
        if isinstance(arguments, str):  # OpenAI sends arguments as a JSON string
            arguments = _json(arguments, f"messages[{index}].tool_calls[{number}].function.arguments")
        calls.append(tool_call_text(function["name"], arguments))
    if calls:
        content = "\n".join(([content.rstrip()] if content.strip() else []) + calls)
    return content


def chat_messages(messages: Any, column: str = "messages") -> list[dict[str, Any]]:
    """OpenAI-style messages -> canonical {role, content} turns (tool calls written into the content)."""
    messages = _json(messages, column)
    if not isinstance(messages, list) or not messages:
        raise FormatError(f"column '{column}': expected a non-empty list of messages")
    turns = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise FormatError(f"{column}[{index}]: expected an object; found {type(message).__name__}")
        role = message.get("role")
        if role == "function":  # the OpenAI legacy name of a tool result
            role = "tool"
        if role == "assistant":
            turns.append({"role": role, "content": _assistant_content(message, index)})
        else:
            content = message.get("content")
            turns.append({"role": role, "content": "" if content is None else content})
    return turns


def _tools(row: dict[str, Any]) -> dict[str, Any]:
    tools = row.get("tools")
    if tools in (None, "", []):
        return {}
    tools = _json(tools, "tools")
    if not isinstance(tools, list):
        raise FormatError(
            f"column 'tools': expected a list of tool definitions; found {type(tools).__name__}"
        )
    return {"tools": tools}


def _mode_from_flag(row: dict[str, Any]) -> dict[str, Any]:
    """Released SFT sets mark thinking vs non-thinking answers in a column; a think block says the same."""
    for column in ("thinking", "reasoning", "thinking_mode"):
        value = row.get(column)
        if isinstance(value, bool):
            return {"mode": "think" if value else "no_think"}
        if isinstance(value, str) and value.lower() in (
            "on",
            "off",
            "think",
            "no_think",
            "thinking",
            "non-thinking",
        ):
            return {"mode": "think" if value.lower() in ("on", "think", "thinking") else "no_think"}
    return {}


# -- converters ----------------------------------------------------------------------------------------------


def _sft(row: dict[str, Any]) -> dict[str, Any]:
    result = {"messages": chat_messages(row["messages"]), **_tools(row), **_mode_from_flag(row)}
    if row.get("id") is None and row.get("uuid") is not None:
        result["id"] = str(row["uuid"])
    return _carry(row, result, "id", "source")


def _rl_math(row: dict[str, Any]) -> dict[str, Any]:
    answer = first_value(row, "answer", "expected_answer")
    return _carry(
        row, {"prompt": first_value(row, "problem", "question", "prompt"), "answer": answer}, "id", "source"
    )


def _rl_if(row: dict[str, Any]) -> dict[str, Any]:
    ids = _json(row["instruction_id_list"], "instruction_id_list")
    kwargs = _json(row.get("kwargs"), "kwargs") if row.get("kwargs") is not None else [{} for _ in ids or []]
    if isinstance(kwargs, list):
        kwargs = [_json(item, "kwargs") if isinstance(item, str) else item for item in kwargs]
    return _carry(
        row,
        {"prompt": row["prompt"], "label": {"instruction_id_list": ids, "kwargs": kwargs}},
        "id",
        "key",
        "source",
    )


FILE_COLUMNS = ("relevant_file_contents", "original_files", "file_contents")


def _files(value: Any, column: str) -> dict[str, str]:
    """{path: content}, or a list of {file_path|path, content} records, -> {path: content}."""
    value = _json(value, column)
    if isinstance(value, dict):
        return {str(path): str(content) for path, content in value.items()}
    if isinstance(value, list):
        files = {}
        for index, item in enumerate(value):
            path = first_value(item, "file_path", "path", "filename", "name") if isinstance(item, dict) else None
            content = first_value(item, "content", "file_content", "contents") if isinstance(item, dict) else None
            if path is None or content is None:
                raise FormatError(f"column '{column}'[{index}]: expected {{file_path, content}}")
            files[str(path)] = str(content)
        return files
    raise FormatError(
        f"column '{column}': expected {{path: content}} or a list of files; found {type(value).__name__}"
    )


def _rl_swe(row: dict[str, Any]) -> dict[str, Any]:
    column = next(c for c in FILE_COLUMNS if row.get(c) is not None)
    label = {
        "golden_patch": first_value(row, "golden_patch", "patch"),
        "original_files": _files(row[column], column),
    }
    prompt = first_value(row, "prompt", "problem_statement")
    return _carry(row, {"prompt": prompt, "label": label}, "instance_id", "id", "source")


def _openai(row: dict[str, Any]) -> dict[str, Any]:
    return _carry(row, {"messages": chat_messages(row["messages"]), **_tools(row)}, "id", "source")


def _sharegpt(row: dict[str, Any]) -> dict[str, Any]:
    turns = _json(row["conversations"], "conversations")
    if not isinstance(turns, list) or not turns:
        raise FormatError("column 'conversations': expected a non-empty list of {from, value} turns")
    messages = []
    if isinstance(row.get("system"), str) and row["system"]:
        messages.append({"role": "system", "content": row["system"]})
    for index, turn in enumerate(turns):
        speaker = turn.get("from", turn.get("role")) if isinstance(turn, dict) else None
        if speaker not in SHAREGPT_ROLES:
            raise FormatError(
                f"conversations[{index}].from: expected human|gpt|system|tool; found {speaker!r}"
            )
        content = turn.get("value", turn.get("content"))
        if speaker == "function_call":  # a call written as {"name", "arguments"} JSON: into the chat format
            call = _json(content, f"conversations[{index}].value")
            if isinstance(call, dict) and isinstance(call.get("name"), str):
                arguments = call.get("arguments", {})
                if isinstance(arguments, str):
                    arguments = _json(arguments, f"conversations[{index}].value.arguments")
                content = tool_call_text(call["name"], arguments)
        messages.append({"role": SHAREGPT_ROLES[speaker], "content": content})
    return _carry(row, {"messages": messages, **_tools(row)}, "id", "source")


def _alpaca(row: dict[str, Any]) -> dict[str, Any]:
    prompt = row["instruction"] if not row.get("input") else f"{row['instruction']}\n\n{row['input']}"
    messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": row["output"]}]
    if isinstance(row.get("system"), str) and row["system"]:
        messages.insert(0, {"role": "system", "content": row["system"]})
    return _carry(row, {"messages": messages}, "id", "source")


class _StringsOnly(pickle.Unpickler):
    """LiveCodeBench pickles its private tests as one JSON string: allow no class, so no code can run."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def _lcb_tests(value: Any, column: str) -> list[dict[str, Any]]:
    if isinstance(value, str) and value and value.lstrip()[:1] != "[":
        try:  # base64(zlib(pickle(json string))), as LiveCodeBench's code_generation_lite stores them
            value = _StringsOnly(io.BytesIO(zlib.decompress(base64.b64decode(value)))).load()
        except Exception as error:
            raise FormatError(
                f"column '{column}': neither JSON nor LiveCodeBench's compressed tests ({error})"
            ) from None
    tests = _json(value, column)
    if not isinstance(tests, list) or not all(
        isinstance(t, dict) and "input" in t and "output" in t for t in tests
    ):
        raise FormatError(f"column '{column}': expected a list of {{input, output, testtype}} tests")
    return tests


def _livecodebench(row: dict[str, Any]) -> dict[str, Any]:
    tests = _lcb_tests(row["public_test_cases"], "public_test_cases")
    if row.get("private_test_cases"):
        tests += _lcb_tests(row["private_test_cases"], "private_test_cases")
    metadata = _json(row.get("metadata") or "{}", "metadata")
    functional = any(test.get("testtype") == "functional" for test in tests)
    inputs, outputs = [t["input"] for t in tests], [t["output"] for t in tests]
    if functional:
        fn_name = metadata.get("func_name") if isinstance(metadata, dict) else None
        if not fn_name:
            raise FormatError("functional tests need 'metadata' with 'func_name'")
        label: dict[str, Any] = {"kind": "call", "fn_name": fn_name, "inputs": inputs, "outputs": outputs}
    else:
        label = {"kind": "stdio", "inputs": inputs, "outputs": outputs}
    prompt = row["question_content"]
    if row.get("starter_code"):
        prompt = f"{prompt}\n\nStart from this code:\n```python\n{row['starter_code']}\n```"
    return _carry(row, {"prompt": prompt, "label": label, "id": row.get("question_id")}, "source")


def _apps(row: dict[str, Any]) -> dict[str, Any]:
    tests = _json(row["input_output"], "input_output")
    if not isinstance(tests, dict) or "inputs" not in tests or "outputs" not in tests:
        raise FormatError("column 'input_output': expected a JSON object with 'inputs' and 'outputs'")
    inputs, outputs = tests["inputs"], tests["outputs"]
    if tests.get("fn_name"):
        # APPS/TACO wrap each call result in a one-element list; the call verifier compares the bare value.
        if all(isinstance(o, list) and len(o) == 1 for o in outputs):
            outputs = [o[0] for o in outputs]
        label: dict[str, Any] = {
            "kind": "call",
            "fn_name": tests["fn_name"],
            "inputs": inputs,
            "outputs": outputs,
        }
    else:
        as_text = [i if isinstance(i, str) else "\n".join(map(str, i)) for i in inputs]
        out_text = [o if isinstance(o, str) else "\n".join(map(str, o)) for o in outputs]
        label = {"kind": "stdio", "inputs": as_text, "outputs": out_text}
    prompt = row["question"]
    if row.get("starter_code"):
        prompt = f"{prompt}\n\nStart from this code:\n```python\n{row['starter_code']}\n```"
    # TACO's `source` column names the judge (codeforces, ...), not the data set: not carried.
    return _carry(row, {"prompt": prompt, "label": label}, "problem_id", "id")


FORMATS: dict[str, Format] = {
    fmt.name: fmt
    for fmt in (
        Format(
            "nemotron-rl-swe",
            "swe",
            (("prompt", "problem_statement"), ("golden_patch", "patch"), FILE_COLUMNS),
            ("golden_patch",),
            _rl_swe,
        ),
        Format(
            "nemotron-rl-if",
            "if",
            ("prompt", "instruction_id_list"),
            ("prompt", "instruction_id_list"),
            _rl_if,
        ),
        Format(
            "nemotron-rl-math",
            "math",
            (("problem", "question", "prompt"), ("answer", "expected_answer")),
            ("problem", "answer"),
            _rl_math,
            excludes=("solutions", "input_output"),
        ),
        Format(
            "livecodebench",
            "code",
            ("question_content", "public_test_cases"),
            ("question_content", "public_test_cases"),
            _livecodebench,
        ),
        Format(
            "taco", "code", ("question", "input_output"), ("question", "input_output", "skill_types"), _apps
        ),
        Format("apps", "code", ("question", "input_output"), ("question", "input_output"), _apps),
        Format("nemotron-sft", "sft", ("messages",), ("messages",), _sft, excludes=("tools", "chosen")),
        Format("openai", "sft", ("messages",), ("messages", "tools"), _openai, excludes=("chosen",)),
        Format("sharegpt", "sft", ("conversations",), ("conversations",), _sharegpt),
        Format("alpaca", "sft", ("instruction", "output"), ("instruction", "output"), _alpaca),
        *REAL_FORMATS,  # gsm8k, mbpp, hh-rlhf, oasst-tree, prompts: data/formats_real.py
    )
}
# Detection order: the most specific column sets first.
DETECTION_ORDER = (
    *REAL_DETECTION,
    "nemotron-rl-swe",
    "nemotron-rl-if",
    "livecodebench",
    "taco",
    "apps",
    "nemotron-rl-math",
    "openai",
    "nemotron-sft",
    "sharegpt",
    "alpaca",
)


def check_format(name: str | None, also: tuple[str, ...] = ()) -> None:
    """ValueError unless `name` is auto, a format here or one of `also` (formats handled elsewhere)."""
    if name not in (None, AUTO) and name not in FORMATS and name not in also:
        names = ", ".join(sorted((*FORMATS, *also)))
        raise ValueError(f"format: expected auto or one of {names}; found {name!r}")


def detect_format(row: dict[str, Any]) -> Format | None:
    """The format a raw row's columns identify, or None (canonical rows and unknown shapes)."""
    if row.get("domain") is not None or row.get("label") is not None:
        return None
    for name in DETECTION_ORDER:
        fmt = FORMATS[name]
        if all(row.get(c) is not None for c in fmt.detect) and not any(c in row for c in fmt.excludes):
            return fmt
    return None


def convert_row(row: dict[str, Any], name: str | None) -> tuple[dict[str, Any], str | None]:
    """(row for `normalize_row`, the format's domain) under format `name` (auto/None: detected or as is).

    Raises FormatError naming the missing column when the row does not fit an explicitly named format.
    """
    fmt = detect_format(row) if name in (None, AUTO) else FORMATS[name]
    if fmt is None:
        messages = row.get("messages")
        if isinstance(messages, list) and any(
            isinstance(m, dict) and (m.get("tool_calls") or m.get("reasoning_content")) for m in messages
        ):  # a canonical-looking row whose turns still need writing into the chat format
            return {**row, "messages": chat_messages(messages)}, None
        return row, None
    if fmt.name in MULTI_ROW:  # a row that gives several rows (or none): convert_rows
        raise FormatError(f"format {fmt.name}: a row gives several rows; read it with convert_rows")
    missing = fmt.missing(row)
    if missing:
        columns = ", ".join(sorted(row)) or "none"
        raise FormatError(f"format {fmt.name}: missing column {missing} (columns: {columns})")
    try:
        converted = fmt.convert(row)
    except (KeyError, TypeError, AttributeError) as error:
        raise FormatError(f"format {fmt.name}: malformed row ({type(error).__name__}: {error})") from None
    return _finish(row, converted), fmt.domain


def _finish(row: dict[str, Any], converted: dict[str, Any]) -> dict[str, Any]:
    # Ids under their usual names and the extras canonical rows keep (pass_rate, reference...) ride along.
    for key in (*ID_ALIASES, *KEPT_EXTRAS):
        if key not in converted and row.get(key) is not None:
            converted[key] = row[key]
    return {key: value for key, value in converted.items() if value is not None}


def convert_rows(row: dict[str, Any], name: str | None) -> tuple[list[dict[str, Any]], str | None]:
    """`convert_row` for every format, those that give several rows or none (MULTI_ROW: an OASST tree's
    pairs, an HH tie) included."""
    fmt = detect_format(row) if name in (None, AUTO) else FORMATS[name]
    if fmt is None or fmt.name not in MULTI_ROW:
        converted, domain = convert_row(row, name)
        return [converted], domain
    missing = fmt.missing(row)
    if missing:
        raise FormatError(f"format {fmt.name}: missing column {missing} (columns: {', '.join(sorted(row))})")
    try:
        rows = fmt.convert(row)
    except (KeyError, TypeError, AttributeError) as error:
        raise FormatError(f"format {fmt.name}: malformed row ({type(error).__name__}: {error})") from None
    return [_finish(row, converted) for converted in rows], fmt.domain
