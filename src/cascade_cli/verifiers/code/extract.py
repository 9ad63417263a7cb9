"""Find the program in a model response: the last fenced Python block of the answer (after `</think>`).

Fallbacks, in order: the last bare ``` block, an unclosed trailing ```python block (a response cut at the
length limit), then the whole answer when it has no fence at all and parses as Python. A block fenced with
another language (```cpp) is not a Python program.
"""

from __future__ import annotations

import ast
import re

from cascade_cli.chat import answer_text

_FENCE = re.compile(r"```[ \t]*([^\n`]*)\n(.*?)```", re.DOTALL)
_OPEN_FENCE = re.compile(r"```[ \t]*(python3?|py)[ \t]*\n(.*)\Z", re.DOTALL | re.IGNORECASE)
_PYTHON_TAGS = {"python", "python3", "py", "py3"}
# Unfenced text must look like code, not prose that happens to parse (a single word is a valid expression).
_CODE_HINT = re.compile(r"^\s*(def |class |import |from \S+ import |print\(|for |while |if )", re.MULTILINE)


def extract_program(response: str) -> str | None:
    """The program text, or None when the response holds no Python program."""
    text = answer_text(response)
    blocks = [(tag.strip().lower(), body) for tag, body in _FENCE.findall(text)]
    python = [body for tag, body in blocks if tag.split()[:1] and tag.split()[0] in _PYTHON_TAGS]
    if python:
        return _non_empty(python[-1])
    bare = [body for tag, body in blocks if not tag]
    if bare:
        return _non_empty(bare[-1])
    unclosed = _OPEN_FENCE.search(text[text.rfind("```") :]) if "```" in text else None
    if unclosed:
        return _non_empty(unclosed.group(2))
    if blocks or "```" in text:
        return None  # fenced, but in another language
    if _CODE_HINT.search(text) and _parses(text):
        return text
    return None


def _non_empty(code: str) -> str | None:
    return code if code.strip() else None


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return True
