"""Formats of the real public data sets in `shared/data/real/` (see its SOURCES.md), registered beside
data/formats.py's and detected from the columns the same way:

    gsm8k       `question`, `answer` (a worked solution, `<<calc>>` annotations, then `#### FINAL`): a math RL
                row (label = FINAL) that also carries the SFT conversation (the solution as a think block)
    mbpp        `text` (or `prompt`), `test_list`, `test_setup_code`, `task_id`, `code`: a code RL row with an
                assert label, posed the usual way (the task and one test), plus the SFT conversation
    hh-rlhf     `chosen`, `rejected` as "\\n\\nHuman: ...\\n\\nAssistant: ..." transcripts: the shared turns as
                the prompt, the two last assistant turns as the pair (ties and empty sides dropped); other
                chosen/rejected rows without a prompt keep the generic pref path
    oasst-tree  OASST message trees (`message_tree_id`, nested `prompt.replies` with `rank`): every pair of
                ranked sibling assistant replies -> one pref row (the better rank chosen)
    prompts     plain prompt lists: bare JSON strings, `{prompt}` rows or Self-Instruct seed tasks
                (`instruction`, `instances`)
    trl-prompt-completion  TRL's `prompt` + `completion` (text or message lists): an SFT conversation
                (data/formats_trl.py)
    verl        verl's RL parquet (`data_source`, `prompt`, `ability`, `reward_model.ground_truth`): math RL
                rows (data/formats_verl.py)

A row can give several rows (an OASST tree) or none (an HH tie): data/formats.py `convert_rows` expands them.
"""

from __future__ import annotations

import itertools
import json
import os
import re
from collections.abc import Iterator
from typing import Any

from cascade_cli.chat import THINK_CLOSE, THINK_OPEN
from cascade_cli.data.format_base import Format, FormatError
from cascade_cli.data.formats_trl import TRL_FORMATS
from cascade_cli.data.formats_verl import VERL_FORMATS

# The benchmarks pose their problems with these templates too (evaluation/benchmarks_real.py).
GSM8K_TEMPLATE = "{question}\n\nPlease reason step by step, and put your final answer within \\boxed{{}}."
MBPP_TEMPLATE = (
    "You are an expert Python programmer, and here is your task: {text} Your code should pass this test:"
    "\n\n{test}\n\nPut the complete function in one ```python code block."
)
_CALCULATOR = re.compile(r"<<[^<>]*>>")
_NUMBER_WITH_COMMAS = re.compile(r"-?\d{1,3}(,\d{3})+(\.\d+)?")
_HH_TURN = re.compile(r"\n\n(Human|Assistant): ?")
_HH_ASSISTANT = "\n\nAssistant:"
_DEF = re.compile(r"^def\s+([A-Za-z_]\w*)\s*\(", re.MULTILINE)


# -- gsm8k ---------------------------------------------------------------------------------------------------


def gsm8k_solution(answer: str) -> tuple[str, str]:
    """(worked solution without the calculator annotations, final answer) of a GSM8K `answer`."""
    solution, sep, final = answer.rpartition("####")
    if not sep:
        raise FormatError("column 'answer': expected a worked solution ending in '#### <final answer>'")
    final = final.strip()
    if _NUMBER_WITH_COMMAS.fullmatch(final):
        final = final.replace(",", "")
    return _CALCULATOR.sub("", solution).strip(), final


def _gsm8k(row: dict[str, Any]) -> dict[str, Any]:
    if "####" not in str(row["answer"]):  # a plain question/answer math row: the generic path, unchanged
        return dict(row)
    solution, final = gsm8k_solution(row["answer"])
    prompt = GSM8K_TEMPLATE.format(question=row["question"])
    answer = f"{THINK_OPEN}\n{solution}\n{THINK_CLOSE}\n\nThe answer is $\\boxed{{{final}}}$."
    messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]
    return {"prompt": prompt, "answer": final, "messages": messages, "id": row.get("id")}


# -- mbpp ----------------------------------------------------------------------------------------------------


