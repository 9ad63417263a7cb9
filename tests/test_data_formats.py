"""Source formats: every fixture in tests/data/formats/ (written from the public schemas) through prepare-data,
auto-detected and named with --format; the labels the real verifiers then accept; errors naming the column."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cascade_cli.data.formats import FORMATS, FormatError, convert_row, detect_format, tool_call_text
from cascade_cli.data.io import load_canonical
from cascade_cli.data.prepare import build_prepare_config, run_prepare_data
from cascade_cli.errors import CascadeUsageError
from cascade_cli.verifiers import verify_batch

FIXTURES = Path(__file__).parent / "data" / "formats"
# fixture -> (format it is detected as, domain of its rows)
EXPECTED = {
    "nemotron_sft.jsonl": ("nemotron-sft", "sft"),
    "nemotron_sft_swe.jsonl": ("nemotron-sft", "sft"),
    "nemotron_rl_math.jsonl": ("nemotron-rl-math", "math"),
    "nemotron_rl_if.jsonl": ("nemotron-rl-if", "if"),
    "nemotron_rl_swe.jsonl": ("nemotron-rl-swe", "swe"),
    "openai_messages.jsonl": ("openai", "sft"),
    "alpaca.jsonl": ("alpaca", "sft"),
    "sharegpt.jsonl": ("sharegpt", "sft"),
    "livecodebench.jsonl": ("livecodebench", "code"),
    "apps.jsonl": ("apps", "code"),
    "taco.jsonl": ("taco", "code"),
    # the real public sets (data/formats_real.py; real rows of shared/data/real)
    "gsm8k.jsonl": ("gsm8k", "math"),
    "mbpp.jsonl": ("mbpp", "code"),
    "hh_rlhf.jsonl": ("hh-rlhf", "pref"),
    "oasst_tree.jsonl": ("oasst-tree", "pref"),
    "prompts.jsonl": ("prompts", "general"),
    # TRL's prompt/completion layouts, conversational and standard (data/formats_trl.py)
    "trl_prompt_completion.jsonl": ("trl-prompt-completion", "sft"),
    # verl's RL parquet layout (data/formats_verl.py)
    "verl.jsonl": ("verl", "math"),
}


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / name).read_text().splitlines()]


def _prepare(tmp_path: Path, name: str, **values) -> list[dict]:
    out = tmp_path / name.replace(".jsonl", "")
    run_prepare_data(build_prepare_config({"source": str(FIXTURES / name), "out": str(out), **values}))
    return load_canonical(out)


def test_every_format_has_a_fixture_and_every_fixture_is_detected():
    assert {fmt for fmt, _ in EXPECTED.values()} == set(FORMATS)
    assert sorted(p.name for p in FIXTURES.glob("*.jsonl")) == sorted(EXPECTED)
    for name, (fmt, _) in EXPECTED.items():
        for row in _rows(name):
            detected = detect_format(row)
            assert detected is not None and detected.name == fmt, (name, row)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_prepares_to_canonical_rows_auto_and_named(tmp_path, name):
    fmt, domain = EXPECTED[name]
    auto = _prepare(tmp_path / "auto", name)
    named = _prepare(tmp_path / "named", name, format=fmt)
    assert auto == named
    assert len(auto) == len(_rows(name))
    assert {row["domain"] for row in auto} == {domain}


def test_nemotron_sft_modes_ids_and_reasoning_content(tmp_path):
    rows = {row["id"]: row for row in _prepare(tmp_path, "nemotron_sft.jsonl")}
    assert rows["sft-1"]["mode"] == "think" and rows["sft-2"]["mode"] == "no_think"
    assert rows["sft-1"]["source"] == "nemotron-cascade-sft-stage-1"
    answer = rows["sft-3"]["messages"][-1]["content"]  # reasoning_content folded into a think block
    assert answer == "<think>\n11 has no divisors but 1 and 11.\n</think>\n\n11"
    assert rows["sft-3"]["mode"] == "think"


def test_openai_tool_calls_become_tool_call_turns_and_tools_are_kept(tmp_path):
    row = {r["id"]: r for r in _prepare(tmp_path, "openai_messages.jsonl")}["oa-1"]
    assert row["tools"][0]["function"]["name"] == "get_weather"
    roles = [m["role"] for m in row["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant"]
    call = row["messages"][1]["content"]
    assert call.startswith("<tool_call>\n") and call.endswith("\n</tool_call>")
    assert json.loads(call.split("\n")[1]) == {"name": "get_weather", "arguments": {"city": "Paris"}}


def test_rl_labels_are_what_the_verifiers_check(tmp_path):
    math = {r["id"]: r for r in _prepare(tmp_path, "nemotron_rl_math.jsonl")}
    assert [r["label"]["answer"] for r in math.values()] == ["55", "\\frac{3}{4}"]
    ifrows = _prepare(tmp_path, "nemotron_rl_if.jsonl")
    assert ifrows[1]["label"]["kwargs"] == [{"relation": "at least", "num_words": 40}, {}]
    swe = _prepare(tmp_path, "nemotron_rl_swe.jsonl")
    assert [sorted(r["label"]["original_files"]) for r in swe] == [["calc.py"], ["calc.py"]]
    # The golden patch applied to the relevant files is an exact match for the SWE verifier.
    records = [
        {
            "id": r["id"],
            "prompt": r["prompt"],
            "response": r["label"]["golden_patch"],
            "label": r["label"],
            "domain": "swe",
            "mode": "think",
            "finish_reason": "stop",
        }
        for r in swe
    ]
    assert all(score.reward == 1.0 for score in verify_batch(records))


def test_code_formats_decode_tests_and_pass_reference_solutions(tmp_path):
    lcb = {r["id"]: r for r in _prepare(tmp_path, "livecodebench.jsonl")}
    stdio, call = lcb["abc000_a"]["label"], lcb["lc-9001"]["label"]
    # public tests plus the compressed private ones (base64 + zlib + pickle of a JSON string)
    assert stdio == {"kind": "stdio", "inputs": ["1 2\n", "5 7\n"], "outputs": ["3\n", "12\n"]}
    assert call["kind"] == "call" and call["fn_name"] == "add" and len(call["inputs"]) == 2
    apps = {r["id"]: r for r in _prepare(tmp_path, "apps.jsonl")}
    assert apps["4002"]["label"]["outputs"] == [2, 10]  # APPS wraps call results in one-element lists
    solutions = [
        (lcb["abc000_a"], "a, b = map(int, input().split())\nprint(a + b)"),
        (lcb["lc-9001"], "class Solution:\n    def add(self, a, b):\n        return a + b"),
        (apps["4001"], "print(int(input()) ** 2)"),
        (apps["4002"], "def double(x):\n    return 2 * x"),
        (_prepare(tmp_path, "taco.jsonl")[0], "print(input()[::-1])"),
    ]
    records = [
        {
            "id": row["id"],
            "prompt": row["prompt"],
            "response": f"```python\n{code}\n```",
            "label": row["label"],
            "domain": "code",
            "mode": "think",
            "finish_reason": "stop",
        }
        for row, code in solutions
    ]
    wrong = {**records[0], "response": "```python\nprint(0)\n```"}
    scores = verify_batch([*records, wrong])
    assert [s.passed for s in scores] == [True] * len(records) + [False]


def test_a_row_missing_a_column_of_its_named_format_names_the_column(tmp_path):
    source = tmp_path / "bad.jsonl"
    source.write_text(json.dumps({"question_content": "Print 1.", "metadata": "{}"}) + "\n")
    with pytest.raises(
        CascadeUsageError, match=r"bad.jsonl: row 1: format livecodebench: missing column 'public_test_cases'"
    ):
        run_prepare_data(
            build_prepare_config(
                {"source": str(source), "out": str(tmp_path / "o"), "format": "livecodebench"}
            )
        )
    with pytest.raises(FormatError, match="missing column 'prompt' or 'problem_statement'"):
        convert_row({"golden_patch": "diff", "original_files": {}}, "nemotron-rl-swe")
    with pytest.raises(FormatError, match="missing column 'answer' or 'expected_answer'"):
        convert_row({"problem": "1+1?"}, "nemotron-rl-math")


def test_unknown_format_and_malformed_columns_are_usage_errors(tmp_path, cli):
    source = FIXTURES / "alpaca.jsonl"
    result = cli(["prepare-data", "--source", source, "--out", tmp_path / "o", "--format", "csvish"])
    assert result.exit_code == 2 and "format: expected auto or one of" in result.output
    assert "helpsteer" in result.output and "livecodebench" in result.output
    result = cli(["prepare-data", "--source", "tiny:math", "--out", tmp_path / "o", "--format", "apps"])
    assert result.exit_code == 2 and "--format apps: applies to files and hub datasets" in result.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"question": "q", "input_output": "{not json"}) + "\n")
    result = cli(["prepare-data", "--source", bad, "--out", tmp_path / "o", "--format", "apps"])
    assert result.exit_code == 2 and "column 'input_output': not valid JSON" in result.output


def test_canonical_rows_and_unclaimed_shapes_keep_the_generic_path():
    canonical = {"id": "x", "domain": "math", "prompt": "1+1?", "label": {"answer": "2"}}
    assert convert_row(canonical, "auto") == (canonical, None)
    odd = {"text": "hello"}
    assert detect_format(odd) is None


def test_tool_calls_in_sharegpt_and_in_canonical_rows_are_written_into_the_chat_format():
    call = {"name": "add", "arguments": {"a": 1, "b": 2}}
    sharegpt = {
        "conversations": [
            {"from": "human", "value": "1+2?"},
            {"from": "function_call", "value": json.dumps(call)},
            {"from": "observation", "value": "3"},
            {"from": "gpt", "value": "3"},
        ]
    }
    row, domain = convert_row(sharegpt, "auto")
    assert domain == "sft" and [m["role"] for m in row["messages"]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    assert row["messages"][1]["content"] == tool_call_text("add", {"a": 1, "b": 2})
    canonical = {
        "id": "c",
        "domain": "sft",
        "mode": "no_think",
        "messages": [
            {"role": "user", "content": "1+2?"},
            {"role": "assistant", "content": None, "tool_calls": [{"function": {**call, "arguments": "{}"}}]},
        ],
    }
    row, domain = convert_row(canonical, "auto")
    assert domain is None and row["messages"][1]["content"] == tool_call_text("add", {})


def test_livecodebench_private_tests_refuse_pickled_objects():
    import base64
    import pickle
    import zlib

    payload = base64.b64encode(zlib.compress(pickle.dumps(Path("/etc/passwd")))).decode()
    row = {"question_content": "q", "public_test_cases": "[]", "private_test_cases": payload}
    with pytest.raises(FormatError, match="refusing to load"):
        convert_row(row, "livecodebench")
