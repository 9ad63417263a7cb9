"""Canonical rows -> the JSONL OpenRLHF 0.11.2's datasets read.

OpenRLHF calls `tokenizer.apply_chat_template(messages)` without our `mode`, so the ` /think` or
` /no_think` flag is appended to every user turn here (our CHAT_TEMPLATE keeps a flag already present).

- RL (rlvr, rlhf): `{"prompt": [messages], "label": JSON string of the label with "domain" added,
  "datasource": domain}`, read with `--data.input_key prompt --data.label_key label --data.apply_chat_template`
  (PromptDataset); the reward service routes on the label's domain.
- SFT: `{"messages": [the whole conversation]}`, read with `--data.input_key messages --data.multiturn`
  (SFTDataset: loss on every assistant turn).
- Reward model: `{"prompt": [messages], "chosen": [assistant turn], "rejected": [assistant turn]}`, read
  with `--data.prompt_key prompt` (RewardDataset).

    python -m cascade_cli.engines.openrlhf.data KIND IN OUT [--mode M] [--domain D]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cascade_cli.chat import MODES, flag_user_turn, prompt_messages
from cascade_cli.errors import CascadeUsageError
from cascade_cli.jsonl import iter_jsonl, write_jsonl

# The paper's prompt mode per stage (§1.2): IF-RL non-thinking, math / code / swe thinking, RLHF half-half.
DOMAIN_MODES = {"if": "no_think", "math": "think", "code": "think", "swe": "think"}
MODE_POLICIES = (*MODES, "half", "row")


def canonical_file(data: str | Path) -> Path:
    """A canonical .jsonl file, or a `prepare-data` directory holding data.jsonl."""
    path = Path(data)
    if path.is_dir():
        path = path / "data.jsonl"
    if not path.is_file():
        raise CascadeUsageError(f"{data}: data not found (expected a .jsonl file or a directory with data.jsonl)")
    return path


def flagged(messages: list[dict[str, Any]], mode: str | None) -> list[dict[str, Any]]:
    if mode is None:
        return [dict(message) for message in messages]
    return [
        {**message, "content": flag_user_turn(message["content"], mode)} if message.get("role") == "user"
        else dict(message)
        for message in messages
    ]


def _check_messages(messages: Any, where: str, key: str) -> list[dict[str, Any]]:
    if not isinstance(messages, list) or not messages:
        raise CascadeUsageError(f"{where}: '{key}' must be a non-empty list of messages; found {type(messages).__name__}")
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("content"), str) or "role" not in message:
            raise CascadeUsageError(f"{where}: '{key}[{index}]' must be {{role, content}} with string content")
    return messages


def row_mode(policy: str | None, row: dict[str, Any], index: int, domain: str | None) -> str:
    if policy in MODES:
        return policy  # type: ignore[return-value]
    if policy == "half":
        return MODES[index % 2]
    if policy == "row" or policy is None:
        mode = row.get("mode")
        if mode in MODES:
            return mode
        if policy == "row":
            raise CascadeUsageError(f"'mode' must be one of {', '.join(MODES)}; found {mode!r}")
    return DOMAIN_MODES.get(domain or "", "think")


def rl_row(row: dict[str, Any], mode: str, where: str, domain: str | None = None) -> dict[str, Any]:
    if "prompt" not in row:
        raise CascadeUsageError(f"{where}: missing key 'prompt' (a string or a list of messages)")
    prompt = row["prompt"]
    if isinstance(prompt, str):
        if not prompt.strip():
            raise CascadeUsageError(f"{where}: 'prompt' is empty")
    else:
        _check_messages(prompt, where, "prompt")
    row_domain = row.get("domain") or domain
    if not row_domain:
        raise CascadeUsageError(f"{where}: missing key 'domain' (the reward service routes on it)")
    label = row.get("label")
    if label is None:
        label = {}
    if isinstance(label, str):
        try:
            label = json.loads(label)
        except json.JSONDecodeError:
            label = {"answer": label}
    if not isinstance(label, dict):
        raise CascadeUsageError(f"{where}: 'label' must be an object; found {type(label).__name__}")
    return {
        "prompt": flagged(prompt_messages(prompt), mode),
        "label": json.dumps({**label, "domain": row_domain}, ensure_ascii=False),
        "datasource": row_domain,
    }


def sft_row(row: dict[str, Any], where: str) -> dict[str, Any]:
    messages = _check_messages(row.get("messages"), where, "messages")
    if not any(message.get("role") == "assistant" for message in messages):
        raise CascadeUsageError(f"{where}: 'messages' has no assistant turn to train on")
    mode = row.get("mode") if row.get("mode") in MODES else "think"
    return {"messages": flagged(messages, mode)}


def _turn(value: Any, where: str, key: str) -> list[dict[str, Any]]:
    if isinstance(value, str):
        return [{"role": "assistant", "content": value}]
    return _check_messages(value, where, key)


def rm_row(row: dict[str, Any], where: str) -> dict[str, Any]:
    for key in ("prompt", "chosen", "rejected"):
        if key not in row:
            raise CascadeUsageError(f"{where}: missing key {key!r} (preference rows carry prompt, chosen, rejected)")
    mode = row.get("mode") if row.get("mode") in MODES else None
    return {
        "prompt": flagged(prompt_messages(row["prompt"]), mode),
        "chosen": _turn(row["chosen"], where, "chosen"),
        "rejected": _turn(row["rejected"], where, "rejected"),
    }


def convert_rows(
    kind: str, source: str | Path, mode: str | None = None, domain: str | None = None
) -> Iterator[dict[str, Any]]:
    path = canonical_file(source)
    if mode is not None and mode not in MODE_POLICIES:
        raise CascadeUsageError(f"mode: expected one of {', '.join(MODE_POLICIES)}; found {mode!r}")
    for index, (line, row) in enumerate(iter_jsonl(path)):
        where = f"{path}: row {line}"
        if kind in ("rlvr", "rlhf"):
            try:
                chosen_mode = row_mode(mode, row, index, row.get("domain") or domain)
            except CascadeUsageError as error:
                raise CascadeUsageError(f"{where}: {error}") from None
            yield rl_row(row, chosen_mode, where, domain)
        elif kind == "sft":
            yield sft_row(row, where)
        elif kind == "reward_model":
            yield rm_row(row, where)
        else:
            raise CascadeUsageError(f"kind {kind!r}: no OpenRLHF data format (sft, reward_model, rlvr, rlhf)")


def stage_mode(config: Any) -> str | None:
    """The stage's prompt-mode policy: its `mode`, else half-half for RLHF, else the domain's default."""
    mode = getattr(config, "mode", None)
    if mode:
        return mode
    if config.kind == "rlhf":
        return "half"
    return None


def convert_stage_data(config: Any, target: Path) -> int:
    """Write the stage's data in OpenRLHF's format to `target`; returns the row count."""
    domain = getattr(config, "domain", None) if config.kind == "rlvr" else None  # RLHF rows keep their own
    rows = convert_rows(config.kind, config.data, stage_mode(config), domain)
    target.parent.mkdir(parents=True, exist_ok=True)
    count = write_jsonl(target, rows)
    if count == 0:
        raise CascadeUsageError(f"{config.data}: no rows to train on")
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Convert canonical rows to OpenRLHF's JSONL.")
    parser.add_argument("kind", choices=["sft", "reward_model", "rlvr", "rlhf"])
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("--mode", choices=MODE_POLICIES, default=None)
    parser.add_argument("--domain", default=None)
    args = parser.parse_args(argv)
    target = Path(args.target)
    target.parent.mkdir(parents=True, exist_ok=True)
    count = write_jsonl(target, convert_rows(args.kind, args.source, args.mode, args.domain))
    print(f"wrote {count} rows to {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