def mbpp_entry_point(code: str, tests: list[str]) -> str:
    """The function the tests call: the first `def` of the reference code named in a test, else its last."""
    names = _DEF.findall(code)
    for name in names:
        if any(re.search(rf"\b{re.escape(name)}\s*\(", test) for test in tests):
            return name
    if names:
        return names[-1]
    called = re.search(r"assert\s+(?:not\s+)?\(?\s*(?:\w+\()*?([A-Za-z_]\w*)\s*\(", tests[0])
    if called is None:
        raise FormatError("columns 'code'/'test_list': cannot tell which function the tests call")
    return called.group(1)


def mbpp_label(row: dict[str, Any]) -> dict[str, Any]:
    """MBPP's `test_list` (+ `test_setup_code` / sanitized MBPP's `test_imports`) as an assert label."""
    tests = row["test_list"]
    if isinstance(tests, str):
        tests = json.loads(tests)
    if not isinstance(tests, list) or not tests or not all(isinstance(t, str) for t in tests):
        raise FormatError("column 'test_list': expected a non-empty list of assert statements")
    setup = row.get("test_setup_code") or ""
    imports = row.get("test_imports") or []
    header = "\n".join([*imports, setup.replace("\r\n", "\n")]).strip()
    entry_point = mbpp_entry_point(str(row.get("code") or ""), tests)
    if entry_point == "check":  # the harness defines check(candidate): keep the solution's under another name
        header = f"{header}\n_solution_check = check".strip()
        tests = [re.sub(r"\bcheck\s*\(", "_solution_check(", test) for test in tests]
    body = "\n".join(f"    {test.strip()}" for test in tests)
    test = (f"{header}\n\n" if header else "") + f"def check(candidate):\n{body}\n"
    return {"kind": "assert", "test": test, "entry_point": entry_point}


def _mbpp(row: dict[str, Any]) -> dict[str, Any]:
    text = row.get("text") if row.get("text") is not None else row["prompt"]
    label = mbpp_label(row)
    tests = json.loads(row["test_list"]) if isinstance(row["test_list"], str) else row["test_list"]
    prompt = MBPP_TEMPLATE.format(text=str(text).strip(), test=tests[0].strip())
    result: dict[str, Any] = {"prompt": prompt, "label": label, "id": str(row["task_id"])}
    if row.get("code"):
        code = row["code"].replace("\r\n", "\n").expandtabs(4).rstrip()
        entry = label["entry_point"]
        think = f"{THINK_OPEN}\nThe test calls `{entry}`, so I write the function `{entry}` for the task.\n{THINK_CLOSE}"
        answer = f"{think}\n\n```python\n{code}\n```"
        result["messages"] = [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]
    return result


# -- hh-rlhf -------------------------------------------------------------------------------------------------


def hh_turns(transcript: str, column: str) -> list[dict[str, str]]:
    """A "\\n\\nHuman: ...\\n\\nAssistant: ..." transcript -> chat turns."""
    parts = _HH_TURN.split(transcript)
    if len(parts) < 3 or parts[0].strip():
        raise FormatError(f"column '{column}': expected a '\\n\\nHuman: ...\\n\\nAssistant: ...' transcript")
    roles = {"Human": "user", "Assistant": "assistant"}
    return [{"role": roles[who], "content": text.strip()} for who, text in zip(parts[1::2], parts[2::2], strict=True)]


def _hh_rlhf(row: dict[str, Any]) -> list[dict[str, Any]]:
    chosen, rejected = row["chosen"], row["rejected"]
    if not all(isinstance(side, str) and side.lstrip("\n").startswith("Human:") for side in (chosen, rejected)):
        return [dict(row)]  # a pair written another way (answers, conversations): the generic pref path
    # The answers start after the last "Assistant:" the two transcripts share (Anthropic's own split; a
    # turn's text may itself contain "Human:"-like lines, so the turns are not re-split after it).
    shared = len(os.path.commonprefix([chosen, rejected]))
    cut = chosen.rfind(_HH_ASSISTANT, 0, shared)
    if cut < 0:
        raise FormatError("columns 'chosen'/'rejected': expected transcripts sharing turns up to an 'Assistant:'")
    context = hh_turns(chosen[:cut] + _HH_ASSISTANT + " x", "chosen")[:-1]
    better, worse = chosen[cut + len(_HH_ASSISTANT) :].strip(), rejected[cut + len(_HH_ASSISTANT) :].strip()
    if better == worse or not better or not worse:  # a tie (or an empty side) states no preference
        return []
    messages = [*context, {"role": "assistant", "content": better}]
    return [{"prompt": context, "chosen": better, "rejected": worse, "messages": messages, "id": row.get("id")}]


