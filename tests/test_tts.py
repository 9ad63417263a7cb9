"""`cascade tts code` / `cascade tts swe`: the Tail-10 pick, feedback prompts, the N cap, round reports,
SWE filtering / majority vote / tie-break, and real runs through the CLI (real sandbox, real tiny model)."""

from __future__ import annotations

import json

import pytest

from cascade_cli.engines.local.rollout.generation import Completion
from cascade_cli.tts.code import CodeTTSSettings, allocate, run_code_tts
from cascade_cli.tts.problems import Submission, feedback_text, public_label, round_prompt
from cascade_cli.tts.select import Candidate, normalise_code, select_submission
from cascade_cli.tts.swe import Instance, majority_vote, normalised_patch, run_swe_tts

# ---- Tail-10 ---------------------------------------------------------------------------------------------


def cand(index: int, code: str, mean_logprob: float, tokens: int = 10) -> Candidate:
    return Candidate(index, code, mean_logprob * tokens, tokens)


def test_tail10_keeps_the_top_tenth_by_confidence_then_votes():
    # 20 candidates: the top 10% is two. The most common code overall ("c") is not among them.
    candidates = [cand(i, "c", -2.0) for i in range(17)]
    candidates += [cand(17, "a", -0.1), cand(18, "b", -0.2), cand(19, "b", -0.3)]
    assert select_submission(candidates, set()).code == "a"
    # Two kept codes that agree outvote a slightly more confident single one.
    candidates = [cand(0, "x", -0.10), cand(1, "y", -0.11), cand(2, "y", -0.12)] + [
        cand(i, "z", -3.0) for i in range(3, 10)
    ]
    assert select_submission(candidates, set(), keep_fraction=0.3).code == "y"


def test_tail10_never_resubmits_and_ties_go_to_the_shorter_code():
    candidates = [cand(0, "def f(x):\n    return x + 1  ", -0.1), cand(1, "def f(x): return x+2", -0.5)]
    assert select_submission(candidates, {normalise_code("def f(x):\n    return x + 1")}).index == 1
    assert select_submission(candidates, {normalise_code(c.code) for c in candidates}) is None
    tied = [cand(0, "long code here", -0.2), cand(1, "short", -0.2)]
    assert select_submission(tied, set()).code == "short"
    no_logprobs = [Candidate(0, "abc", None, 3), Candidate(1, "ab", None, 2)]
    assert select_submission(no_logprobs, set()).code == "ab"


# ---- public tests and feedback -------------------------------------------------------------------------

ASSERT_LABEL = {
    "kind": "assert",
    "test": "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(5) == 6\n",
    "entry_point": "f",
}


def test_public_tests_first_k_explicit_or_none():
    stdio = {"prompt": "p", "label": {"kind": "stdio", "inputs": ["1\n", "2\n", "3\n"], "outputs": ["1\n", "4\n", "9\n"]}}
    assert public_label(stdio, 2)["inputs"] == ["1\n", "2\n"]
    assert public_label({**stdio, "public_tests": 1}, 2)["outputs"] == ["1\n"]
    explicit = {"kind": "stdio", "inputs": ["7\n"], "outputs": ["49\n"]}
    assert public_label({**stdio, "label": {**stdio["label"], "public_tests": explicit}}, 2) == explicit
    assert public_label({"label": ASSERT_LABEL}, 1)["test"] == "def check(candidate):\n    assert candidate(1) == 2\n"
    loop = {**ASSERT_LABEL, "test": "def check(candidate):\n    for x in range(3):\n        assert candidate(x) == x + 1\n"}
    assert public_label({"label": loop}, 1) is None
    assert public_label({"label": ASSERT_LABEL}, 0) is None


def test_feedback_shows_the_last_five_failures_with_verdicts_and_sibling_code():
    failed = [Submission(f"def f(x):\n    return {i}", "wrong_answer", i % 3, 4) for i in range(7)]
    text = feedback_text(failed, {"sub-1": "def g(x):\n    return x"})
    assert text.count("Submission ") == 5
    assert "return 0" not in text and "return 1" not in text and "return 6" in text
    assert "verdict: wrong_answer, passed 0 of 4 tests" in text  # the submission `return 6`
    assert "Subtask sub-1:\n```python\ndef g(x):\n    return x\n```" in text
    assert feedback_text([], {}) == ""
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "solve it"}]
    prompt = round_prompt({"messages": messages}, failed[:1], {})
    assert prompt[1]["content"].startswith("solve it\n\nYour earlier submissions failed:")
    assert messages[1]["content"] == "solve it"  # the row is not changed


# ---- the round loop (scripted responses, real sandbox) ---------------------------------------------------


