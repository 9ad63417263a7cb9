"""The column names prepare-data reads (what `--map NAME=COLUMN` may target) and text columns as text.

`--map responze=completion` would copy the answers to a column nobody reads, so every target must be one of
`TARGETS` (a did-you-mean names the closest). Numbers and booleans in the columns that hold text (a CSV of
numeric answers read by `datasets`, a JSON `"completion": 4`) become their text, as Arrow casts them
(`4`, `2.5`, `true`), instead of failing a row's string checks.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from cascade_cli.errors import CascadeUsageError

# The canonical row's keys and the columns the generic path of data/normalize.py reads.
CANONICAL: tuple[str, ...] = (
    "id",
    "domain",
    "mode",
    "source",
    "prompt",
    "messages",
    "label",
    "chosen",
    "rejected",
    "tools",
    "reference",
    "task",
    "correct",
    "pass_rate",
    "pass_rate_k",
)
GENERIC: tuple[str, ...] = (
    "problem",
    "question",
    "answer",
    "system",
    "conversations",
    "instruction",
    "input",
    "output",
    "response",
    "completion",
    "answer_text",
    "unique_id",
    "instance_id",
    "task_id",
    "key",
    "problem_id",
    "instruction_id_list",
    "kwargs",
    "test",
    "entry_point",
    "inputs",
    "outputs",
    "input_output",
    "golden_patch",
    "patch",
    "original_files",
)
# Columns of the named formats (data/formats.py, data/formats_real.py, data/preferences.py).
FORMAT_COLUMNS: tuple[str, ...] = (
    "expected_answer",
    "problem_statement",
    "relevant_file_contents",
    "file_contents",
    "question_content",
    "public_test_cases",
    "private_test_cases",
    "metadata",
    "starter_code",
    "test_list",
    "test_setup_code",
    "test_imports",
    "code",
    "text",
    "message_tree_id",
    "instances",
    "thinking",
    "reasoning",
    "thinking_mode",
    "uuid",
    "context",
    "response_1",
    "response_2",
    "preference_strength",
    "overall_preference",
    "completions",
    "score_chosen",
    "score_rejected",
    "prompt_id",
    "data_source",
    "ability",
    "reward_model",
    "extra_info",
)
TARGETS: frozenset[str] = frozenset((*CANONICAL, *GENERIC, *FORMAT_COLUMNS))

# Columns that hold text (a prompt, an answer, a turn). `answer` is left out: the math label turns a
# number into its text itself (4.0 -> "4").
TEXT_COLUMNS: tuple[str, ...] = (
    "prompt",
    "problem",
    "question",
    "system",
    "instruction",
    "input",
    "output",
    "response",
    "completion",
    "answer_text",
    "chosen",
    "rejected",
    "text",
    "question_content",
    "problem_statement",
    "expected_answer",
)
MESSAGE_COLUMNS: tuple[str, ...] = ("messages", "conversations", "prompt", "completion", "chosen", "rejected")


def check_map_targets(targets: Iterable[str]) -> None:
    """Usage error for a `--map` target prepare-data never reads, with the closest known name."""
    for target in targets:
        if target in TARGETS:
            continue
        close = difflib.get_close_matches(target, sorted(TARGETS), n=1, cutoff=0.6)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise CascadeUsageError(
            f"map: '{target}' is not a column prepare-data reads; {hint}"
            f"expected one of {', '.join(sorted(CANONICAL + GENERIC))} (or a named format's columns)"
        )


def as_text(value: Any) -> Any:
    """A number or boolean as the text Arrow's cast to string gives; anything else unchanged."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return value


def _turns_as_text(turns: Any) -> Any:
    if not isinstance(turns, list):
        return turns
    return [
        {**turn, **{key: as_text(turn[key]) for key in ("content", "value") if key in turn}}
        if isinstance(turn, dict)
        else turn
        for turn in turns
    ]


def text_columns_as_text(row: dict[str, Any]) -> dict[str, Any]:
    """The row with numbers and booleans in its text columns (and in its turns' contents) as text."""
    fixed = dict(row)
    for column in TEXT_COLUMNS:
        if column in fixed:
            fixed[column] = as_text(fixed[column])
    for column in MESSAGE_COLUMNS:
        if isinstance(fixed.get(column), list):
            fixed[column] = _turns_as_text(fixed[column])
    return fixed


ANSWER_COLUMNS: tuple[str, ...] = ("completion", "response", "output", "chosen", "rejected")


def empty_answer_column(row: dict[str, Any]) -> str | None:
    """The first answer column the row has but leaves empty (null or blank), else None."""
    for column in ANSWER_COLUMNS:
        if column in row and (
            row[column] is None or (isinstance(row[column], str) and not row[column].strip())
        ):
            return column
    return None
