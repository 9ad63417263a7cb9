"""SWE-RL reward, execution-free (Nemotron-Cascade Eq. 2).

    -1   no patch in the response, the patch does not parse, or it does not apply to `original_files`
     0   the patch applies but changes nothing
     1   the patched files equal the golden patch's result (whitespace-insensitive)
  [0,1]  otherwise: lexical similarity of the per-file diffs (difflib, averaged over files, as SWE-RL does), or, with the
         `judge_url` option, P("YES") from an OpenAI-compatible judge asked whether the candidate resolves
         the issue given the golden patch.

Label: `{"golden_patch": "diff --git ...", "original_files": {"path": "content"}, "problem_statement"?: str}`.
Patches are applied here, in Python, with the hunks parsed by `unidiff` (no git needed at training time).
"""

from __future__ import annotations

import difflib
import json
import math
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

import unidiff

try:  # the same algorithm and ratios as difflib's SequenceMatcher, compiled (about 30x faster here)
    from cydifflib import SequenceMatcher
except ImportError:  # pragma: no cover - optional accelerator
    from difflib import SequenceMatcher
from unidiff.constants import LINE_TYPE_NO_NEWLINE

from cascade_cli.chat import SPECIAL_TOKENS, THINK_CLOSE
from cascade_cli.verifiers.base import RecordError, Score, Verifier, parse_label, require_response

# How far from its stated line number a hunk may be found (GNU patch searches the whole file; we bound it).
MAX_HUNK_OFFSET = 1000

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.DOTALL)
_DIFF_START = re.compile(r"^(diff --git |--- )", re.MULTILINE)

JUDGE_PROMPT = """You are reviewing a patch for a software issue.

<issue>
{issue}
</issue>

<golden_patch>
{golden}
</golden_patch>

<candidate_patch>
{candidate}
</candidate_patch>

The golden patch is known to resolve the issue. Does the candidate patch resolve the issue as well \
(the same behaviour, possibly written differently)? Answer with exactly one word: YES or NO."""


class PatchError(ValueError):
    """The patch text is not a unified diff, or it does not apply to the given files."""


def extract_patch(response: str) -> str | None:
    """The diff in a response: after `</think>`, the last ```diff (or ```patch) fence, else any fence that
    holds a diff, else the raw text from its first `diff --git` / `---` line. None when there is none."""
    close_at = response.rfind(THINK_CLOSE)
    text = response[close_at + len(THINK_CLOSE) :] if close_at >= 0 else response
    for stop in SPECIAL_TOKENS:
        text = text.replace(stop, "")
    fences = _FENCE.findall(text)
    for wanted in (("diff", "patch"), None):
        for language, body in reversed(fences):
            if (wanted is None or language.lower() in wanted) and _DIFF_START.search(body):
                return body
    match = _DIFF_START.search(text)
    if match:
        return text[match.start() :]
    return None


def _strip_prefix(path: str) -> str | None:
    if path == "/dev/null":
        return None
    return path[2:] if path.startswith(("a/", "b/")) else path


def _hunk_lines(hunk: unidiff.patch.Hunk) -> tuple[list[str], list[str]]:
    """(source lines, target lines) of a hunk, honouring `\\ No newline at end of file`."""
    source: list[str] = []
    target: list[str] = []
    last: list[list[str]] = []
    for line in hunk:
        if line.line_type == LINE_TYPE_NO_NEWLINE:
            for lines in last:
                lines[-1] = lines[-1].rstrip("\n")
            continue
        if line.line_type == unidiff.LINE_TYPE_CONTEXT:
            source.append(line.value)
            target.append(line.value)
            last = [source, target]
        elif line.line_type == unidiff.LINE_TYPE_REMOVED:
            source.append(line.value)
            last = [source]
        elif line.line_type == unidiff.LINE_TYPE_ADDED:
            target.append(line.value)
            last = [target]
    return source, target


