"""Benchmark rows: the `Benchmark` record and the per-domain normalizers that turn a raw source row into a
benchmark row (a canonical row plus `question`, the raw problem decontamination compares, and `reference`
where the source ships one). The registry of named benchmarks is benchmarks.py.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cascade_cli.errors import CascadeUsageError
from cascade_cli.records import first_value

MATH_TEMPLATE = "{problem}\n\nPlease reason step by step, and put your final answer within \\boxed{{}}."
CODE_STDIO_TEMPLATE = (
    "{question}\n\nWrite a Python 3 program that reads from standard input and writes to standard output. "
    "Put the complete program in one ```python code block."
)
HUMANEVAL_TEMPLATE = (
    "Complete the following Python function. Return the complete function (with its imports) in one "
    "```python code block.\n\n```python\n{prompt}```"
)
MCQ_TEMPLATE = (
    "{question}\n\n{options}\n\n"
    'Answer with the letter of the correct option. End your response with a line of the form "Answer: X".'
)
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True)
class Benchmark:
    """One benchmark. `load()` returns benchmark rows; `metric` is `accuracy` or `ifeval` (four metrics)."""

    name: str
    domain: str
    load: Callable[[], list[dict[str, Any]]] = field(repr=False)
    description: str = ""
    mode: str = "think"
    metric: str = "accuracy"
    default_k: int = 8
    source: str = ""
    # Beside k: the paper's temperature 0.6 (its 64K budget cut to a CPU run's); gsm8k / mbpp are greedy.
    default_temperature: float = 0.6
    default_max_tokens: int = 1024
    # math: how answers are read (verifiers/math_extraction.py): boxed_first (None: so) or flexible (GSM8K)
    extraction: str | None = None

    def verifier_options(self) -> dict[str, Any]:
        """Keyword arguments for this benchmark's verifier."""
        return {"extraction": self.extraction} if self.extraction else {}

    def rows(self, limit: int | None = None) -> list[dict[str, Any]]:
        rows = self.load()
        return rows[:limit] if limit else rows


def _stable_rng(text: str) -> random.Random:
    return random.Random(int(hashlib.sha256(text.encode()).hexdigest()[:16], 16))


# ---------------------------------------------------------------------------------------------------------
# per-domain normalizers: a raw source row -> a benchmark row (also used for --benchmark-file and hub ids)
# ---------------------------------------------------------------------------------------------------------


def _row(  # a canonical row plus `question` (the raw problem that decontamination compares)
    row_id: str, domain: str, prompt: Any, label: Any, mode: str, source: str, question: Any = None, **extra: Any
) -> dict[str, Any]:
    row = {"id": row_id, "domain": domain, "prompt": prompt, "label": label, "mode": mode, "source": source}
    row["question"] = prompt if question is None else question
    row.update({key: value for key, value in extra.items() if value is not None})
    return row


def normalize_math(raw: dict[str, Any], index: int, source: str) -> dict[str, Any]:
    problem = first_value(raw, "problem", "question", "Problem", "prompt")
    answer = first_value(raw, "answer", "Answer", "expected_answer")
    if problem is None or answer is None:
        raise ValueError(f"expected 'problem' (or 'question') and 'answer'; found keys {sorted(raw)}")
    answer = str(answer)
    row_id = str(first_value(raw, "id", "unique_id", "ID") or f"{source}/{index}")
    return _row(
        row_id,
        "math",
        MATH_TEMPLATE.format(problem=problem),
        {"answer": answer},
        "think",
        source,
        question=problem,
        reference=f"The answer is $\\boxed{{{answer}}}$.",
    )


def normalize_if(raw: dict[str, Any], index: int, source: str) -> dict[str, Any]:
    if "prompt" not in raw or "instruction_id_list" not in raw:
        raise ValueError(f"expected 'prompt', 'instruction_id_list' and 'kwargs'; found keys {sorted(raw)}")
    kwargs = raw.get("kwargs") or [{} for _ in raw["instruction_id_list"]]
    # IFEval's kwargs carry explicit nulls for unused arguments; the checkers want them absent.
    kwargs = [{key: value for key, value in (entry or {}).items() if value is not None} for entry in kwargs]
    label = {"instruction_id_list": list(raw["instruction_id_list"]), "kwargs": kwargs}
    row_id = str(first_value(raw, "id", "key") if first_value(raw, "id", "key") is not None else f"{source}/{index}")
    return _row(row_id, "if", raw["prompt"], label, "no_think", source)


