"""prepare-data on real files: jsonl/json/parquet/folders, the hub path via `datasets` builders, --map,
normalisation, hold-out, the data card, load_canonical, and one-line errors for bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cascade_cli.data.io import load_canonical
from cascade_cli.data.normalize import last_boxed
from cascade_cli.data.prepare import build_prepare_config, fingerprint_files, run_prepare_data
from cascade_cli.data.sources import apply_field_map, iter_hub_rows, parse_field_map, parse_source
from cascade_cli.errors import CascadeUsageError

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = [
    {
        "qid": f"q{i}",
        "question": f"What is {i}+{i}?",
        "solution": f"Add them: \\boxed{{{2 * i}}}",
        "level": i % 3,
    }
    for i in range(1, 21)
]


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _prepare(tmp_path: Path, source: str | Path, *overrides: str, **values) -> tuple[dict, list[dict], Path]:
    out = tmp_path / "out"
    config = build_prepare_config({"source": str(source), "out": str(out), **values}, list(overrides))
    metrics = run_prepare_data(config)
    return metrics, load_canonical(out), out


def _run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, "-m", "cascade_cli", "prepare-data", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


# ---------------------------------------------------------------------------------------------------------
# reading local files and the hub path
# ---------------------------------------------------------------------------------------------------------


def test_jsonl_with_field_map_becomes_math_rows(tmp_path, cli):
    source = _write_jsonl(tmp_path / "qa.jsonl", QUESTIONS)
    out = tmp_path / "out"
    result = cli(
        ["prepare-data", "--source", source, "--out", out, "--map", "prompt=question,answer=solution,id=qid"]
    )
    assert result.exit_code == 0, result.output
    rows = load_canonical(out)
    assert len(rows) == 20
    assert rows[0] == {
        "id": "q1",
        "domain": "math",
        "prompt": "What is 1+1?",
        "label": {"answer": "2"},
        "mode": "think",
        "source": str(source),
    }
    card = json.loads((out / "data_card.json").read_text())
    assert card["counts"] == {
        "read": 20,
        "written": 20,
        "heldout": 0,
        "dropped_holdout_overlap": 0,
        "removed_by_filters": 0,
        "rejected": 0,
        "skipped": 0,
        "rejected_by_reason": {},
        "skipped_by_reason": {},
    }
    assert card["by_domain_mode"] == {"math": {"think": 20}}
    assert card["fingerprint"] == fingerprint_files([out / "data.jsonl"])
    manifest = json.loads((out / "cascade_stage.json").read_text())
    assert manifest["status"] == "completed" and manifest["metrics"]["rows"] == 20


def test_json_list_json_lines_and_parquet_give_the_same_rows(tmp_path):
    expected = None
    sources = {
        "list.json": lambda p: p.write_text(json.dumps(QUESTIONS)),
        "wrapped.json": lambda p: p.write_text(json.dumps({"data": QUESTIONS})),
        "lines.json": lambda p: _write_jsonl(p, QUESTIONS),
        "table.parquet": lambda p: pq.write_table(pa.Table.from_pylist(QUESTIONS), p),
    }
    for name, write in sources.items():
        path = tmp_path / name
        write(path)
        _, rows, _ = _prepare(
            tmp_path / name.replace(".", "_"), path, map={"prompt": "question", "answer": "solution"}
        )
        stripped = [{k: v for k, v in row.items() if k not in ("source", "id")} for row in rows]
        expected = expected or stripped
        assert stripped == expected, name
    assert len(expected) == 20 and expected[4]["label"] == {"answer": "10"}


def test_folder_source_reads_every_data_file_in_order(tmp_path):
    folder = tmp_path / "shards"
    folder.mkdir()
    _write_jsonl(folder / "a.jsonl", QUESTIONS[:5])
    pq.write_table(pa.Table.from_pylist(QUESTIONS[5:]), folder / "b.parquet")
    _, rows, _ = _prepare(tmp_path, folder, "map={prompt: question, answer: solution}")
    assert [row["prompt"] for row in rows] == [q["question"] for q in QUESTIONS]
    assert rows[0]["id"] == "a-1" and rows[5]["id"] == "b-1"


@pytest.mark.parametrize("builder", ["json", "parquet"])
def test_hub_path_through_datasets_builders(tmp_path, builder):
    path = tmp_path / f"data.{'jsonl' if builder == 'json' else 'parquet'}"
    if builder == "json":
        _write_jsonl(path, QUESTIONS)
    else:
        pq.write_table(pa.Table.from_pylist(QUESTIONS), path)
    raw = list(iter_hub_rows(builder, split="train", data_files=[str(path)]))
    assert raw[0] == (1, QUESTIONS[0]) and len(raw) == 20
    assert parse_source(builder).kind == "hub"
    metrics, rows, _ = _prepare(
        tmp_path, builder, f"data_files=[{path}]", "limit=7", map={"prompt": "question", "answer": "solution"}
    )
    assert metrics["rows"] == 7 and rows[6]["label"] == {"answer": "14"} and rows[0]["source"] == builder


def test_hub_errors_are_one_usage_line(tmp_path):
    with pytest.raises(CascadeUsageError, match="could not load dataset"):
        list(iter_hub_rows("json", data_files=[str(tmp_path / "missing.jsonl")]))


def test_real_benchmark_files_normalise_without_a_mapping(tmp_path, shared_data):
    _, rows, _ = _prepare(tmp_path / "math", shared_data / "math500" / "test.jsonl", limit=50)
    assert {r["domain"] for r in rows} == {"math"} and rows[0]["id"].startswith("test/")
    assert all(r["label"]["answer"] for r in rows)
    _, rows, _ = _prepare(tmp_path / "if", shared_data / "ifeval" / "input_data.jsonl")
    assert (
        len(rows) == 541
        and {r["domain"] for r in rows} == {"if"}
        and {r["mode"] for r in rows} == {"no_think"}
    )
    assert rows[0]["label"]["instruction_id_list"][0] == "punctuation:no_comma"
    _, rows, _ = _prepare(tmp_path / "code", shared_data / "code_stdio" / "problems.jsonl")
    assert {r["domain"] for r in rows} == {"code"} and {r["label"]["kind"] for r in rows} == {"stdio"}


def test_conversation_formats_become_sft_rows_with_inferred_mode(tmp_path):
    source = _write_jsonl(
        tmp_path / "chat.jsonl",
        [
            {
                "messages": [
                    {"role": "user", "content": "Hi"},
                    {"role": "assistant", "content": "<think>\nhm\n</think>\n\nHello"},
                ]
            },
            {"conversations": [{"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello"}]},
            {"instruction": "Greet", "input": "Bob", "output": "Hello Bob"},
            {"prompt": "Hi", "response": "Hello", "system": "Be brief."},
        ],
    )
    _, rows, _ = _prepare(tmp_path, source)
    assert [r["domain"] for r in rows] == ["sft"] * 4
    assert [r["mode"] for r in rows] == ["think", "no_think", "no_think", "no_think"]
    assert rows[1]["messages"] == [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
    ]
    assert rows[2]["messages"][0]["content"] == "Greet\n\nBob"
    assert rows[3]["messages"][0] == {"role": "system", "content": "Be brief."}


def test_preference_rows_and_mode_override(tmp_path):
    source = _write_jsonl(
        tmp_path / "pref.jsonl",
        [
            {"prompt": "2+2?", "chosen": "4", "rejected": "5"},
            {
                "chosen": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}],
                "rejected": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "go"}],
            },
        ],
    )
    _, rows, _ = _prepare(tmp_path, source, mode="no_think")
    assert [r["domain"] for r in rows] == ["pref", "pref"] and {r["mode"] for r in rows} == {"no_think"}
    assert rows[0]["chosen"] == "4" and rows[1]["chosen"][-1]["content"] == "Hello!"


def test_holdout_is_seeded_and_disjoint_even_with_duplicate_prompts(tmp_path):
    duplicated = QUESTIONS + [dict(q, qid=q["qid"] + "-again") for q in QUESTIONS[:10]]
    source = _write_jsonl(tmp_path / "dup.jsonl", duplicated)
    metrics, train, out = _prepare(
        tmp_path, source, holdout=6, seed=3, map={"prompt": "question", "answer": "solution"}
    )
    heldout = load_canonical(out / "heldout.jsonl")
    assert len(heldout) == 6
    assert not {r["prompt"] for r in train} & {r["prompt"] for r in heldout}
    assert metrics["rows"] + metrics["heldout"] + metrics["dropped_holdout_overlap"] == 30
    again = _prepare(
        tmp_path / "again", source, holdout=6, seed=3, map={"prompt": "question", "answer": "solution"}
    )
    assert again[0]["fingerprint"] == metrics["fingerprint"]


def test_tiny_source_writes_disjoint_heldout_and_card(tmp_path, cli):
    out = tmp_path / "math"
    result = cli(
        [
            "prepare-data",
            "--source",
            "tiny:math",
            "--out",
            out,
            "--n",
            "120",
            "--holdout",
            "30",
            "--seed",
            "4",
            "name=data_math",
        ]
    )
    assert result.exit_code == 0, result.output
    train, heldout = load_canonical(out, domain="math"), load_canonical(out / "heldout.jsonl")
    assert (len(train), len(heldout)) == (120, 30)
    assert not {r["prompt"] for r in train} & {r["prompt"] for r in heldout}
    card = json.loads((out / "data_card.json").read_text())
    assert card["heldout_by_domain_mode"] == {"math": {"think": 30}} and card["config"]["name"] == "data_math"
    assert card["length_chars"]["math/think"]["max"] < 512


def test_field_map_parsing_and_dotted_columns():
    assert parse_field_map("prompt=question, answer=meta.final") == {
        "prompt": "question",
        "answer": "meta.final",
    }
    mapped = apply_field_map(
        {"question": "q", "meta": {"final": 3}}, {"prompt": "question", "answer": "meta.final"}, "f"
    )
    assert mapped == {"prompt": "q", "meta": {"final": 3}, "answer": 3}
    with pytest.raises(CascadeUsageError, match="expected NAME=COLUMN"):
        parse_field_map("prompt")
    assert last_boxed("so \\boxed{\\frac{1}{2}} and \\boxed{3}") == "3"
    assert last_boxed("\\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"


# ---------------------------------------------------------------------------------------------------------
# bad input: one line, exit 2
# ---------------------------------------------------------------------------------------------------------


def _one_error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def test_bad_inputs_exit_2_with_one_line(tmp_path):
    line = _one_error_line(_run_cli("--source", "nope/missing.jsonl", "--out", "o", cwd=tmp_path))
    assert "nope/missing.jsonl: file not found" in line

    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(QUESTIONS[0]) + "\n" + json.dumps(QUESTIONS[1]) + '\n{"question": oops}\n')
    line = _one_error_line(
        _run_cli("--source", str(bad), "--out", "o", "--map", "prompt=question", cwd=tmp_path)
    )
    assert f"{bad}: row 3: malformed JSON" in line

    good = _write_jsonl(tmp_path / "good.jsonl", QUESTIONS)
    line = _one_error_line(
        _run_cli("--source", str(good), "--out", "o", "--map", "prompt=problem", cwd=tmp_path)
    )
    assert f"{good}: row 1: column 'problem' (mapped to 'prompt') not found" in line

    line = _one_error_line(_run_cli("--source", "tiny:math", "--out", "o", "colour=red", cwd=tmp_path))
    assert "colour" in line
    line = _one_error_line(_run_cli("--source", "tiny:chess", "--out", "o", cwd=tmp_path))
    assert "unknown tiny domain 'chess'" in line
    line = _one_error_line(_run_cli("--out", "o", cwd=tmp_path))
    assert "source: missing required value" in line


def test_rows_that_do_not_fit_name_the_row_and_key(tmp_path, cli):
    source = _write_jsonl(
        tmp_path / "if.jsonl",
        [
            {"prompt": "p", "instruction_id_list": ["punctuation:no_comma"]},
            {"prompt": "p", "instruction_id_list": "oops"},
        ],
    )
    result = cli(["prepare-data", "--source", source, "--out", tmp_path / "o"])
    assert result.exit_code == 2
    assert (
        f"{source}: row 2: 'label.instruction_id_list' must be a non-empty list of strings" in result.output
    )
    source = _write_jsonl(tmp_path / "math.jsonl", [{"prompt": "p", "answer": "1"}, {"prompt": "q"}])
    result = cli(["prepare-data", "--source", source, "--out", tmp_path / "o", "--domain", "math"])
    assert result.exit_code == 2 and "row 2: missing key 'answer'" in result.output


def test_load_canonical_names_file_row_and_key(tmp_path):
    rows = [
        {
            "id": "a",
            "domain": "math",
            "prompt": "1+1?",
            "label": {"answer": "2"},
            "mode": "think",
            "source": "t",
        },
        {
            "id": "b",
            "domain": "math",
            "prompt": "2+2?",
            "label": {"answer": 4},
            "mode": "think",
            "source": "t",
        },
    ]
    path = _write_jsonl(tmp_path / "rows.jsonl", rows)
    with pytest.raises(
        CascadeUsageError, match=r"rows.jsonl: row 2: 'label.answer' must be a string; found int"
    ):
        load_canonical(path)
    del rows[1]["label"]
    _write_jsonl(path, rows)
    with pytest.raises(CascadeUsageError, match=r"row 2: missing key 'label'"):
        load_canonical(path)
    rows[1] = {**rows[0], "id": "b", "mode": "fast"}
    _write_jsonl(path, rows)
    with pytest.raises(
        CascadeUsageError, match=r"row 2: 'mode' must be one of think, no_think; found 'fast'"
    ):
        load_canonical(path)
    # parquet stores nested labels as JSON strings or structs; both load
    table = pa.Table.from_pylist([{**rows[0], "label": json.dumps(rows[0]["label"])}])
    pq.write_table(table, tmp_path / "rows.parquet")
    assert load_canonical(tmp_path / "rows.parquet")[0]["label"] == {"answer": "2"}
    with pytest.raises(CascadeUsageError, match="has no data.jsonl"):
        load_canonical(tmp_path)
    (tmp_path / "rows.txt").write_text("")
    with pytest.raises(CascadeUsageError, match="expected a .jsonl, .json or .parquet file"):
        load_canonical(tmp_path / "rows.txt")


def test_dry_run_reads_and_validates_but_writes_nothing(tmp_path, cli):
    out = tmp_path / "out"
    result = cli(["prepare-data", "--source", "tiny:if", "--out", out, "--n", "20", "dry_run=true"])
    assert result.exit_code == 0, result.output
    assert "dry run" in result.output and not out.exists()