def _matches(lines: list[str], at: int, expected: list[str], loose: bool) -> bool:
    if at < 0 or at + len(expected) > len(lines):
        return False
    window = lines[at : at + len(expected)]
    if loose:
        return all(a.rstrip() == b.rstrip() for a, b in zip(window, expected, strict=True))
    return all(a.rstrip("\n") == b.rstrip("\n") for a, b in zip(window, expected, strict=True))


def _apply_file(path: str, content: str, hunks: list[unidiff.patch.Hunk]) -> str:
    lines = content.splitlines(keepends=True)
    cursor = 0  # hunks apply in order and never overlap
    shift = 0  # lines added minus removed by the hunks before this one
    for number, hunk in enumerate(hunks, start=1):
        source, target = _hunk_lines(hunk)
        start = hunk.source_start - 1 if hunk.source_length else hunk.source_start
        start = max(start + shift, cursor)
        found = None
        for loose in (False, True):
            for offset in range(MAX_HUNK_OFFSET + 1):
                for at in (start + offset, start - offset) if offset else (start,):
                    if at >= cursor and _matches(lines, at, source, loose):
                        found = at
                        break
                if found is not None:
                    break
            if found is not None:
                break
        if found is None:
            raise PatchError(
                f"{path}: hunk {number} (@@ -{hunk.source_start},{hunk.source_length}) does not apply"
            )
        if found + len(source) < len(lines) and target and not target[-1].endswith("\n"):
            # `\ No newline at end of file` only holds at the end of the file
            target = [*target[:-1], target[-1] + "\n"]
        lines[found : found + len(source)] = target
        cursor = found + len(target)
        shift += len(target) - len(source)
    return "".join(lines)


def _parse(patch_text: str) -> unidiff.PatchSet:
    # Blank context lines at the very end are often lost (a stripped response, an editor trimming
    # whitespace): retry with up to three blank lines restored, which unidiff reads as empty context.
    if not patch_text.endswith("\n"):
        patch_text += "\n"
    for missing in range(4):
        try:
            return unidiff.PatchSet(patch_text + "\n" * missing)
        except unidiff.UnidiffParseError as error:
            if "shorter than expected" not in str(error) or missing == 3:
                raise PatchError(f"unparsable diff: {error}") from None
    raise AssertionError("unreachable")


def apply_patch(patch_text: str, original_files: dict[str, str]) -> dict[str, str | None]:
    """Apply a unified diff to in-memory files. Returns {path: new content, or None when deleted} for every
    file the patch touches. Raises PatchError when the text is no diff or a hunk does not apply."""
    patch = _parse(patch_text)
    if len(patch) == 0:
        raise PatchError("no file diffs found (expected '--- a/PATH' / '+++ b/PATH' headers and hunks)")
    result: dict[str, str | None] = {}
    for patched_file in patch:
        source = _strip_prefix(patched_file.source_file)
        target = _strip_prefix(patched_file.target_file)
        if source is None:
            if target is None:
                raise PatchError("a file diff goes from /dev/null to /dev/null")
            if target in original_files:
                raise PatchError(f"{target}: the patch creates it but it already exists")
            result[target] = _apply_file(target, "", list(patched_file))
            continue
        if source not in original_files and source not in result:
            raise PatchError(f"{source}: not among the original files ({len(original_files)} given)")
        current = result[source] if source in result else original_files[source]
        if current is None:
            raise PatchError(f"{source}: patched after being deleted")
        new_content = _apply_file(source, current, list(patched_file))
        if target is None:
            if new_content.strip():
                raise PatchError(f"{source}: deleted by the patch but lines remain")
            result[source] = None
        else:
            if target != source:
                result[source] = None
            result[target] = new_content
    return result


