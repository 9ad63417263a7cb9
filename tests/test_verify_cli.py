"""`cascade verify`: scoring rollout files through the registry, summaries, bad rows, options."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cascade_cli import verifiers
from cascade_cli.cli import app
from cascade_cli.verifiers.file_scoring import parse_options
from cascade_cli.verifiers.swe import preimage_from_patch

sys.path.insert(0, str(Path(__file__).parent))
import echo_verifier  # noqa: E402
from real_reward_cases import CASES, code_options, rollout_rows  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def echo_domain():
    verifiers.register("echo", echo_verifier.TARGET)
    yield
    verifiers._REGISTRY.pop("echo", None)


def write_rows(path: Path, rows: list) -> Path:
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return path


def rollout(i: int, response: str, expected: str, **extra) -> dict:
    return {
        "id": f"r{i}",
        "prompt": "say it",
        "response": response,
        "label": {"expected": expected},
        "domain": "echo",
        "mode": "think",
        "finish_reason": "stop",
        **extra,
    }


def invoke(*args: str):
    return CliRunner().invoke(app, ["verify", *args], catch_exceptions=False)


def test_scores_rows_in_order_with_summary_json(tmp_path):
    rows = [rollout(i, f"<think>hmm</think>{'yes' if i % 3 else 'no'}", "yes") for i in range(30)]
    source = write_rows(tmp_path / "rollouts.jsonl", rows)
    result = invoke("--input", str(source), "--output", str(tmp_path / "scored.jsonl"), "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["count"] == 30 and summary["errors"] == 0
    assert summary["passed"] == 20 and summary["pass_rate"] == pytest.approx(20 / 30)
    assert summary["mean_reward"] == pytest.approx(20 / 30)
    assert summary["latency_ms_p95"] >= summary["latency_ms_p50"] > 0 and summary["rows_per_s"] > 0
    scored = [json.loads(line) for line in (tmp_path / "scored.jsonl").read_text().splitlines()]
    assert [row["id"] for row in scored] == [f"r{i}" for i in range(30)]
    assert [row["reward"] for row in scored] == [float(i % 3 != 0) for i in range(30)]
    assert scored[1]["details"] == {"answer": "yes"} and scored[1]["row"] == 2 and scored[1]["latency_ms"] > 0


def test_workers_keep_row_order_and_match_one_worker(tmp_path):
    rows = [rollout(i, str(i % 7), "3") for i in range(200)]
    source = write_rows(tmp_path / "r.jsonl", rows)
    assert invoke("-i", str(source), "-o", str(tmp_path / "one.jsonl"), "--json").exit_code == 0
    assert invoke("-i", str(source), "-o", str(tmp_path / "two.jsonl"), "--json", "-w", "2").exit_code == 0

    def strip(path):
        return [{k: v for k, v in json.loads(line).items() if k != "latency_ms"} for line in path.open()]

    assert strip(tmp_path / "one.jsonl") == strip(tmp_path / "two.jsonl")
    assert sum(row["passed"] for row in strip(tmp_path / "two.jsonl")) == len(
        [i for i in range(200) if i % 7 == 3]
    )


def test_bad_rows_are_row_errors_and_fail_only_with_strict(tmp_path):
    rows = [
        rollout(1, "a", "a"),
        {"id": "no-response", "label": {"expected": "a"}, "domain": "echo"},
        {"id": "no-label", "response": "a", "domain": "echo"},
        rollout(4, "a", "a") | {"label": ["not", "an", "object"]},
        "{not json",
        rollout(6, "a", "a") | {"domain": "nosuch"},
        [1, 2],
        rollout(8, "b", "b"),
    ]
    source = write_rows(tmp_path / "bad.jsonl", rows)
    result = invoke("-i", str(source), "-o", str(tmp_path / "out.jsonl"), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["errors"] == 6
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").open()]
    assert [row["row"] for row in out] == [1, 2, 3, 4, 5, 6, 7, 8]
    errors = {row["row"]: row.get("error") for row in out}
    assert errors[1] is None and errors[8] is None and out[7]["reward"] == 1.0
    assert errors[2] == "bad.jsonl: row 2: missing field 'response'"
    assert errors[3] == "bad.jsonl: row 3: missing field 'label'"
    assert errors[4].startswith(
        "bad.jsonl: row 4: label of the wrong shape for domain 'echo': expected an object"
    )
    assert errors[5].startswith("bad.jsonl: row 5: malformed JSON")
    assert "row 6: unknown domain 'nosuch'" in errors[6]
    assert "row 7: expected a JSON object" in errors[7]

    strict = invoke("-i", str(source), "--strict")
    assert strict.exit_code == 2
    assert "6 bad row(s)" in strict.output and "row 2: missing field 'response'" in strict.output
    # The rich summary (not --json) names the bad rows too.
    assert "bad.jsonl: row 3" in invoke("-i", str(source)).output


def test_options_reach_the_verifier(tmp_path):
    source = write_rows(tmp_path / "r.jsonl", [rollout(1, "a", "a")])
    result = invoke("-i", str(source), "-d", "echo", "--option", "bonus=0.5", "--json")
    assert json.loads(result.stdout)["mean_reward"] == 1.5
    result = invoke("-i", str(source), "--option", "echo.bonus=0.25", "--json")
    assert json.loads(result.stdout)["mean_reward"] == 1.25
    assert parse_options(["code.all_tests=true", "timeout_s=2"], "math") == {
        "code": {"all_tests": True},
        "math": {"timeout_s": 2},
    }


def test_usage_errors_exit_2(tmp_path):
    source = write_rows(tmp_path / "r.jsonl", [rollout(1, "a", "a")])
    result = invoke("-i", str(source), "-d", "nosuch")
    assert result.exit_code == 2 and "unknown domain 'nosuch'" in result.output
    result = invoke("-i", str(source), "-d", "echo", "--option", "nope=1")
    assert result.exit_code == 2 and "bad option for the 'echo' verifier" in result.output
    assert invoke("-i", str(tmp_path / "missing.jsonl")).exit_code == 2
    assert "--input is required" in invoke().output
    assert invoke("-i", str(source), "--option", "x").exit_code == 2


def test_code_flags_become_code_options():
    from cascade_cli.cli import _verify_options

    assert _verify_options([], None, True, True) == {"code": {"unsafe_no_sandbox": True, "all_tests": True}}


def test_swe_rollouts_through_the_cli_subprocess(tmp_path):
    """The real SWE verifier, through `python -m cascade_cli verify` in a subprocess."""
    golden = "--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,3 @@\n def f(x):\n-    return x - 1\n+    return x + 1\n \n"
    label = {"golden_patch": golden, "original_files": preimage_from_patch(golden)}
    responses = [
        f"<think>sign</think>\n```diff\n{golden}```",  # 1
        golden.replace("x + 1", "x + 2"),  # similarity in (0, 1)
        "no idea",  # -1
        golden.replace("+    return x + 1", "+    return x - 1"),  # changes nothing: 0
    ]
    rows = [
        {
            "id": str(i),
            "prompt": "fix",
            "response": r,
            "label": json.dumps(label),
            "domain": "swe",
            "mode": "think",
            "finish_reason": "stop",
        }
        for i, r in enumerate(responses)
    ]
    source = write_rows(tmp_path / "swe.jsonl", rows)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cascade_cli",
            "verify",
            "-i",
            str(source),
            "-o",
            str(tmp_path / "o.jsonl"),
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    rewards = [json.loads(line)["reward"] for line in (tmp_path / "o.jsonl").open()]
    assert rewards[0] == 1.0 and 0 < rewards[1] < 1 and rewards[2] == -1.0 and rewards[3] == 0.0
    assert json.loads(proc.stdout)["count"] == 4
    human = subprocess.run(
        [sys.executable, "-m", "cascade_cli", "verify", "-i", str(source)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert human.returncode == 0 and "pass rate" in human.stdout and "25.00%" in human.stdout


def test_help_has_an_example():
    result = CliRunner().invoke(app, ["verify", "--help"])
    assert result.exit_code == 0 and "Example:" in result.output and "--serve" in result.output


def test_real_verifiers_score_known_right_and_wrong_responses(tmp_path):
    """Math, IF, code (sandboxed where possible) and SWE rows in one file, each through its real verifier."""
    source = write_rows(tmp_path / "mixed.jsonl", rollout_rows())
    flags = ["--option", "code.workers=2"]
    if code_options()["code"].get("unsafe_no_sandbox"):
        flags.append("--unsafe-no-sandbox")
    result = invoke("-i", str(source), "-o", str(tmp_path / "out.jsonl"), "--json", "--strict", *flags)
    assert result.exit_code == 0, result.output
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").open()]
    assert [row["reward"] for row in out] == [expected for *_, expected in CASES]
    assert all("error" not in row and row["latency_ms"] > 0 for row in out)
    summary = json.loads(result.stdout)
    assert summary["count"] == len(CASES) and summary["errors"] == 0
    assert summary["passed"] == sum(expected == 1.0 for *_, expected in CASES)


def test_real_verifiers_report_bad_labels_per_row(tmp_path):
    rows = [
        {
            "id": "a",
            "response": "x",
            "domain": "if",
            "label": {"instruction_id_list": ["nosuch:thing"], "kwargs": [{}]},
        },
        {"id": "b", "response": "x", "domain": "math", "label": {"answer": None}},
        {"id": "c", "response": "x", "domain": "swe", "label": {"golden_patch": "x"}},
        {"id": "d", "response": "\\boxed{2}", "domain": "math", "label": json.dumps({"answer": "2"})},
    ]
    source = write_rows(tmp_path / "bad.jsonl", rows)
    result = invoke("-i", str(source), "-o", str(tmp_path / "out.jsonl"), "--strict")
    assert result.exit_code == 2 and "3 bad row(s)" in result.output
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").open()]
    assert "row 1: label of the wrong shape for domain 'if'" in out[0]["error"]
    assert "unknown instruction id 'nosuch:thing'" in out[0]["error"]
    assert "row 2: label of the wrong shape for domain 'math'" in out[1]["error"]
    assert "row 3: label of the wrong shape for domain 'swe'" in out[2]["error"]
    assert out[3]["reward"] == 1.0 and "error" not in out[3]
