"""No source row lost without a word (rejected.jsonl, counts per reason, max_rejected) and the file layouts
users have: CSV/TSV/Parquet/JSON/JSONL by extension, a folder of Hub shards, TRL's prompt/completion and
preference layouts, numbers and booleans in text columns, `--map` targets checked."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cascade_cli.data.io import load_canonical
from cascade_cli.data.prepare import build_prepare_config, run_prepare_data
from cascade_cli.errors import CascadeUsageError

QA = [{"question": f"What is {i} + {i}?", "completion": 2 * i} for i in range(1, 9)]  # a numeric answer


def _prepare(tmp_path: Path, source: Path | str, *overrides: str, **values) -> tuple[list[dict], dict, Path]:
    out = tmp_path / "out"
    run_prepare_data(
        build_prepare_config({"source": str(source), "out": str(out), **values}, list(overrides))
    )
    return load_canonical(out), json.loads((out / "data_card.json").read_text()), out


def _write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return path


def _write_delimited(path: Path, rows: list[dict], delimiter: str) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), delimiter=delimiter)
        writer.writeheader()
        writer.writerows(rows)
    return path


def _answers(rows: list[dict]) -> list[str]:
    return [row["messages"][-1]["content"] for row in rows]


# ---- every file type by extension, numbers kept as text -------------------------------------------------


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".parquet", ".json", ".jsonl"])
def test_every_file_type_by_extension_keeps_numeric_answers_as_text(tmp_path, suffix):
    path = tmp_path / f"qa{suffix}"
    if suffix in (".csv", ".tsv"):
        _write_delimited(path, QA, "," if suffix == ".csv" else "\t")
    elif suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(QA), path)  # completion is an int64 column
    elif suffix == ".json":
        path.write_text(json.dumps(QA))
    else:
        _write_jsonl(path, QA)
    rows, card, _ = _prepare(tmp_path, path, map={"prompt": "question"})
    assert len(rows) == len(QA) and {row["domain"] for row in rows} == {"sft"}
    assert _answers(rows) == [str(2 * i) for i in range(1, 9)]  # not dropped: the numbers as text
    assert rows[0]["messages"][0] == {"role": "user", "content": "What is 1 + 1?"}
    assert card["counts"]["rejected"] == 0 and card["counts"]["read"] == len(QA)


def test_booleans_and_floats_in_text_columns_become_their_text(tmp_path):
    source = _write_jsonl(
        tmp_path / "b.jsonl",
        [{"prompt": "Is 3 odd?", "completion": True}, {"prompt": "Half of 5?", "completion": 2.5}],
    )
    rows, _, _ = _prepare(tmp_path, source)
    assert _answers(rows) == ["true", "2.5"]


def test_hub_shard_folder_reads_the_split_asked_for(tmp_path):
    data = tmp_path / "ultrachat" / "data"
    data.mkdir(parents=True)
    for index in range(2):  # the Hub's layout: data/train-00000-of-00002.parquet ...
        shard = [{"prompt": f"train {index}-{i}", "completion": f"answer {index}-{i}"} for i in range(3)]
        pq.write_table(pa.Table.from_pylist(shard), data / f"train-0000{index}-of-00002.parquet")
    (tmp_path / "ultrachat" / "dataset_info.json").write_text('{"features": {}}')  # beside data/, not data
    test_rows = [{"prompt": "test 0", "completion": "answer"}]
    pq.write_table(pa.Table.from_pylist(test_rows), data / "test-00000-of-00001.parquet")
    rows, _, _ = _prepare(tmp_path, tmp_path / "ultrachat")
    assert [row["messages"][0]["content"] for row in rows] == [
        f"train {s}-{i}" for s in range(2) for i in range(3)
    ]
    rows, _, _ = _prepare(tmp_path, tmp_path / "ultrachat", "split=test")
    assert [row["messages"][0]["content"] for row in rows] == ["test 0"]
    with pytest.raises(CascadeUsageError, match=r"no shards of split 'validation'; found splits test, train"):
        _prepare(tmp_path, tmp_path / "ultrachat", "split=validation")


# ---- TRL's layouts --------------------------------------------------------------------------------------


def test_trl_conversational_prompt_completion_keeps_the_completion(tmp_path):
    source = _write_jsonl(
        tmp_path / "trl.jsonl",
        [
            {
                "prompt": [{"role": "user", "content": "What color is the sky?"}],
                "completion": [{"role": "assistant", "content": "It is blue."}],
            },
            {"prompt": "The sky is", "completion": " blue."},
        ],
    )
    rows, _, _ = _prepare(tmp_path, source)
    assert rows[0]["messages"] == [
        {"role": "user", "content": "What color is the sky?"},
        {"role": "assistant", "content": "It is blue."},
    ]
    assert rows[1]["messages"][-1] == {"role": "assistant", "content": " blue."}
    assert {row["domain"] for row in rows} == {"sft"}


def test_trl_preference_layouts_standard_conversational_and_implicit_prompt(tmp_path):
    user = [{"role": "user", "content": "What color is the sky?"}]
    source = _write_jsonl(
        tmp_path / "pref.jsonl",
        [
            {"prompt": "The sky is", "chosen": " blue.", "rejected": " green."},
            {
                "prompt": user,
                "chosen": [{"role": "assistant", "content": "It is blue."}],
                "rejected": [{"role": "assistant", "content": "It is green."}],
            },
            {
                "chosen": [*user, {"role": "assistant", "content": "It is blue."}],
                "rejected": [*user, {"role": "assistant", "content": "It is green."}],
            },
        ],
    )
    rows, card, _ = _prepare(tmp_path, source)
    assert [row["domain"] for row in rows] == ["pref"] * 3
    from cascade_cli.data.io import pref_pair

    pairs = [pref_pair(row) for row in rows]
    assert pairs[0] == ([{"role": "user", "content": "The sky is"}], " blue.", " green.")
    assert pairs[1] == pairs[2] == (user, "It is blue.", "It is green.")
    assert card["counts"]["rejected"] == 0


# ---- rejections -----------------------------------------------------------------------------------------


def _mixed_source(tmp_path: Path) -> Path:
    rows: list = [{"problem": f"What is {i}*2?", "answer": str(2 * i)} for i in range(1, 19)]
    rows.insert(3, '{"problem": oops}')  # row 4: malformed JSON
    rows.insert(10, {"problem": "no answer here", "answer": None})  # row 11: math row without its answer
    return _write_jsonl(tmp_path / "mixed.jsonl", rows)


def test_rejected_rows_fail_by_default_naming_the_rows_and_are_written_out(tmp_path):
    source = _mixed_source(tmp_path)
    with pytest.raises(CascadeUsageError) as caught:
        _prepare(tmp_path, source, domain="math")
    message = str(caught.value)
    assert "2 of 20 source rows rejected (10.0%, more than max_rejected=0)" in message
    assert (
        f"{source}: row 4: malformed JSON" in message and f"{source}: row 11: missing key 'answer'" in message
    )
    records = [json.loads(line) for line in (tmp_path / "out" / "rejected.jsonl").read_text().splitlines()]
    assert [(r["row"], r["skipped"]) for r in records] == [(4, False), (11, False)]
    assert records[0]["source_row"] == '{"problem": oops}'
    assert records[1]["source_row"] == {"problem": "no answer here", "answer": None}


def test_max_rejected_allows_a_share_and_the_card_counts_each_reason(tmp_path, capsys):
    source = _mixed_source(tmp_path)
    rows, card, out = _prepare(tmp_path, source, "max_rejected=0.1", domain="math")
    assert len(rows) == 18 and card["counts"]["read"] == 20
    assert card["counts"]["rejected"] == 2 and card["files"]["rejected"] == "rejected.jsonl"
    reasons = card["counts"]["rejected_by_reason"]
    assert sum(reasons.values()) == 2 and len(reasons) == 2
    assert any(reason.startswith("malformed JSON") for reason in reasons)
    assert any(reason.startswith("missing key 'answer'") for reason in reasons)
    printed = capsys.readouterr()
    assert "rejected 1 row(s): malformed JSON" in printed.out + printed.err
    # 2 of 20 is 10%: a smaller allowance fails
    with pytest.raises(CascadeUsageError, match="more than max_rejected=0.05"):
        _prepare(tmp_path, source, "max_rejected=0.05", domain="math")


def test_preference_ties_are_skipped_and_listed_but_do_not_fail(tmp_path):
    tie = "\n\nHuman: Hi\n\nAssistant: Hello."
    source = _write_jsonl(
        tmp_path / "hh.jsonl",
        [
            {
                "chosen": "\n\nHuman: Hi\n\nAssistant: Hello!",
                "rejected": "\n\nHuman: Hi\n\nAssistant: Go away.",
            },
            {"chosen": tie, "rejected": tie},
        ],
    )
    rows, card, out = _prepare(tmp_path, source)
    assert len(rows) == 1
    assert card["counts"]["skipped"] == 1 and card["counts"]["rejected"] == 0
    record = json.loads((out / "rejected.jsonl").read_text())
    assert record["row"] == 2 and record["skipped"] is True and "tie" in record["reason"]


def test_csv_rows_with_extra_cells_or_an_empty_answer_are_rejected_by_row_number(tmp_path):
    source = tmp_path / "qa.csv"
    source.write_text('prompt,completion\n"a?",b\n"c?",d,EXTRA\n"e?",f\n"g?",\n')
    rows, card, out = _prepare(tmp_path, source, "max_rejected=0.5")
    assert _answers(rows) == ["b", "f"] and card["counts"]["rejected"] == 2
    records = [json.loads(line) for line in (out / "rejected.jsonl").read_text().splitlines()]
    assert [record["row"] for record in records] == [2, 4]
    assert "more cell(s) than the 2 columns" in records[0]["reason"]
    assert records[1]["reason"].startswith("column 'completion' is empty")  # not kept as a bare prompt


def test_rows_that_fit_nothing_are_rejected_not_dropped(tmp_path):
    source = _write_jsonl(tmp_path / "text.jsonl", [{"text": "just pretraining text"}])
    with pytest.raises(CascadeUsageError, match=r"row 1: missing key 'prompt'"):
        _prepare(tmp_path, source)


# ---- --map targets --------------------------------------------------------------------------------------


def test_map_target_typo_exits_2_with_a_did_you_mean(tmp_path, cli):
    source = _write_jsonl(tmp_path / "qa.jsonl", [{"prompt": "p", "completion": "c"}])
    result = cli(
        ["prepare-data", "--source", source, "--out", tmp_path / "o", "--map", "responze=completion"]
    )
    assert result.exit_code == 2
    assert "map: 'responze' is not a column prepare-data reads; did you mean 'response'?" in result.output
    assert not (tmp_path / "o" / "data.jsonl").exists()


def test_json_list_entry_that_is_not_an_object_is_rejected_by_row_number(tmp_path):
    source = tmp_path / "qa.json"
    source.write_text(
        json.dumps(
            [{"prompt": "a?", "completion": "b"}, ["not", "a", "row"], {"prompt": "c?", "completion": "d"}]
        )
    )
    rows, card, out = _prepare(tmp_path, source, "max_rejected=0.5")
    assert _answers(rows) == ["b", "d"]
    record = json.loads((out / "rejected.jsonl").read_text())
    assert record["row"] == 2 and record["reason"] == "expected a JSON object, found list"
