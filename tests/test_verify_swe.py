"""SWE verifier (paper Eq. 2): real patches made by git in a temp repo, the 50 SWE-bench Verified golden
patches from shared/data/swe, and the judge path against a real OpenAI-style HTTP server on loopback."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from cascade_cli.verifiers import get_verifier
from cascade_cli.verifiers.swe import apply_patch, extract_patch, preimage_from_patch

REPO_ROOT = Path(__file__).resolve().parents[1]


needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

CALC = """def add(a, b):
    return a - b


def mul(a, b):
    return a * b
"""
UTIL = """import os


def home():
    return os.environ["HOME"]
"""


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    return subprocess.run(
        ["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture()
def repo(tmp_path: Path):
    """A git repo with two files; `diff(edits)` writes files, returns `git diff`, and resets the tree."""
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "calc.py").write_text(CALC)
    (root / "pkg" / "util.py").write_text(UTIL)
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-qm", "initial")

    def diff(edits: dict[str, str | None], *flags: str) -> str:
        for path, content in edits.items():
            if content is None:
                (root / path).unlink()
            else:
                (root / path).write_text(content)
        git(root, "add", "-A")
        text = git(root, "diff", "--cached", *flags)
        git(root, "reset", "-q", "--hard")
        git(root, "clean", "-qfd")
        return text

    originals = {"pkg/calc.py": CALC, "pkg/util.py": UTIL}
    return diff, originals


def score(response: str, golden: str, originals: dict[str, str], **options):
    verifier = get_verifier("swe", **options)
    record = {
        "id": "r",
        "prompt": "fix it",
        "response": response,
        "domain": "swe",
        "label": {"golden_patch": golden, "original_files": originals},
    }
    return verifier.score(record)


FIXED_CALC = CALC.replace("a - b", "a + b")
FIXED_UTIL = UTIL.replace('os.environ["HOME"]', 'os.path.expanduser("~")')


@needs_git
def test_git_made_patches_get_the_eq2_rewards(repo):
    diff, originals = repo
    golden = diff({"pkg/calc.py": FIXED_CALC, "pkg/util.py": FIXED_UTIL})

    # The same change, rendered differently (less context, other hunk shapes), scores 1.
    assert (
        score(diff({"pkg/calc.py": FIXED_CALC, "pkg/util.py": FIXED_UTIL}, "-U1"), golden, originals).reward
        == 1
    )
    # Whitespace-insensitive: trailing spaces and a different indent width of the changed line.
    spaced = CALC.replace("    return a - b", "      return a + b   ")
    assert score(diff({"pkg/calc.py": spaced, "pkg/util.py": FIXED_UTIL}), golden, originals).reward == 1
    # Inside a thinking response with a ```diff fence.
    wrapped = f"<think>\nthe sign is wrong\n</think>\n\nHere is the fix:\n```diff\n{golden}```\nDone."
    result = score(wrapped, golden, originals)
    assert (result.reward, result.passed) == (1.0, True)

    # Half of the fix: strictly between 0 and 1, and closer than a wrong edit of the same file.
    partial = score(diff({"pkg/calc.py": FIXED_CALC}), golden, originals)
    wrong = score(diff({"pkg/calc.py": CALC.replace("a * b", "b * a * 1")}), golden, originals)
    assert 0 < wrong.reward < partial.reward < 1, (wrong, partial)
    assert partial.details["files"] == ["pkg/calc.py"]
    # SWE-RL's mean over files: calc.py matches exactly (1), util.py was left out (0).
    assert partial.reward == 0.5 and partial.details["file_similarity"] == {
        "pkg/calc.py": 1.0,
        "pkg/util.py": 0.0,
    }

    # Unchanged code scores 0: a hunk that removes a line and adds it back, and a hunk of context only.
    same = "--- a/pkg/calc.py\n+++ b/pkg/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n+    return a - b\n"
    assert score(same, golden, originals).reward == 0
    assert score(same, golden, originals).details["reason"] == "the patch changes nothing"

    # Unparsable, no patch, or not applicable: -1.
    assert score("I could not find the bug.", golden, originals).reward == -1
    assert (
        score("--- a/pkg/calc.py\n+++ b/pkg/calc.py\n@@ -1,5 +1,5 @@\n-x\n", golden, originals).reward == -1
    )
    stale = golden.replace("-    return a - b", "-    return a // b")
    assert "does not apply" in score(stale, golden, originals).details["reason"]
    other = diff({"pkg/calc.py": FIXED_CALC}).replace("pkg/calc.py", "pkg/missing.py")
    result = score(other, golden, originals)
    assert result.reward == -1 and "not among the original files" in result.details["reason"]


@needs_git
def test_new_and_deleted_files_apply_like_git(repo, tmp_path):
    diff, originals = repo
    patch = diff({"pkg/util.py": None, "pkg/new.py": "VALUE = 1\n", "pkg/calc.py": FIXED_CALC + "\nX = 2"})
    applied = apply_patch(patch, originals)
    assert applied == {
        "pkg/util.py": None,
        "pkg/new.py": "VALUE = 1\n",
        "pkg/calc.py": FIXED_CALC + "\nX = 2",
    }
    assert score(patch, patch, originals).reward == 1


def test_extract_patch_prefers_the_last_diff_fence():
    first = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"
    second = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+c\n"
    text = f"<think>```diff\n{first}```</think>\n```python\nprint(1)\n```\n```diff\n{second}```<|im_end|>"
    assert extract_patch(text) == second
    assert extract_patch(f"Sure.\n{first}") == first
    assert extract_patch("```python\nprint(1)\n```") is None


def test_bad_labels_are_row_errors_not_crashes():
    verifier = get_verifier("swe")
    for label, expected in [
        ("just a string", "label must be an object"),
        ({"golden_patch": 3, "original_files": {}}, "golden_patch must be a unified diff"),
        ({"golden_patch": "", "original_files": {"a": 1}}, "original_files must be an object"),
        ({"golden_patch": "--- a/q\n+++ b/q\n@@ -1 +1 @@\n-a\n+b\n", "original_files": {}}, "does not apply"),
    ]:
        result = verifier.score({"response": "x", "label": label})
        assert result.reward == 0 and expected in result.details["error"], (label, result)
    assert "missing field 'response'" in verifier.score({"label": {}}).details["error"]


@needs_git
def test_swe_bench_golden_patches_apply_like_git_and_score_one(tmp_path, shared_data):
    """SWE-bench Verified rows carry no file contents: the pre-image of each file is rebuilt from the golden
    patch's hunks (context + removed lines at their line numbers, filler lines between). `git apply` must
    accept the golden patch on that tree and produce exactly what our applier produces."""
    rows = [json.loads(line) for line in (shared_data / "swe" / "instances.jsonl").open()]
    assert len(rows) == 50
    verifier = get_verifier("swe")
    for row in rows:
        originals = preimage_from_patch(row["patch"])
        work = tmp_path / row["instance_id"]
        for path, content in originals.items():
            (work / path).parent.mkdir(parents=True, exist_ok=True)
            (work / path).write_text(content)
        (work / "golden.diff").write_text(row["patch"])
        subprocess.run(["git", "apply", "golden.diff"], cwd=work, check=True, capture_output=True)
        for path, content in apply_patch(row["patch"], originals).items():
            on_disk = (work / path).read_text() if (work / path).exists() else None
            assert on_disk == content, (row["instance_id"], path)
        record = {
            "response": f"</think>\n```diff\n{row['patch']}```",
            "label": {"golden_patch": row["patch"], "original_files": originals},
        }
        assert verifier.score(record).reward == 1.0, row["instance_id"]
    # A golden patch of one instance is not a fix for another: it does not apply there.
    first, second = rows[0], rows[1]
    record = {
        "response": second["patch"],
        "label": {"golden_patch": first["patch"], "original_files": preimage_from_patch(first["patch"])},
    }
    assert verifier.score(record).reward == -1


class _JudgeHandler(BaseHTTPRequestHandler):
    """An OpenAI-compatible peer (what `vllm serve` answers) with fixed logprobs for the first token."""

    requests: list[dict] = []

    def do_POST(self):  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "body": body})
        yes, no = math.log(0.7), math.log(0.2)
        if self.path.endswith("/chat/completions"):
            reply = {
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "YES"},
                        "logprobs": {
                            "content": [
                                {
                                    "token": "YES",
                                    "logprob": yes,
                                    "top_logprobs": [
                                        {"token": "YES", "logprob": yes},
                                        {"token": "NO", "logprob": no},
                                        {"token": "Maybe", "logprob": math.log(0.1)},
                                    ],
                                }
                            ]
                        },
                    }
                ]
            }
        else:
            reply = {
                "choices": [
                    {
                        "index": 0,
                        "text": " YES",
                        "logprobs": {
                            "tokens": [" YES"],
                            "token_logprobs": [yes],
                            "top_logprobs": [{" YES": yes, " NO": no}],
                        },
                    }
                ]
            }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture()
def judge_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _JudgeHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _JudgeHandler.requests = []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@needs_git
@pytest.mark.parametrize("api", ["chat", "completions"])
def test_judge_reward_is_p_yes_from_logprobs(repo, judge_server, api):
    diff, originals = repo
    golden = diff({"pkg/calc.py": FIXED_CALC})
    candidate = diff({"pkg/calc.py": CALC.replace("return a - b", "return b + a")})
    result = score(candidate, golden, originals, judge_url=judge_server, judge_api=api, judge_model="kimi")
    assert result.reward == pytest.approx(0.7)
    assert result.details["p_no"] == pytest.approx(0.2)
    assert 0 < result.details["lexical_similarity"] < 1
    (request,) = _JudgeHandler.requests
    assert request["path"] == ("/v1/chat/completions" if api == "chat" else "/v1/completions")
    text = request["body"]["messages"][0]["content"] if api == "chat" else request["body"]["prompt"]
    assert "a - b" in text and "b + a" in text and request["body"]["model"] == "kimi"
    # Exact matches and unparsable patches never reach the judge.
    assert score(golden, golden, originals, judge_url=judge_server).reward == 1
    assert score("no patch", golden, originals, judge_url=judge_server).reward == -1
    assert len(_JudgeHandler.requests) == 1


@needs_git
def test_unreachable_judge_is_a_row_error(repo):
    diff, originals = repo
    golden = diff({"pkg/calc.py": FIXED_CALC})
    candidate = diff({"pkg/calc.py": CALC.replace("return a - b", "return b + a")})
    result = score(candidate, golden, originals, judge_url="http://127.0.0.1:9", judge_timeout_s=2)
    assert (
        result.reward == 0
        and "judge at http://127.0.0.1:9/v1/chat/completions failed" in result.details["error"]
    )


def test_the_compiled_sequence_matcher_gives_difflibs_ratios(shared_data):
    """cydifflib (optional accelerator) must give exactly difflib's ratios on real SWE-bench diffs."""
    import difflib
    import re

    cydifflib = pytest.importorskip("cydifflib")
    from cascade_cli.verifiers.swe import _file_diffs

    rows = [json.loads(line) for line in (shared_data / "swe" / "instances.jsonl").open()][:12]
    for row in rows:
        originals = preimage_from_patch(row["patch"])
        mutated = re.sub(r"(?m)^\+(?!\+\+)(.*)$", r"+\1  # changed", row["patch"], count=1)
        golden = _file_diffs(originals, apply_patch(row["patch"], originals))
        other = _file_diffs(originals, apply_patch(mutated, originals))
        ratios = []
        for path, text in golden.items():
            expected = difflib.SequenceMatcher(None, other.get(path, ""), text, autojunk=False).ratio()
            assert (
                cydifflib.SequenceMatcher(None, other.get(path, ""), text, autojunk=False).ratio() == expected
            )
            ratios.append(expected)
        assert min(ratios) < 1, row["instance_id"]