def preimage_from_patch(patch_text: str) -> dict[str, str]:
    """Files a patch applies to, rebuilt from its hunks alone (context and removed lines at their stated line
    numbers, unique filler lines between them). For data that ships a golden patch but not the repository
    (SWE-bench rows without a checkout)."""
    files: dict[str, str] = {}
    for patched_file in unidiff.PatchSet(patch_text):
        path = _strip_prefix(patched_file.source_file)
        if path is None:
            continue
        lines: list[str] = []
        for hunk in patched_file:
            source, _ = _hunk_lines(hunk)
            while len(lines) < hunk.source_start - 1:
                lines.append(f"# filler line {len(lines) + 1} of {path}\n")
            lines.extend(source)
        files[path] = "".join(lines)
    return files


def _normalise(content: str | None) -> list[str] | None:
    if content is None:
        return None
    return [" ".join(line.split()) for line in content.splitlines() if line.strip()]


def _file_diffs(original: dict[str, str], changed: dict[str, str | None]) -> dict[str, str]:
    """Canonical per-file diffs of the files that really changed: difflib's unified diff with 3 lines of
    context, without the two file-name header lines (the form SWE-RL compares)."""
    diffs: dict[str, str] = {}
    for path in sorted(changed):
        before = original.get(path)
        after = changed[path]
        if before == after:
            continue
        lines = difflib.unified_diff(
            (before or "").splitlines(), (after or "").splitlines(), fromfile="old", tofile="new", lineterm=""
        )
        diffs[path] = "\n".join(list(lines)[2:])
    return diffs


def lexical_similarity(candidate: dict[str, str], golden: dict[str, str]) -> tuple[float, dict[str, float]]:
    """SWE-RL's lexical reward: per file, difflib's SequenceMatcher ratio (no autojunk) of the candidate's and
    the golden diff; a file changed by only one side scores 0; the reward is the mean over all files."""
    per_file: dict[str, float] = {}
    for path in sorted(set(candidate) | set(golden)):
        left, right = candidate.get(path, ""), golden.get(path, "")
        if not left or not right:
            per_file[path] = 0.0
        else:
            per_file[path] = SequenceMatcher(None, left, right, autojunk=False).ratio()
    return (sum(per_file.values()) / len(per_file) if per_file else 0.0), per_file


@dataclass(frozen=True)
class JudgeConfig:
    url: str
    model: str = "judge"
    api: str = "chat"  # "chat" (/v1/chat/completions) or "completions" (/v1/completions)
    timeout_s: float = 60.0
    top_logprobs: int = 20
    api_key: str | None = None


def _endpoint(config: JudgeConfig) -> str:
    url = config.url.rstrip("/")
    suffix = "/chat/completions" if config.api == "chat" else "/completions"
    if url.endswith(("/chat/completions", "/completions")):
        return url
    return url + suffix if url.endswith("/v1") else url + "/v1" + suffix


def _yes_no(pairs: list[tuple[str, float]]) -> tuple[float, float]:
    p_yes = sum(math.exp(lp) for token, lp in pairs if token.strip().strip(".").upper() == "YES")
    p_no = sum(math.exp(lp) for token, lp in pairs if token.strip().strip(".").upper() == "NO")
    return min(p_yes, 1.0), min(p_no, 1.0)


def judge_yes_probability(config: JudgeConfig, prompt: str) -> tuple[float, float]:
    """(P(YES), P(NO)) of the judge's first answer token, from its top logprobs."""
    if config.api == "chat":
        body: dict[str, Any] = {
            "model": config.model,
            "messages": [{"role": "user", "content": prompt}],
            "max_tokens": 1,
            "temperature": 0.0,
            "logprobs": True,
            "top_logprobs": config.top_logprobs,
        }
    elif config.api == "completions":
        body = {
            "model": config.model,
            "prompt": prompt,
            "max_tokens": 1,
            "temperature": 0.0,
            "logprobs": config.top_logprobs,
        }
    else:
        raise ValueError(f"judge_api must be 'chat' or 'completions'; found {config.api!r}")
    headers = {"Content-Type": "application/json"}
    if config.api_key:
        headers["Authorization"] = f"Bearer {config.api_key}"
    request = urllib.request.Request(_endpoint(config), data=json.dumps(body).encode(), headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=config.timeout_s) as answer:
            reply = json.loads(answer.read())
    except (urllib.error.URLError, TimeoutError, json.JSONDecodeError) as error:
        raise RuntimeError(f"judge at {_endpoint(config)} failed: {error}") from None
    try:
        logprobs = reply["choices"][0]["logprobs"]
        if config.api == "chat":
            first = logprobs["content"][0]
            pairs = [(item["token"], item["logprob"]) for item in first.get("top_logprobs") or []]
            pairs.append((first["token"], first["logprob"]))
        else:
            pairs = list(logprobs["top_logprobs"][0].items())
    except (KeyError, IndexError, TypeError) as error:
        raise RuntimeError(f"judge reply has no logprobs for the first token ({error!r})") from None
    return _yes_no(list(dict(pairs).items()))


