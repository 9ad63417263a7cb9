"""Known-correct and known-wrong responses for the real verifiers (math, IF, code, SWE) with the reward each
must get, shared by the CLI, reward-service and reward_func tests. Code runs in the bubblewrap sandbox when
this host allows it, else with rlimits only (`unsafe_no_sandbox`, the tests' programs are our own)."""

from __future__ import annotations

import json

from cascade_cli.verifiers.code.sandbox import host_cannot_sandbox
from cascade_cli.verifiers.swe import preimage_from_patch

GOLDEN = "--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,3 @@\n def f(x):\n-    return x - 1\n+    return x + 1\n \n"
NO_COMMA_LOWER = {
    "instruction_id_list": ["punctuation:no_comma", "change_case:english_lowercase"],
    "kwargs": [{}, {}],
}
STDIO_SUM = {"kind": "stdio", "inputs": ["1 2\n", "10 -3\n"], "outputs": ["3\n", "7\n"]}
CALL_ADD = {"kind": "call", "fn_name": "add", "inputs": [[1, 2], [5, 5]], "outputs": [3, 10]}


def fenced(code: str) -> str:
    return f"<think>\nwrite it\n</think>\n\n```python\n{code}\n```"


# (domain, label, response, expected reward)
CASES: list[tuple[str, dict, str, float]] = [
    ("math", {"answer": "0.5"}, "<think>\nhalf\n</think>\n\nSo the answer is $\\boxed{\\frac12}$.", 1.0),
    ("math", {"answer": "\\frac{\\pi}{2}"}, "The angle is $\\boxed{\\dfrac{\\pi}{2}}$.", 1.0),
    ("math", {"answer": "(3, \\frac{\\pi}{2})"}, "<think>r=3</think>\n$\\boxed{(3, \\pi)}$", 0.0),
    ("math", {"answer": "12"}, "<think>\n\\boxed{12}\n</think>\n\nI am not sure.", 0.0),
    ("if", NO_COMMA_LOWER, "all lowercase and no commas here", 1.0),
    ("if", NO_COMMA_LOWER, "Hello, World", 0.0),
    ("code", STDIO_SUM, fenced("a, b = map(int, input().split())\nprint(a + b)"), 1.0),
    ("code", STDIO_SUM, fenced("a, b = map(int, input().split())\nprint(a - b)"), 0.0),
    ("code", CALL_ADD, fenced("def add(a, b):\n    return a + b"), 1.0),
    ("code", CALL_ADD, "I would rather not write code.", 0.0),
    (
        "swe",
        {"golden_patch": GOLDEN, "original_files": preimage_from_patch(GOLDEN)},
        f"```diff\n{GOLDEN}```",
        1.0,
    ),
    ("swe", {"golden_patch": GOLDEN, "original_files": preimage_from_patch(GOLDEN)}, "no patch", -1.0),
]


def code_options() -> dict:
    """Verifier options: code gets `unsafe_no_sandbox` only where bubblewrap cannot run."""
    return (
        {"code": {"unsafe_no_sandbox": True, "workers": 2}}
        if host_cannot_sandbox()
        else {"code": {"workers": 2}}
    )


def rollout_rows() -> list[dict]:
    return [
        {
            "id": f"{domain}-{index}",
            "prompt": "p",
            "response": response,
            "label": label,
            "domain": domain,
            "mode": "think",
            "finish_reason": "stop",
        }
        for index, (domain, label, response, _) in enumerate(CASES)
    ]


def service_label(domain: str, label: dict) -> str:
    """The label as it travels through OpenRLHF: a JSON string with the domain added."""
    return json.dumps({**label, "domain": domain})
