"""Reading and writing JSON Lines with errors that name the file and the row."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from cascade_cli.errors import CascadeUsageError
from cascade_cli.files import naming


def non_blank_lines(path: str | Path, expected: str = "a JSON Lines file") -> Iterator[tuple[int, str]]:
    """(1-based line number, text) of every non-blank line; a missing file or a folder is a usage error."""
    path = Path(path)
    if not path.exists():
        raise CascadeUsageError(f"{path}: file not found")
    if path.is_dir():
        raise CascadeUsageError(f"{path}: expected {expected}, found a directory")
    with path.open("r", encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, start=1):
            if line.strip():
                yield line_number, line


def iter_jsonl(path: str | Path, strings_as: str | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (1-based line number, object) for every non-blank line; bad lines raise CascadeUsageError.
    `strings_as`: a line that is a bare JSON string becomes `{strings_as: text}` (plain prompt lists)."""
    for line_number, line in non_blank_lines(path):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise CascadeUsageError(
                f"{path}: row {line_number}: malformed JSON ({error.msg} at column {error.colno})"
            ) from None
        if isinstance(row, str) and strings_as:
            row = {strings_as: row}
        if not isinstance(row, dict):
            raise CascadeUsageError(
                f"{path}: row {line_number}: expected a JSON object, found {type(row).__name__}"
            )
        yield line_number, row


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    return [row for _, row in iter_jsonl(path)]


def write_jsonl(path: str | Path, rows: Iterable[dict[str, Any]]) -> int:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with naming(path), path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
            count += 1
    return count