class SweVerifier(Verifier):
    domain = "swe"

    def __init__(
        self,
        judge_url: str | None = None,
        judge_model: str = "judge",
        judge_api: str = "chat",
        judge_timeout_s: float = 60.0,
        judge_api_key: str | None = None,
    ) -> None:
        self.judge = (
            JudgeConfig(judge_url, judge_model, judge_api, float(judge_timeout_s), api_key=judge_api_key)
            if judge_url
            else None
        )

    def check_label(self, label: Any) -> str | None:
        if not isinstance(label, dict):
            return f"label must be an object with 'golden_patch' and 'original_files'; found {type(label).__name__}"
        if not isinstance(label.get("golden_patch"), str):
            return "label.golden_patch must be a unified diff string"
        files = label.get("original_files")
        if not isinstance(files, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in files.items()
        ):
            return "label.original_files must be an object {path: file content}"
        return None

    def verify_one(self, record: dict[str, Any]) -> Score:
        response = require_response(record)
        label = parse_label(record)
        problem = self.check_label(label)
        if problem:
            raise RecordError(problem)
        original: dict[str, str] = label["original_files"]
        try:
            golden_files = apply_patch(label["golden_patch"], original)
        except PatchError as error:
            raise RecordError(f"label.golden_patch does not apply to label.original_files: {error}") from None

        patch_text = extract_patch(response)
        if patch_text is None:
            return Score(-1.0, False, {"reason": "no patch found in the response"})
        try:
            candidate_files = apply_patch(patch_text, original)
        except PatchError as error:
            return Score(-1.0, False, {"reason": str(error)})

        candidate_diffs = _file_diffs(original, candidate_files)
        if not candidate_diffs:
            return Score(0.0, False, {"reason": "the patch changes nothing"})
        golden_diffs = _file_diffs(original, golden_files)
        touched = set(candidate_files) | set(golden_files)
        same = all(
            _normalise(candidate_files.get(path, original.get(path)))
            == _normalise(golden_files.get(path, original.get(path)))
            for path in touched
        )
        if same:
            return Score(1.0, True, {"reason": "equals the golden patch", "files": sorted(candidate_diffs)})
        details: dict[str, Any] = {"files": sorted(candidate_diffs), "golden_files": sorted(golden_diffs)}
        lexical, per_file = lexical_similarity(candidate_diffs, golden_diffs)
        details["lexical_similarity"] = round(lexical, 6)
        details["file_similarity"] = {path: round(value, 6) for path, value in per_file.items()}
        if self.judge is None:
            return Score(lexical, False, {"reason": "lexical similarity", **details})
        prompt = JUDGE_PROMPT.format(
            issue=label.get("problem_statement") or str(record.get("prompt") or "(not given)"),
            golden=label["golden_patch"],
            candidate="".join(candidate_diffs.values()),
        )
        p_yes, p_no = judge_yes_probability(self.judge, prompt)
        return Score(p_yes, False, {"reason": "judge P(YES)", "p_yes": p_yes, "p_no": p_no, **details})
