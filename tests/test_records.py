"""The contracts in records.py: the rollout record, the one row loader and the one `last_boxed`."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cascade_cli.errors import CascadeUsageError
from cascade_cli.records import (
    DATA_FILE,
    HELDOUT_FILE,
    ROLLOUT_FIELDS,
    iter_rows,
    last_boxed,
    load_rows,
    prompt_text,
    resolve_rows_path,
    rollout_record,
    row_prompt,
)

ROWS = [
    {"id": "a", "domain": "math", "prompt": "1+1?", "label": {"answer": "2"}, "mode": "think", "source": "t"},
    {"id": "b", "domain": "math", "prompt": "2+2?", "label": {"answer": "4"}, "mode": "think", "source": "t"},
]


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_rollout_record_has_the_contract_fields_in_order():
    record = rollout_record(ROWS[0], "\\boxed{2}", domain="math", mode="think", finish_reason="stop")
    assert tuple(record) == ROLLOUT_FIELDS
    assert record == {
        "id": "a",
        "prompt": "1+1?",
        "response": "\\boxed{2}",
        "label": {"answer": "2"},
        "domain": "math",
        "mode": "think",
        "finish_reason": "stop",
    }
    chat_row = {"id": "c", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}]}
    record = rollout_record(chat_row, "y", domain="general", mode="no_think", finish_reason="length", record_id=7)
    assert record["id"] == 7 and record["prompt"] == chat_row["messages"] and record["label"] is None
    assert row_prompt(chat_row) == [{"role": "user", "content": "hi"}]
    assert prompt_text(row_prompt(chat_row)) == "hi" and prompt_text("plain") == "plain"


def test_load_rows_reads_jsonl_json_parquet_and_folders(tmp_path):
    jsonl = _write_jsonl(tmp_path / "rows.jsonl", ROWS)
    (tmp_path / "rows.json").write_text(json.dumps(ROWS))
    pq.write_table(pa.Table.from_pylist(ROWS), tmp_path / "rows.parquet")
    for name in ("rows.jsonl", "rows.json", "rows.parquet"):
        assert load_rows(tmp_path / name) == ROWS, name
    assert [number for number, _ in iter_rows(jsonl)] == [1, 2]

    folder = tmp_path / "prepared"
    folder.mkdir()
    _write_jsonl(folder / DATA_FILE, ROWS)
    _write_jsonl(folder / HELDOUT_FILE, ROWS[1:])
    assert load_rows(folder) == ROWS
    assert load_rows(folder, names=(HELDOUT_FILE, DATA_FILE)) == ROWS[1:]  # held-out rows first
    (folder / HELDOUT_FILE).unlink()
    assert resolve_rows_path(folder, names=(HELDOUT_FILE, DATA_FILE)) == folder / DATA_FILE
    parquet_folder = tmp_path / "parquet_only"
    parquet_folder.mkdir()
    pq.write_table(pa.Table.from_pylist(ROWS), parquet_folder / "data.parquet")
    assert load_rows(parquet_folder) == ROWS


def test_load_rows_errors_name_the_file_and_what_was_expected(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(ROWS[0]) + "\n{not json\n")
    with pytest.raises(CascadeUsageError, match=r"bad.jsonl: row 2: malformed JSON"):
        load_rows(bad)
    with pytest.raises(CascadeUsageError, match=r"missing.jsonl: file not found"):
        load_rows(tmp_path / "missing.jsonl")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CascadeUsageError, match=r"empty: directory has no heldout.jsonl or data.jsonl"):
        load_rows(empty, names=(HELDOUT_FILE, DATA_FILE))
    (tmp_path / "rows.txt").write_text("")
    with pytest.raises(CascadeUsageError, match=r"rows.txt: expected a .jsonl, .json or .parquet file, found '.txt'"):
        load_rows(tmp_path / "rows.txt")
    (tmp_path / "object.json").write_text("{}")
    with pytest.raises(CascadeUsageError, match=r"object.json: expected a JSON list of rows, found dict"):
        load_rows(tmp_path / "object.json")
    (tmp_path / "broken.parquet").write_bytes(b"not parquet")
    with pytest.raises(CascadeUsageError, match=r"broken.parquet: not a readable parquet file"):
        load_rows(tmp_path / "broken.parquet")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("no box here", None),
        ("so \\boxed{\\frac{1}{2}} and \\boxed{3}", "3"),
        ("\\boxed{\\frac{1}{2}}", "\\frac{1}{2}"),
        ("\\boxed{ 5 }", " 5 "),  # unstripped: callers strip when they compare
        ("\\fbox{7}", "7"),
        ("the answer is \\boxed 5.", "5"),
        ("\\boxed{\\{1, 2\\}}", "\\{1, 2\\}"),  # escaped braces do not close the group
        ("\\boxed{4} then \\boxed{unclosed", "4"),  # the last complete box wins
        ("\\boxed{" * 10_000, None),  # a flood of unclosed boxes stays fast and finds nothing
    ],
)
def test_last_boxed(text, expected):
    assert last_boxed(text) == expected


def test_a_malformed_row_is_named_by_row_and_column_in_json_and_json_lines(tmp_path):
    good, bad = '{"prompt": "a", "label": {"answer": "1"}}', '{"prompt": "b", "label": {"answer" "2"}}'
    for name, text, expected in (
        ("rows.jsonl", f"{good}\n{bad}\n", "rows.jsonl: row 2: malformed JSON (Expecting ':' delimiter at column 36)"),
        ("lines.json", f"{good}\n{bad}\n", "lines.json: row 2: malformed JSON (Expecting ':' delimiter at column 36)"),
        ("list.json", f"[{bad}]", "list.json: malformed JSON (Expecting ':' delimiter at line 1, column 37)"),
    ):
        (tmp_path / name).write_text(text)
        with pytest.raises(CascadeUsageError) as caught:
            load_rows(tmp_path / name)
        assert str(caught.value).endswith(expected)
