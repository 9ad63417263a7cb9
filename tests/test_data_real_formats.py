"""The real public sets' formats (data/formats_real.py) on real rows copied from shared/data/real into
tests/data/real/: detection from the columns, the labels the real verifiers accept (reference answers score 1),
pairs from HH transcripts and OASST trees (ties dropped), prompt lists, the eval-only set refused; and the
prepare-data keys the smol recipe uses (keep_ids, offset, include, shared:REL)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cascade_cli.data.formats import FORMATS, convert_rows, detect_format
from cascade_cli.data.formats_real import gsm8k_solution
from cascade_cli.data.prepare import build_prepare_config, run_prepare_data
from cascade_cli.errors import CascadeUsageError
from cascade_cli.records import load_rows
from cascade_cli.verifiers import verify_batch

REAL = Path(__file__).parent / "data" / "real"


def _raw(name: str) -> list[dict]:
    return [json.loads(line) for line in (REAL / name).read_text().splitlines()]


def _prepare(tmp_path: Path, source: str | Path, **values) -> list[dict]:
    out = tmp_path / Path(str(source)).stem
    run_prepare_data(build_prepare_config({"source": str(source), "out": str(out), **values}))
    return load_rows(out)


@pytest.mark.parametrize(
    ("name", "fmt"),
    [("gsm8k_train.jsonl", "gsm8k"), ("mbpp.jsonl", "mbpp"), ("hh_rlhf.jsonl", "hh-rlhf"),
     ("oasst_tree.jsonl", "oasst-tree"), ("seed_tasks.jsonl", "prompts")],
)  # fmt: skip
def test_each_real_set_is_detected_from_its_columns(name: str, fmt: str):
    assert {detect_format(row).name for row in _raw(name)} == {fmt}


def test_gsm8k_answer_after_the_marks_and_the_solution_as_a_think_block(tmp_path: Path):
    solution, final = gsm8k_solution("Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n#### 1,072")
    assert (solution, final) == ("Natalia sold 48/2 = 24 clips in May.", "1072")
    math = _prepare(tmp_path, REAL / "gsm8k_train.jsonl")
    assert [row["label"]["answer"] for row in math] == ["72", "10", "5"]
    assert all(row["domain"] == "math" and "\\boxed{}" in row["prompt"] for row in math)
    sft = _prepare(tmp_path / "sft", REAL / "gsm8k_train.jsonl", domain="sft")
    answer = sft[0]["messages"][-1]["content"]
    assert sft[0]["mode"] == "think" and answer.startswith("<think>\n") and "<<" not in answer
    assert answer.endswith("The answer is $\\boxed{72}$.")
    scores = verify_batch([{"id": r["id"], "prompt": r["prompt"], "response": s["messages"][-1]["content"],
                            "label": r["label"], "domain": "math"} for r, s in zip(math, sft, strict=True)])  # fmt: skip
    assert all(score.passed for score in scores)


def test_mbpp_rows_pass_with_their_reference_code_and_pose_one_test(tmp_path: Path):
    code = _prepare(tmp_path, REAL / "mbpp.jsonl")
    sft = _prepare(tmp_path / "sft", REAL / "mbpp.jsonl", domain="sft")
    assert [row["id"] for row in code] == ["2", "56", "601", "367"]
    raw = {str(row["task_id"]): row for row in _raw("mbpp.jsonl")}
    for row in code:
        assert row["prompt"].count("assert ") == 1 and raw[row["id"]]["test_list"][0] in row["prompt"]
        assert row["label"]["test"].count("assert ") == len(raw[row["id"]]["test_list"])
    assert code[3]["label"]["test"].startswith("root = Node(1)")  # task 367's test_setup_code comes before the tests
    assert code[1]["label"]["entry_point"] == "check"  # the task's own `check` survives the harness's
    records = [{"id": r["id"], "prompt": r["prompt"], "response": s["messages"][-1]["content"], "label": r["label"],
                "domain": "code"} for r, s in zip(code, sft, strict=True)]  # fmt: skip
    assert [score.passed for score in verify_batch(records)] == [True] * 4
    wrong = [{**record, "response": "```python\ndef similar_elements(a, b):\n    return ()\n```"} for record in records[:1]]
    assert not verify_batch(wrong)[0].passed


def test_sanitized_mbpp_json_array(tmp_path: Path):
    rows = _prepare(tmp_path, REAL / "sanitized_mbpp.json")
    assert [row["domain"] for row in rows] == ["code", "code"] and rows[0]["label"]["kind"] == "assert"


def test_hh_pairs_share_the_context_and_ties_are_dropped(tmp_path: Path):
    rows = _prepare(tmp_path, REAL / "hh_rlhf.jsonl")
    assert len(rows) == 3  # 4 rows, one a tie
    first = rows[0]
    assert first["domain"] == "pref" and first["prompt"] == [
        {"role": "user", "content": "Do you know why turkeys became the official food of thanksgiving?"}
    ]
    assert first["chosen"].startswith("To be honest") and first["rejected"].startswith("I know that")
    multi = rows[1]["prompt"]
    assert [turn["role"] for turn in multi] == ["user", "assistant", "user", "assistant", "user"]
    # HH row 169: a turn's text holds "Humans:"; the split is at the last shared "Assistant:"
    assert "Humans:" in rows[2]["rejected"] and rows[2]["prompt"][-1]["role"] == "user"
    sft = _prepare(tmp_path / "sft", REAL / "hh_rlhf.jsonl", domain="sft", mode="no_think")
    assert sft[0]["messages"][-1] == {"role": "assistant", "content": first["chosen"]}
    assert {row["mode"] for row in sft} == {"no_think"}


def test_oasst_tree_gives_every_ranked_sibling_pair(tmp_path: Path):
    rows = _prepare(tmp_path, REAL / "oasst_tree.jsonl")
    assert len(rows) == 6 and len({row["id"] for row in rows}) == 6
    deep = [row for row in rows if len(row["prompt"]) >= 3]
    assert len(deep) == 3 and all(row["prompt"][-1]["role"] == "user" for row in rows)
    tree = _raw("oasst_tree.jsonl")[0]
    ranked = sorted((r for r in tree["prompt"]["replies"] if r.get("rank") is not None), key=lambda r: r["rank"])
    top = next(row for row in rows if len(row["prompt"]) == 1 and row["rejected"] == ranked[-1]["text"])
    assert top["chosen"] == ranked[0]["text"]  # rank 0 is the best


def test_prompt_lists_bare_strings_and_seed_tasks(tmp_path: Path):
    strings = _prepare(tmp_path, REAL / "prompt_strings.jsonl")
    assert [row["prompt"] for row in strings][0] == "Can you tell me about GLaDOS?"
    assert {row["domain"] for row in strings} == {"general"}
    seeds = _prepare(tmp_path / "s", REAL / "seed_tasks.jsonl")
    assert seeds[0]["id"] == "seed_task_0" and seeds[0]["prompt"].startswith("Is there anything I can eat")
    assert "\n\n" in seeds[1]["prompt"]  # the first instance's input follows the instruction


def test_the_eval_only_self_instruct_set_is_refused(tmp_path: Path):
    with pytest.raises(CascadeUsageError, match="evaluation only"):
        _prepare(tmp_path, REAL / "user_oriented.jsonl")


def test_a_plain_question_answer_row_keeps_the_generic_path():
    rows, domain = convert_rows({"question": "1+1?", "answer": "2"}, "auto")
    assert rows == [{"question": "1+1?", "answer": "2"}] and domain == "math"
    assert FORMATS["hh-rlhf"].domain == "pref"


def test_keep_ids_offset_include_and_shared_paths(tmp_path: Path, shared_data: Path, monkeypatch):
    kept = _prepare(tmp_path, REAL / "mbpp.jsonl", keep_ids=["1-56", "601"])
    assert [row["id"] for row in kept] == ["2", "56", "601"]
    sliced = _prepare(tmp_path / "o", REAL / "gsm8k_train.jsonl", offset=1, limit=1)
    assert [row["label"]["answer"] for row in sliced] == ["10"]
    mixed = _prepare(tmp_path / "m", REAL / "hh_rlhf.jsonl", domain="sft", include=[str(tmp_path / "o" / "gsm8k_train")])
    assert [row["domain"] for row in mixed] == ["sft"] * 3 + ["math"]
    monkeypatch.setenv("CASCADE_SHARED_DATA", str(shared_data))
    real = _prepare(tmp_path / "r", "shared:real/mbpp/mbpp.jsonl", keep_ids=["511-600"])
    assert len(real) == 90
    with pytest.raises(CascadeUsageError, match="not found"):
        _prepare(tmp_path / "x", "shared:real/nothing.jsonl")
    with pytest.raises(CascadeUsageError, match="keep_ids"):
        _prepare(tmp_path / "k", REAL / "mbpp.jsonl", keep_ids=["9-3"])