# -- oasst-tree ----------------------------------------------------------------------------------------------


def _oasst_role(node: dict[str, Any]) -> str:
    return "user" if node.get("role") == "prompter" else "assistant"


def _oasst_pairs(node: dict[str, Any], path: list[dict[str, str]], tree: str) -> Iterator[dict[str, Any]]:
    turns = [*path, {"role": _oasst_role(node), "content": node.get("text", "")}]
    replies = [reply for reply in node.get("replies") or [] if not reply.get("deleted")]
    ranked = sorted(
        (reply for reply in replies if reply.get("rank") is not None and reply.get("role") == "assistant"),
        key=lambda reply: reply["rank"],
    )
    for better, worse in itertools.combinations(ranked, 2):
        if better["rank"] == worse["rank"] or better.get("text") == worse.get("text"):
            continue
        yield {
            "id": f"{tree}/{better['message_id']}>{worse['message_id']}",
            "prompt": turns,
            "chosen": better["text"],
            "rejected": worse["text"],
        }
    for reply in replies:
        yield from _oasst_pairs(reply, turns, tree)


def _oasst_tree(row: dict[str, Any]) -> list[dict[str, Any]]:
    root = row["prompt"]
    if not isinstance(root, dict) or "text" not in root:
        raise FormatError("column 'prompt': expected the tree's root message {message_id, text, role, replies}")
    return list(_oasst_pairs(root, [], str(row["message_tree_id"])))


# -- prompts -------------------------------------------------------------------------------------------------


def _prompts(row: dict[str, Any]) -> dict[str, Any]:
    if row.get("motivation_app") is not None:
        raise FormatError(
            "a Self-Instruct user-oriented evaluation row (column 'motivation_app'): this set is for "
            "evaluation only, as its authors ask; it cannot be prepared for training"
        )
    if row.get("prompt") is not None:
        return {"prompt": row["prompt"], "id": row.get("id")}
    text = str(row["instruction"]).strip()
    instances = row.get("instances") or []
    first = instances[0].get("input") if instances and isinstance(instances[0], dict) else ""
    return {"prompt": f"{text}\n\n{first.strip()}" if first and first.strip() else text, "id": row.get("id")}


# -- registration --------------------------------------------------------------------------------------------

MULTI_ROW = ("hh-rlhf", "oasst-tree")
REAL_FORMATS = (
    Format("oasst-tree", "pref", ("message_tree_id", "prompt"), ("message_tree_id", "prompt"), _oasst_tree),  # type: ignore[arg-type]
    Format("hh-rlhf", "pref", ("chosen", "rejected"), ("chosen", "rejected"), _hh_rlhf,  # type: ignore[arg-type]
           excludes=("prompt", "messages")),
    Format("mbpp", "code", (("text", "prompt"), "test_list", "task_id"), ("test_list", "task_id"), _mbpp),
    Format("gsm8k", "math", ("question", "answer"), ("question", "answer"), _gsm8k,
           excludes=("problem", "messages", "input_output", "solutions")),
    Format("prompts", "general", (("prompt", "instruction"),), ("instruction", "instances"), _prompts),
    *TRL_FORMATS,  # trl-prompt-completion: data/formats_trl.py
    *VERL_FORMATS,  # verl's RL parquet layout: data/formats_verl.py
)  # fmt: skip
# Detected before data/formats.py's own (none of theirs claims these column sets).
REAL_DETECTION = tuple(fmt.name for fmt in REAL_FORMATS)

