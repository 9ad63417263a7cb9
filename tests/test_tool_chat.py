"""Tool use in the chat format (paper §3.1.2): tools in the system prompt, `<tool_call>` assistant turns,
`tool` result turns; canonical SFT rows carry `tools`; `cascade sft` trains on assistant turns only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cascade_cli import chat
from cascade_cli.config.build import build_stage_config
from cascade_cli.config.sft import SFTConfig
from cascade_cli.data.formats import tool_call_text
from cascade_cli.data.io import load_canonical
from cascade_cli.data.prepare import build_prepare_config, run_prepare_data
from cascade_cli.data.tiny import tools as tiny_tools
from cascade_cli.engines.local.train.sft import run_sft
from cascade_cli.engines.local.train.sft_data import load_examples
from cascade_cli.manifest import read_metrics
from cascade_cli.models import loader

FIXTURES = Path(__file__).parent / "data" / "formats"


@pytest.fixture(scope="module")
def tokenizer(tiny_dir):
    return loader.load_tokenizer(str(tiny_dir))


def _prepare(tmp_path: Path, source: str, **values) -> Path:
    out = tmp_path / source.replace(":", "_").replace("/", "_")
    run_prepare_data(build_prepare_config({"source": source, "out": str(out), **values}))
    return out


def _trained_spans(tokenizer, ids: list[int], mask: list[bool]) -> list[str]:
    spans, current = [], []
    for token, keep in zip(ids, mask, strict=True):
        if keep:
            current.append(token)
        elif current:
            spans.append(tokenizer.decode(current))
            current = []
    if current:
        spans.append(tokenizer.decode(current))
    return spans


def test_tool_call_text_is_the_system_prompt_format():
    text = tool_call_text("add", {"a": 1, "b": 2})
    assert text == '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>'
    assert '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>' in (
        chat.tools_system_prompt([])
    )


def test_tiny_tools_rows_are_canonical_disjoint_and_mixed(tmp_path):
    out = _prepare(tmp_path, "tiny:tools", n=40, holdout=10)
    rows, heldout = load_canonical(out), load_canonical(out / "heldout.jsonl")
    assert len(rows) == 40 and len(heldout) == 10
    assert {row["mode"] for row in rows} == {"think", "no_think"}
    assert all(row["tools"] == tiny_tools.TOOLS for row in rows)
    train_prompts = {row["messages"][0]["content"] for row in rows}
    assert not train_prompts & {row["messages"][0]["content"] for row in heldout}
    calls = [row for row in rows if any(m["role"] == "tool" for m in row["messages"])]
    assert calls and len(calls) < len(rows)  # some rows answer without a tool
    row = calls[0]
    call = row["messages"][1]["content"]
    payload = json.loads(call[call.index("<tool_call>") + len("<tool_call>") : call.index("</tool_call>")])
    assert payload["name"] in {"add", "multiply", "get_weather"} and isinstance(payload["arguments"], dict)
    card = json.loads((out / "data_card.json").read_text())
    # the data card's lengths count the tools listing the model sees
    longest = max(len(chat.render_messages(r["messages"], r["mode"], tools=r["tools"])) for r in rows)
    assert max(stats["max"] for stats in card["length_chars"].values()) == longest


def test_sft_examples_mask_everything_but_assistant_turns(tmp_path, tokenizer):
    rows = load_canonical(_prepare(tmp_path, "tiny:tools", n=12))
    examples = load_examples(
        _prepare(tmp_path, "tiny:tools", n=12) / "data.jsonl", tokenizer, max_seq_len=4096
    )
    assert len(examples) == len(rows)
    for ids, mask, row in zip(examples.input_ids, examples.loss_mask, rows, strict=True):
        rendered = chat.render_messages(row["messages"], mode=row["mode"], tools=row["tools"])
        assert tokenizer.decode(ids) == rendered and "<tools>" in rendered
        expected = [m["content"] + chat.IM_END for m in row["messages"] if m["role"] == "assistant"]
        assert _trained_spans(tokenizer, ids, mask) == expected
        assert "<|im_start|>tool" not in "".join(_trained_spans(tokenizer, ids, mask))


def test_openai_tool_calls_train_as_assistant_turns(tmp_path, tokenizer):
    out = _prepare(tmp_path, str(FIXTURES / "openai_messages.jsonl"))
    examples = load_examples(out / "data.jsonl", tokenizer, max_seq_len=4096)
    spans = _trained_spans(tokenizer, examples.input_ids[0], examples.loss_mask[0])
    assert spans[0] == tool_call_text("get_weather", {"city": "Paris"}) + chat.IM_END
    assert len(spans) == 2 and "temp_c" not in "".join(spans)  # the tool result is context, not a target


def test_cascade_sft_trains_on_tool_conversations(tmp_path, tiny_dir):
    data = _prepare(tmp_path, "tiny:tools", n=16)
    out = tmp_path / "sft"
    config = build_stage_config(
        SFTConfig,
        {"init": str(tiny_dir), "data": str(data), "out": str(out)},
        ["batch_size=4", "lr=3e-3", "bf16=false", "max_steps=3", "max_seq_len=2048"],
    )
    metrics = run_sft(config)
    assert metrics["train/steps"] == 3 and len(read_metrics(out)) == 3
