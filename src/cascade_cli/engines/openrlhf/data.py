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
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cascade_cli.chat import MODES, answer_text, flag_user_turn, prompt_messages
from cascade_cli.config.common import StageConfig
from cascade_cli.config.grpo import DOMAIN_MODES
from cascade_cli.data.io import load_canonical, pref_pair
from cascade_cli.errors import CascadeUsageError
from cascade_cli.jsonl import write_jsonl

MODE_POLICIES = (*MODES, "half", "row")
RL_KINDS = ("rlvr", "rlhf")


def flagged(messages: list[dict[str, Any]], mode: str | None) -> list[dict[str, Any]]:
    """Copies of `messages` with the mode flag appended to every user turn (none when `mode` is None)."""
    if mode is None:
        return [dict(message) for message in messages]
    return [
        {**message, "content": flag_user_turn(message["content"], mode)}
        if message.get("role") == "user"
        else dict(message)
        for message in messages
    ]


def row_mode(policy: str | None, row: dict[str, Any], index: int) -> str:
    """think | no_think | half (even rows think, odd rows not) | row or None (the row's own `mode`)."""
    if policy in MODES:
        return policy  # type: ignore[return-value]
    if policy == "half":
        return MODES[index % 2]
    return row["mode"]


def rl_row(row: dict[str, Any], mode: str) -> dict[str, Any]:
    label = row.get("label")
    label = dict(label) if isinstance(label, dict) else {}
    return {
        "prompt": flagged(prompt_messages(row["prompt"]), mode),
        "label": json.dumps({**label, "domain": row["domain"]}, ensure_ascii=False),
        "datasource": row["domain"],
    }


def sft_row(row: dict[str, Any]) -> dict[str, Any]:
    return {"messages": flagged(row["messages"], row["mode"])}


def rm_row(row: dict[str, Any], strip_thinking: bool = True) -> dict[str, Any]:
    """The preference pair as chat turns after the (flagged) prompt, whichever form the row was written in;
    with `strip_thinking` the answers lose their think block (RLHF scores the text after </think>)."""
    prompt, chosen, rejected = pref_pair(row)
    if strip_thinking:
        chosen, rejected = answer_text(chosen), answer_text(rejected)
    return {
        "prompt": flagged(prompt, row["mode"]),
        "chosen": [{"role": "assistant", "content": chosen}],
        "rejected": [{"role": "assistant", "content": rejected}],
    }


def convert_rows(
    kind: str, source: str | Path, mode: str | None = None, domain: str | None = None, strip_thinking: bool = True
) -> Iterator[dict[str, Any]]:
    """Canonical rows (validated by the project's loader, .jsonl / .parquet / prepare-data directory) in
    OpenRLHF's format for `kind`; `domain`, when given, is required of every row."""
    if mode is not None and mode not in MODE_POLICIES:
        raise CascadeUsageError(f"mode: expected one of {', '.join(MODE_POLICIES)}; found {mode!r}")
    if kind not in (*RL_KINDS, "sft", "reward_model"):
        raise CascadeUsageError(f"kind {kind!r}: no OpenRLHF data format (sft, reward_model, rlvr, rlhf)")
    expected = {"sft": "sft", "reward_model": "pref"}.get(kind, domain)
    rows = load_canonical(source, domain=expected)
    for index, row in enumerate(rows):
        if kind in RL_KINDS:
            if "prompt" not in row:
                raise CascadeUsageError(f"{source}: row {index + 1}: missing key 'prompt' ({kind} needs prompts)")
            yield rl_row(row, row_mode(mode, row, index))
        elif kind == "sft":
            yield sft_row(row)
        else:
            yield rm_row(row, strip_thinking)


def write_phase_files(source: Path, samples: list[int], targets: list[Path], seed: int = 0) -> None:
    """Split an endless stream of the converted prompts into consecutive chunks of `samples[k]` rows, one file
    per RL phase: epoch e is the rows in a seeded shuffle (seed + e), so a phase continues where the last one
    stopped and a phase longer than the data sees every prompt before any repeats (as epochs do)."""
    offsets: list[int] = []
    with source.open("rb") as handle:
        position = handle.tell()
        for line in iter(handle.readline, b""):
            if line.strip():
                offsets.append(position)
            position = handle.tell()
    if not offsets:
        raise CascadeUsageError(f"{source}: no rows to split into phases")

    def stream() -> Iterator[int]:
        epoch = 0
        while True:
            order = list(range(len(offsets)))
            random.Random(seed + epoch).shuffle(order)
            yield from order
            epoch += 1

    indices = stream()
    with source.open("rb") as handle:
        for count, target in zip(samples, targets, strict=True):
            target.parent.mkdir(parents=True, exist_ok=True)
            with target.open("wb") as sink:
                for _ in range(count):
                    handle.seek(offsets[next(indices)])
                    sink.write(handle.readline())


def stage_mode(config: StageConfig) -> str | None:
    """The stage's prompt-mode policy: an RL stage's `mode`; unset, half-half for RLHF and the domain's paper
    default for RLVR (IF-RL non-thinking; math, code, SWE thinking), as the local engine does. SFT and
    reward-model rows keep their own mode (None)."""
    if config.kind == "rlhf":
        return config.mode or "half"
    if config.kind == "rlvr":
        return config.mode or DOMAIN_MODES.get(config.domain, "think")
    return None


def convert_stage_data(config: StageConfig, target: Path) -> int:
    """Write the stage's data in OpenRLHF's format to `target`; returns the row count."""
    domain = config.domain if config.kind == "rlvr" else None  # RLHF rows keep their own
    strip = config.strip_thinking if config.kind == "reward_model" else True
    rows = convert_rows(config.kind, config.data, stage_mode(config), domain, strip)
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
    parser.add_argument(
        "--phase-samples", default="", help="RL: rows per phase, comma-separated (phaseK.jsonl)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep-thinking", action="store_true", help="reward_model: keep think blocks in answers")
    args = parser.parse_args(argv)
    target = Path(args.target)
    target.parent.mkdir(parents=True, exist_ok=True)
    rows = convert_rows(args.kind, args.source, args.mode, args.domain, strip_thinking=not args.keep_thinking)
    count = write_jsonl(target, rows)
    print(f"wrote {count} rows to {target}")
    if args.phase_samples:
        samples = [int(value) for value in args.phase_samples.split(",")]
        targets = [target.with_name(f"phase{index}.jsonl") for index in range(len(samples))]
        write_phase_files(target, samples, targets, args.seed)
        print(f"wrote {', '.join(f'{t.name} ({n} rows)' for t, n in zip(targets, samples, strict=True))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