def test_allocate_caps_generations():
    assert allocate(10, 3, 4) == [4, 4, 2]
    assert allocate(3, 2, 4) == [3, 0]
    assert allocate(0, 2, 4) == [0, 0]


def reply(code: str) -> Completion:
    return Completion(f"<think>\nok\n</think>\n\n```python\n{code}\n```", [1] * 8, "stop", -4.0)


def test_rounds_feedback_siblings_and_the_n_cap():
    rows = [
        {"id": "p1-a", "problem": "p1", "prompt": "Write f(x) returning x + 1.", "label": ASSERT_LABEL},
        {"id": "p1-b", "problem": "p1", "prompt": "Write f(x) returning x + 1, again.", "label": ASSERT_LABEL},
    ]
    prompts_seen: list[list[str]] = []
    counts_seen: list[list[int]] = []

    def sample(prompts: list[str], counts: list[int]) -> list[list[Completion]]:
        prompts_seen.append(prompts)
        counts_seen.append(counts)
        round_number = len(prompts_seen)
        out = []
        for prompt, n in zip(prompts, counts, strict=True):
            if "again" in prompt and round_number < 3:
                # passes the public test (f(1) == 2) but not the hidden one (f(5) == 6); a new one per round
                out.append([reply(f"def f(x):\n    return 2 if x == 1 else {round_number}")] * n)
            else:
                out.append([reply("print('no function')")] + [reply("def f(x):\n    return x + 1")] * (n - 1))
        return out

    result = run_code_tts(rows, sample, CodeTTSSettings(rounds=5, generations=3, max_generations=8, public_tests=1))
    assert counts_seen == [[3, 3], [2]]  # 8 generations in all: round 2 gets what is left
    assert result["generations"] == 8
    first, second = result["rounds"]
    assert (first["with_code"], first["passed_public"], first["submitted"], first["accepted"]) == (6, 5, 2, 1)
    assert (first["solved"], first["score"], second["score"]) == (1, 50.0, 50.0)
    assert result["pass_at_1"] == pytest.approx(100 * (2 / 3) / 2, abs=0.01) and result["pass_at_g"] == 50.0
    # Round 2's prompt for p1-b: its failed submission with the hidden verdict, and p1-a's accepted code.
    feedback = prompts_seen[1][0]
    assert "return 2 if x == 1 else 1" in feedback and "verdict: wrong_answer" in feedback
    assert "Subtask p1-a:" in feedback and "return x + 1" in feedback
    problems = {p["id"]: p for p in result["problems"]}
    assert problems["p1-a"]["solved_round"] == 1 and problems["p1-b"]["solved_round"] is None
    assert [f["verdict"] for f in problems["p1-b"]["failed"]] == ["wrong_answer", "wrong_answer"]

    prompts_seen.clear()
    counts_seen.clear()
    plain = CodeTTSSettings(rounds=2, generations=3, max_generations=8, public_tests=1, feedback=False)
    run_code_tts(rows, sample, plain)
    assert "earlier submissions" not in prompts_seen[1][0] and "Subtask" not in prompts_seen[1][0]


# ---- SWE: filter, majority vote, tie-break ---------------------------------------------------------------

ORIGINAL = {"calc.py": "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"}
GOLDEN = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n"
GOLDEN_WIDE = (  # the same change, more context and a wrong hunk length hint in the header text
    "diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,3 +1,3 @@\n def add(a, b):\n"
    "-    return a - b\n+    return a + b\n \n"
)
OTHER = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return b + a + 0\n"
SHORT = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return 0\n"
NOOP = "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a - b\n"
BROKEN = "--- a/calc.py\n+++ b/calc.py\n@@ -9,2 +9,2 @@\n def nothing():\n-    pass\n+    return 1\n"


def fenced(patch: str) -> str:
    return f"<think>\nfix\n</think>\n\n```diff\n{patch}```"


def test_swe_filter_drops_missing_unparsable_and_noop_patches():
    assert normalised_patch("no patch here", ORIGINAL) is None
    assert normalised_patch(fenced(BROKEN), ORIGINAL) is None
    assert normalised_patch(fenced(NOOP), ORIGINAL) is None
    assert normalised_patch(fenced(GOLDEN), ORIGINAL) == normalised_patch(fenced(GOLDEN_WIDE), ORIGINAL)
    assert normalised_patch(fenced(GOLDEN), ORIGINAL) != normalised_patch(fenced(OTHER), ORIGINAL)


def test_swe_majority_vote_and_shortest_tie_break():
    a, b, c = "patch-aaaa", "patch-bb", "patch-c"
    assert majority_vote([None, a, b, a, None]) == 1
    assert majority_vote([a, b, c]) == 2  # one vote each: the shortest
    assert majority_vote([a, a, b, b]) == 2  # two votes each: the shorter, first occurrence
    assert majority_vote([None, None]) is None


