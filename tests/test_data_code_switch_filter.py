"""prepare-data drop_code_switch=true: rows whose answers switch language/script are dropped and counted."""

from __future__ import annotations

import json

from cascade_cli.data.code_switch_filter import drop_code_switched

ROWS = [
    {"id": "ok", "domain": "sft", "messages": [
        {"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "It is 4."}]},
    {"id": "cjk", "domain": "sft", "messages": [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "<think>\n我们需要计算二加二。\n</think>\n\nIt is 4."}]},
    {"id": "pair", "domain": "pref", "prompt": "Say hello politely.", "chosen": "Здравствуйте, как ваши дела сегодня?",
     "rejected": "hi"},
    {"id": "math", "domain": "sft", "messages": [
        {"role": "user", "content": "Solve x^2 = 4."},
        {"role": "assistant", "content": "$x = \\pm 2$, since $\\sqrt{4} = 2$ and $\\alpha$ is unused."}]},
]


def test_drops_switched_rows_and_keeps_math_notation():
    kept, report = drop_code_switched(ROWS)
    assert [row["id"] for row in kept] == ["ok", "math"]
    assert report["kept"] == 2 and sum(report["dropped"].values()) == 2
    assert report["dropped_examples"] == ["cjk", "pair"]


def test_prepare_data_flag_records_the_filter_in_the_card(tmp_path, cli):
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps({k: v for k, v in row.items() if k != "domain"} | {"domain": row["domain"]})
                              + "\n" for row in ROWS))
    result = cli(["prepare-data", "--source", source, "--out", tmp_path / "out", "drop_code_switch=true"])
    assert result.exit_code == 0, result.output
    card = json.loads((tmp_path / "out" / "data_card.json").read_text())
    (entry,) = [f for f in card["filters"] if f["name"] == "drop_code_switch"]
    assert entry["in"] == 4 and entry["out"] == 2
    ids = [json.loads(line)["id"] for line in (tmp_path / "out" / "data.jsonl").read_text().splitlines()]
    assert ids == ["ok", "math"]
