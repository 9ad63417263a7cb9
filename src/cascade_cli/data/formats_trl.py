"""TRL's prompt/completion layout, standard and conversational, as an SFT conversation:

    {"prompt": "The sky is", "completion": " blue."}
    {"prompt": [{"role": "user", "content": "..."}], "completion": [{"role": "assistant", "content": "..."}]}

The prompt (text, or the turns before the answer) and the completion (text, or the answer's turns) become one
`messages` list. TRL's preference layouts (`prompt` + `chosen` + `rejected`, conversational or with the
prompt implicit in the turns) are pref rows of the generic path already (data/normalize.py).
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from cascade_cli.data.format_base import Format, FormatError


def _turns(value: Any, column: str, role: str) -> list[dict[str, Any]]:
    """A column as chat turns: text is one turn of `role`; a list (or its JSON text) is the turns."""
    if isinstance(value, str) and value.lstrip()[:1] == "[":
        with contextlib.suppress(json.JSONDecodeError):  # else text that merely starts with a bracket
            value = json.loads(value)
    if isinstance(value, str):
        return [{"role": role, "content": value}]
    if not isinstance(value, list) or not value or not all(isinstance(turn, dict) for turn in value):
        raise FormatError(
            f"column '{column}': expected text or a non-empty list of {{role, content}} messages; "
            f"found {type(value).__name__}"
        )
    return [dict(turn) for turn in value]


def _prompt_completion(row: dict[str, Any]) -> dict[str, Any]:
    prompt = _turns(row["prompt"], "prompt", "user")
    completion = _turns(row["completion"], "completion", "assistant")
    if not any(turn.get("role") == "assistant" for turn in completion):
        raise FormatError("column 'completion': holds no assistant turn to train on")
    if isinstance(row.get("system"), str) and row["system"] and prompt[0].get("role") != "system":
        prompt.insert(0, {"role": "system", "content": row["system"]})
    return {"messages": [*prompt, *completion], "id": row.get("id")}


TRL_FORMATS = (
    Format("trl-prompt-completion", "sft", ("prompt", "completion"), ("prompt", "completion"),
           _prompt_completion, excludes=("chosen", "rejected", "messages", "instruction_id_list")),
)  # fmt: skip
