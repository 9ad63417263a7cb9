"""Benchmark registry: loaders on the real files in shared/data, file and hub-style benchmarks, bad names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cascade_cli.errors import CascadeUsageError
from cascade_cli.evaluation import benchmarks as bm


def _shared() -> Path:
    root = bm.shared_data_dir()
    if root is None or not (root / "math500" / "test.jsonl").is_file():
        pytest.skip("shared/data not found beside the repository (set CASCADE_SHARED_DATA)")
    return root


@pytest.mark.parametrize(
    ("name", "count", "domain", "first_id"),
    [
        ("math500", 500, "math", "test/precalculus/807.json"),
        ("aime24", 30, "math", "2024-I-1"),
        ("aime25", 30, "math", "2025-I-1"),
        ("ifeval", 541, "if", "1000"),
        ("ifbench", 300, "if", "0"),
        ("code_stdio", 23, "code", "codecontests/codechef_a3"),
        ("humaneval", 164, "code", "HumanEval/0"),
    ],
)
def test_real_benchmark_loaders(name: str, count: int, domain: str, first_id: str) -> None:
    if name != "humaneval":
        _shared()
    rows = bm.BENCHMARKS[name].rows()
    assert len(rows) == count
    assert rows[0]["id"] == first_id
    assert len({row["id"] for row in rows}) == count
    for row in rows:
        assert row["domain"] == domain and row["label"] and isinstance(row["prompt"], str) and row["question"]


def test_real_labels_have_the_contract_shapes() -> None:
    _shared()
    aime = bm.BENCHMARKS["aime24"].rows()[0]
    assert (
        aime["label"] == {"answer": "204"}
        and "\\boxed{}" in aime["prompt"]
        and "\\boxed{204}" in aime["reference"]
    )
    ifeval = bm.BENCHMARKS["ifeval"].rows()[0]
    assert ifeval["label"]["instruction_id_list"][0] == "punctuation:no_comma"
    assert ifeval["label"]["kwargs"][1] == {"num_highlights": 3}
    assert bm.BENCHMARKS["ifeval"].mode == "no_think" and bm.BENCHMARKS["ifeval"].metric == "ifeval"
    human = bm.BENCHMARKS["humaneval"].rows()[0]
    assert human["label"]["kind"] == "assert" and human["label"]["entry_point"] == "has_close_elements"
    assert "def check(candidate)" in human["label"]["test"] and human["reference"].startswith("```python\n")
    stdio = {row["id"]: row for row in bm.BENCHMARKS["code_stdio"].rows()}
    apps = stdio["apps/train/0001"]
    assert apps["label"]["kind"] == "stdio" and len(apps["label"]["inputs"]) == len(apps["label"]["outputs"])
    assert "reference" in apps and "reference" not in stdio["codecontests/codechef_a3"]
    assert bm.BENCHMARKS["aime24"].default_k == 64


def test_shared_data_env_override(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "aime").mkdir()
    (tmp_path / "aime" / "aime24.jsonl").write_text(
        json.dumps({"id": "x", "problem": "1+1?", "answer": "2"}) + "\n"
    )
    monkeypatch.setenv(bm.SHARED_DATA_ENV, str(tmp_path))
    assert bm.shared_data_dir() == tmp_path
    assert [row["id"] for row in bm.BENCHMARKS["aime24"].rows()] == ["x"]
    with pytest.raises(CascadeUsageError, match=r"math500: data file .*math500/test.jsonl not found"):
        bm.BENCHMARKS["math500"].rows()


def test_unknown_benchmark_lists_the_known_ones() -> None:
    with pytest.raises(CascadeUsageError) as error:
        bm.resolve_benchmarks("math500,nope")
    message = str(error.value)
    assert "unknown benchmark 'nope'" in message
    for name in ("math500", "aime24", "aime25", "ifeval", "humaneval", "code_stdio", "tiny_math", "mcq:FILE"):
        assert name in message


def test_ifbench_file_scores_with_the_if_verifier(tmp_path: Path) -> None:
    from cascade_cli.verifiers import verify_batch

    path = tmp_path / "ifbench_prompts.jsonl"
    rows = [
        {"key": "7", "prompt": "Count in sevens.", "instruction_id_list": ["custom:multiples"], "kwargs": [{}]},
        {
            "key": "8",
            "prompt": "Name people.",
            "instruction_id_list": ["count:person_names", "ratio:stop_words"],
            "kwargs": [{"N": 2.0, "percentage": None}, {"N": None, "percentage": 40.0}],
        },
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    (bench,) = bm.resolve_benchmarks(f"ifbench:{path}")
    assert (bench.name, bench.domain, bench.metric, bench.mode) == ("ifbench:ifbench_prompts", "if", "ifeval", "no_think")
    loaded = bench.rows()
    assert [row["id"] for row in loaded] == ["7", "8"]
    assert loaded[1]["label"]["kwargs"] == [{"N": 2.0}, {"percentage": 40.0}]
    records = [
        {"response": "14, 21, 28, 35, 42, 49", "label": loaded[0]["label"]},
        {"response": "Emma greets Liam warmly.", "label": loaded[1]["label"]},
        {"response": "Emma is with the Emma of the town.", "label": loaded[1]["label"]},
    ]
    assert [score.reward for score in verify_batch(records, domain="if")] == [1.0, 1.0, 0.0]


def test_missing_benchmark_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "gpqa.jsonl"
    with pytest.raises(CascadeUsageError, match=f"benchmark file {missing}: not found"):
        bm.resolve_benchmarks(f"mcq:{missing}")
    with pytest.raises(CascadeUsageError, match=f"benchmark file {missing}: not found"):
        bm.resolve_benchmarks(None, benchmark_file=missing, domain="math")
    with pytest.raises(CascadeUsageError, match="needs --domain"):
        bm.resolve_benchmarks(None, benchmark_file=missing)
    with pytest.raises(CascadeUsageError, match="mcq needs a file"):
        bm.resolve_benchmarks("mcq")


def test_mcq_file_formats(tmp_path: Path) -> None:
    path = tmp_path / "mcq.jsonl"
    rows = [
        {
            "question_id": 7,
            "question": "2+2?",
            "options": ["3", "4", "5", "6"],
            "answer": "B",
            "answer_index": 1,
        },
        {
            "id": "g1",
            "Question": "Color of sky?",
            "Correct Answer": "blue",
            "Incorrect Answer 1": "red",
            "Incorrect Answer 2": "green",
            "Incorrect Answer 3": "black",
        },
        {"id": "c1", "question": "Pick x", "choices": {"A": "y", "B": "x"}, "answer": "x"},
        {"id": "i1", "question": "Zero-based", "choices": ["a", "b", "c"], "answer": 2},
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    (bench,) = bm.resolve_benchmarks(f"mcq:{path}")
    loaded = bench.rows()
    assert bench.domain == "mcq" and [row["id"] for row in loaded] == ["7", "g1", "c1", "i1"]
    assert loaded[0]["label"] == {"answer": "B", "num_choices": 4} and "B) 4" in loaded[0]["prompt"]
    gpqa = loaded[1]
    letter = gpqa["label"]["answer"]
    assert f"{letter}) blue" in gpqa["prompt"]  # the shuffled position of the correct answer
    assert gpqa == bm.resolve_benchmarks(f"mcq:{path}")[0].rows()[1]  # the shuffle is deterministic
    assert loaded[2]["label"]["answer"] == "B" and loaded[3]["label"]["answer"] == "C"
    assert all(row["reference"] == f"Answer: {row['label']['answer']}" for row in loaded)


def test_bad_rows_name_the_file_and_row(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(
        json.dumps({"question": "q", "options": ["a", "b"], "answer": "B"})
        + "\n"
        + json.dumps({"question": "q", "options": ["a", "b"], "answer": "Q"})
        + "\n"
    )
    with pytest.raises(CascadeUsageError, match=r"bad.jsonl: row 2: expected 'answer' as a letter A-B"):
        bm.resolve_benchmarks(f"mcq:{path}")[0].rows()
    path.write_text(json.dumps({"text": "no problem key"}) + "\n")
    with pytest.raises(CascadeUsageError, match=r"row 1: expected 'problem'"):
        bm.file_benchmark(path, "math").rows()
    with pytest.raises(CascadeUsageError, match=r"row 1: expected a canonical row"):
        bm.file_benchmark(path, "swe").rows()


def test_canonical_file_rows_pass_through(tmp_path: Path) -> None:
    path = tmp_path / "canon.jsonl"
    rows = [
        {
            "id": "a",
            "domain": "math",
            "prompt": "1+1? Put the answer in \\boxed{}.",
            "label": {"answer": "2"},
            "mode": "no_think",
        },
        {
            "id": "b",
            "domain": "math",
            "label": {"answer": "3"},
            "messages": [{"role": "user", "content": "1+2?"}, {"role": "assistant", "content": "3"}],
        },
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    loaded = bm.file_benchmark(path, "math").rows()
    assert loaded[0]["prompt"] == rows[0]["prompt"] and loaded[0]["mode"] == "no_think"
    assert loaded[1]["prompt"] == [{"role": "user", "content": "1+2?"}]  # the answer turn is dropped


def test_hub_spec_through_datasets_on_a_local_file(tmp_path: Path) -> None:
    path = tmp_path / "mini_math.jsonl"
    path.write_text(
        "".join(json.dumps({"problem": f"{i}+1?", "answer": str(i + 1)}) + "\n" for i in range(3))
    )
    (bench,) = bm.resolve_benchmarks(f"hf:{path}:test", domain="math")
    rows = bench.rows()
    assert [row["label"]["answer"] for row in rows] == ["1", "2", "3"]
    with pytest.raises(CascadeUsageError, match="needs --domain"):
        bm.resolve_benchmarks("hf:someone/dataset")


def test_tiny_suites_use_the_held_out_split() -> None:
    pytest.importorskip("cascade_cli.data.tiny_tasks")
    for name, domain in (("tiny_math", "math"), ("tiny_code", "code"), ("tiny_if", "if")):
        rows = bm.BENCHMARKS[name].rows()
        assert len(rows) == bm.TINY_EVAL_ROWS and all(row["domain"] == domain for row in rows)
        assert all("heldout" in row["id"] for row in rows)