def _code_block(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


def normalize_code_stdio(raw: dict[str, Any], index: int, source: str) -> dict[str, Any]:
    question = first_value(raw, "question", "problem", "question_content", "description")
    inputs, outputs = raw.get("inputs"), raw.get("outputs")
    if question is None or not isinstance(inputs, list) or not isinstance(outputs, list):
        raise ValueError(
            f"expected 'question', 'inputs' (list) and 'outputs' (list); found keys {sorted(raw)}"
        )
    label: dict[str, Any] = {"kind": "stdio", "inputs": inputs, "outputs": outputs}
    for key in ("time_limit_s", "memory_mb"):
        if key in raw:
            label[key] = raw[key]
    solution = raw.get("reference_solution")
    return _row(
        str(raw.get("id") or f"{source}/{index}"),
        "code",
        CODE_STDIO_TEMPLATE.format(question=question),
        label,
        "think",
        source,
        question=question,
        reference=_code_block(solution) if solution else None,
    )


def normalize_humaneval(raw: dict[str, Any], index: int, source: str) -> dict[str, Any]:
    # The prompt as the test's trusted prelude: its helpers (poly, encode_cyclic) come from the task, not
    # from a program that could redefine them.
    label = {"kind": "assert", "test": raw["test"], "entry_point": raw["entry_point"], "prelude": raw["prompt"]}
    reference = (
        _code_block(raw["prompt"] + raw["canonical_solution"]) if raw.get("canonical_solution") else None
    )
    return _row(
        raw["task_id"],
        "code",
        HUMANEVAL_TEMPLATE.format(prompt=raw["prompt"]),
        label,
        "think",
        source,
        question=raw["prompt"],
        reference=reference,
    )


def _mcq_options(raw: dict[str, Any], row_id: str) -> tuple[list[str], str]:
    """(options in display order, correct letter) from MMLU-Pro, GPQA or plain `choices` rows."""
    if "Correct Answer" in raw:  # GPQA: one correct, three incorrect; shuffled by a seed from the row
        options = [raw["Correct Answer"]] + [raw[f"Incorrect Answer {i}"] for i in (1, 2, 3)]
        options = [str(option).strip() for option in options]
        order = list(range(len(options)))
        _stable_rng(row_id).shuffle(order)
        return [options[i] for i in order], LETTERS[order.index(0)]
    options = first_value(raw, "options", "choices")
    if isinstance(options, dict):  # {"A": "...", "B": "..."}
        letters = sorted(options)
        options = [options[letter] for letter in letters]
    if not isinstance(options, list) or len(options) < 2:
        raise ValueError(
            f"expected 'options' or 'choices' (a list of 2 or more), found {type(options).__name__}"
        )
    answer = first_value(raw, "answer", "answer_index", "label")
    if isinstance(answer, int) and not isinstance(answer, bool):
        letter = LETTERS[answer]
    elif isinstance(answer, str) and answer.strip().upper() in LETTERS[: len(options)]:
        letter = answer.strip().upper()
    elif isinstance(answer, str) and answer in options:
        letter = LETTERS[options.index(answer)]
    else:
        raise ValueError(
            f"expected 'answer' as a letter A-{LETTERS[len(options) - 1]}, an index or an option "
            f"text; found {answer!r}"
        )
    return [str(option) for option in options], letter


def normalize_mcq(raw: dict[str, Any], index: int, source: str) -> dict[str, Any]:
    question = first_value(raw, "question", "Question", "problem")
    if question is None:
        raise ValueError(f"expected 'question'; found keys {sorted(raw)}")
    row_id = str(first_value(raw, "id", "question_id", "Record ID") or f"{source}/{index}")
    options, letter = _mcq_options(raw, row_id)
    listing = "\n".join(f"{LETTERS[i]}) {option}" for i, option in enumerate(options))
    prompt = MCQ_TEMPLATE.format(question=str(question).strip(), options=listing)
    label = {"answer": letter, "num_choices": len(options)}
    return _row(
        row_id, "mcq", prompt, label, "think", source, question=question, reference=f"Answer: {letter}"
    )


NORMALIZERS: dict[str, Callable[[dict[str, Any], int, str], dict[str, Any]]] = {
    "math": normalize_math,
    "if": normalize_if,
    "code": normalize_code_stdio,
    "mcq": normalize_mcq,
}


def _is_canonical(raw: dict[str, Any]) -> bool:
    return "label" in raw and ("prompt" in raw or "messages" in raw)


def canonical_to_row(raw: dict[str, Any], index: int, source: str, domain: str) -> dict[str, Any]:
    prompt = raw.get("prompt")
    if prompt is None:  # a messages row: everything up to the last assistant turn is the prompt
        messages = list(raw["messages"])
        while messages and messages[-1].get("role") == "assistant":
            messages.pop()
        prompt = messages
    row = dict(raw)
    row.update(
        id=str(raw.get("id", f"{source}/{index}")),
        domain=domain or raw.get("domain"),
        prompt=prompt,
        mode=raw.get("mode") or "think",
        source=raw.get("source") or source,
    )
    row.setdefault("question", prompt)
    return row


def normalize_rows(
    raw_rows: list[tuple[int, dict[str, Any]]], domain: str, source: str
) -> list[dict[str, Any]]:
    """Canonical rows pass through; other rows go through the domain's normalizer. Errors name the row."""
    rows = []
    for line, raw in raw_rows:
        try:
            if _is_canonical(raw):
                rows.append(canonical_to_row(raw, line, source, domain))
            elif domain in NORMALIZERS:
                rows.append(NORMALIZERS[domain](raw, line, source))
            else:
                raise ValueError(
                    f"expected a canonical row with 'prompt' (or 'messages') and 'label'; found keys {sorted(raw)}"
                )
        except (KeyError, ValueError, TypeError) as error:
            detail = f"missing key {error}" if isinstance(error, KeyError) else str(error)
            raise CascadeUsageError(f"{source}: row {line}: {detail}") from None
    return rows
