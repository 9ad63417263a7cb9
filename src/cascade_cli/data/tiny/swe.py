"""tiny:swe: one-line bugs in a two-line file, repaired by a unified diff (the SWE RL row shape).

The file is a tiny:code function with a bug in its return line: a wrong operator (another template's body),
a wrong constant (off by one) or a wrong name (an argument swapped or misspelt). The issue says what the
function should return, in the words tiny:code's prompts use, so SFT on code teaches the fix and SFT on swe
teaches the patch format. The label is the SWE verifier's: `golden_patch`, `original_files` and the
`problem_statement`. The patch is `git diff -U0` style (no context lines), which keeps a thinking answer
within the tiny recipe's 160-token SWE responses.

A problem's pool is its fixed function's tiny:code pool (template and constant), so a held-out SWE problem
repairs a known operation towards a constant that neither SFT nor RL showed for that operation.
"""

from __future__ import annotations

import random
import re

from cascade_cli.data.tiny.code import _CODE_TEMPLATES, _code_key, _code_pools, _CodeTemplate
from cascade_cli.data.tiny.pools import Task

_SWE_FUNCTION_NAMES = ("f", "g", "h")  # one-letter files keep the patch short
BUG_KINDS = ("operator", "constant", "name")
_WRONG_NAMES = {"x": "y", "xs": "x", "s": "t"}


def _wrong_name(args: str, body: str, rng: random.Random) -> str | None:
    """The body with one argument reference replaced: `a`<->`b` for two arguments, else a misspelt name."""
    names = [name.strip() for name in args.split(",")]
    used = [name for name in names if re.search(rf"\b{name}\b", body)]
    if not used:
        return None
    name = rng.choice(used)
    other = next((n for n in names if n != name), None) or _WRONG_NAMES[name]
    matches = list(re.finditer(rf"\b{name}\b", body))
    at = rng.choice(matches)
    return body[: at.start()] + other + body[at.end() :]


def _buggy_body(template: _CodeTemplate, k: int, kind: str, rng: random.Random) -> str | None:
    body = template.body.format(k=k)
    if kind == "operator":
        others = [t.body.format(k=k) for t in _CODE_TEMPLATES if t.args == template.args and t is not template]
        others = [other for other in others if other != body]
        return rng.choice(others) if others else None
    if kind == "constant":
        if "{k}" not in template.body:
            return None
        wrong_k = k + 1 if k == template.k_range[0] or rng.random() < 0.5 else k - 1
        return template.body.format(k=wrong_k)
    return _wrong_name(template.args, body, rng)


def patch_text(path: str, before: str, after: str) -> str:
    """A `git diff -U0` patch that replaces line 2 of `path` (the return line)."""
    return f"--- a/{path}\n+++ b/{path}\n@@ -2 +2 @@\n-    return {before}\n+    return {after}\n"


def _answer(path: str, before: str, after: str) -> str:
    return f"```diff\n{patch_text(path, before, after)}```"


def _thinking(name: str, buggy: str, fix: str) -> str:
    """The buggy line copied next to the prompt, then the fix in tiny:code's own thinking words, so the patch
    copies both lines from the thinking as a code answer copies its body (the random-init model learns
    such short-range copies from SFT long before it copies from the file through the diff header)."""
    return f"bug: {buggy}\n{name} returns {fix}."


def swe_task(rng: random.Random) -> Task:
    template = rng.choice(_CODE_TEMPLATES)
    k, name = rng.randint(*template.k_range), rng.choice(_SWE_FUNCTION_NAMES)  # (the draws in this order)
    kind = rng.choice(BUG_KINDS)
    buggy = _buggy_body(template, k, kind, rng)
    if buggy is None:  # the template has no constant or no such name: an operator bug always exists
        kind, buggy = "operator", _buggy_body(template, k, "operator", rng)
    assert buggy is not None
    body = template.body.format(k=k)
    path = f"{name}.py"
    content = f"def {name}({template.args}):\n    return {buggy}\n"
    issue = f"{name}({template.args}) should {template.phrase.format(k=k).replace('returns', 'return', 1)}."
    # A wrong fix: another body that is neither the right one nor the bug (an operator slip of the fix).
    wrong = _buggy_body(template, k, "operator", rng)
    wrong = wrong if wrong not in (None, buggy, body) else None
    key = _code_key(template, k)
    return Task(
        task="swe",
        key=f"swe:{template.name}:{k}:{name}:{buggy}",
        pool=_code_pools(template)[key],
        prompt=f"Fix the issue in {path}: {issue}\n```python\n{content}```\nReply with a diff.",
        label={
            "golden_patch": patch_text(path, buggy, body),
            "original_files": {path: content},
            "problem_statement": issue,
        },
        answer=_answer(path, buggy, body),
        thinking=_thinking(name, buggy, body),
        wrong_answer=_answer(path, buggy, wrong) if wrong else None,
        wrong_thinking=_thinking(name, buggy, wrong) if wrong else None,
        extra={"bug": kind},
    )
