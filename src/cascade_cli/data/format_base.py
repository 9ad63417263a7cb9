"""The `Format` record (a named source format: its domain, columns and converter) and `FormatError`, shared by
data/formats.py (released and common formats) and data/formats_real.py (the real public sets)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Converter = Callable[[dict[str, Any]], Any]  # a row -> a row (data/formats.py), or a list of rows (MULTI_ROW)


class FormatError(ValueError):
    """A row that does not fit its format (the message names the missing or malformed column)."""


@dataclass(frozen=True)
class Format:
    name: str
    domain: str
    # Each entry is one required column, or a tuple of alternatives of which one must be present.
    required: tuple[str | tuple[str, ...], ...]
    # Columns that, all present, identify the format when detecting (defaults to the first alternatives).
    detect: tuple[str, ...]
    convert: Converter
    # Columns whose presence rules the format out when detecting (to tell apart formats sharing columns).
    excludes: tuple[str, ...] = ()

    def missing(self, row: dict[str, Any]) -> str | None:
        for column in self.required:
            options = column if isinstance(column, tuple) else (column,)
            if not any(row.get(option) is not None for option in options):
                return " or ".join(f"'{option}'" for option in options)
        return None