def test_swe_best_at_k_and_pass_at_k():
    row = {"id": "calc-1", "prompt": "add subtracts", "label": {"golden_patch": GOLDEN, "original_files": ORIGINAL}}
    row2 = {**row, "id": "calc-2"}
    one = Instance(row, [fenced(OTHER), fenced(GOLDEN), fenced(GOLDEN_WIDE), "nothing", fenced(SHORT)])
    two = Instance(row2, [fenced(SHORT), fenced(OTHER), fenced(OTHER), fenced(GOLDEN), fenced(NOOP)])
    result = run_swe_tts([one, two])
    by_k = {point["k"]: point for point in result["curve"]}
    assert sorted(by_k) == [1, 2, 4, 5]
    assert by_k[5]["best_at_k"] == 50.0  # calc-1: the golden change wins 2 votes; calc-2: OTHER wins 2
    assert by_k[5]["pass_at_k"] == 100.0
    assert by_k[1]["best_at_k"] == 0.0 and by_k[1]["pass_at_k"] == 0.0
    # k=2: both tie 1-1; calc-1's shorter patch is the golden one, calc-2's is SHORT (wrong).
    assert by_k[2]["best_at_k"] == 50.0
    assert by_k[5]["pass_at_1"] == pytest.approx(100 * (2 / 5 + 1 / 5) / 2)
    instances = {item["id"]: item for item in result["instances"]}
    assert instances["calc-1"]["kept"] == 4 and instances["calc-1"]["distinct"] == 3
    assert instances["calc-2"]["selected"] == 1 and 0 < instances["calc-2"]["selected_reward"] < 1


# ---- through the CLI: real tiny model, real sandbox ------------------------------------------------------


def tiny_code_rows(path, n: int = 3):
    from cascade_cli.data.tiny_tasks import generate

    rows = generate("code", n, seed=0, split="heldout")
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_tts_code_cli_on_tiny(cli, tmp_path):
    problems = tiny_code_rows(tmp_path / "code.jsonl")
    out = tmp_path / "out"
    result = cli(["tts", "code", "--model", "tiny", "--problems", problems, "-R", "2", "-G", "2", "-N", "10",
                  "--max-tokens", "24", "--out", out])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "tts.json").read_text())
    assert [r["round"] for r in report["rounds"]] == [1, 2]
    assert report["generations"] == 10 and report["rounds"][-1]["generations_total"] == 10
    assert report["pass_at_1"] is not None and len(report["problems"]) == 3
    assert "tts code" in result.output and "score" in result.output


def test_tts_code_takes_the_embedded_real_model_spec(cli, tmp_path, smollm2_dir):
    problems = tiny_code_rows(tmp_path / "code.jsonl", n=1)
    result = cli(["tts", "code", "--model", "smollm2-135m", "--problems", problems, "-R", "1", "-G", "1",
                  "--max-tokens", "8", "--backend", "hf", "--out", tmp_path / "out"])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "out" / "tts.json").read_text())["generations"] == 1


def test_tts_code_cli_errors_name_the_row(cli, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "x", "prompt": "p"}) + "\n")
    result = cli(["tts", "code", "--model", "tiny", "--problems", bad])
    assert result.exit_code == 2 and "row 1" in result.output and "label" in result.output


def test_tts_swe_cli_with_model_and_with_responses(cli, tmp_path):
    row = {"id": "calc-1", "prompt": "add() subtracts; fix it.", "label": {"golden_patch": GOLDEN, "original_files": ORIGINAL}}
    problems = tmp_path / "swe.jsonl"
    problems.write_text(json.dumps(row) + "\n")
    result = cli(["tts", "swe", "--model", "tiny", "--problems", problems, "-k", "2", "--max-tokens", "16",
                  "--out", tmp_path / "gen"])
    assert result.exit_code == 0, result.output
    generated = json.loads((tmp_path / "gen" / "tts.json").read_text())
    assert generated["k"] == 2 and [p["k"] for p in generated["curve"]] == [1, 2]
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps({"id": "calc-1", "responses": [fenced(SHORT), fenced(GOLDEN), fenced(GOLDEN_WIDE)]}) + "\n")
    result = cli(["tts", "swe", "--responses", responses, "--problems", problems, "--out", tmp_path / "given"])
    assert result.exit_code == 0, result.output
    scored = json.loads((tmp_path / "given" / "tts.json").read_text())
    assert scored["curve"][-1] == {"k": 3, "best_at_k": 100.0, "pass_at_k": 100.0, "pass_at_1": pytest.approx(66.67, abs=0.01),
                                   "selected_reward": 1.0}
    both = cli(["tts", "swe", "--responses", responses, "--model", "tiny", "--problems", problems])
    assert both.exit_code == 2
