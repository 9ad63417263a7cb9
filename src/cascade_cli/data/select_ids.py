"""Which rows a prepare-data run takes. `keep_ids`: only the rows whose id is listed, or falls in a listed
range `A-B` of integer ids (a standard split given by ids, e.g. MBPP's train + validation: `[511-974]`).
`include`: the canonical rows of other prepare-data folders added (one data mix for one stage)."""

from __future__ import annotations

import re
from typing import Any

from cascade_cli.errors import CascadeUsageError

_RANGE = re.compile(r"\s*(-?\d+)\s*-\s*(-?\d+)\s*")


def parse_keep_ids(specs: list[str]) -> tuple[set[str], list[tuple[int, int]]]:
    """(exact ids, inclusive integer ranges) from `["7", "511-974"]`."""
    exact: set[str] = set()
    ranges: list[tuple[int, int]] = []
    for spec in specs:
        match = _RANGE.fullmatch(str(spec))
        if match:
            low, high = int(match.group(1)), int(match.group(2))
            if high < low:
                raise CascadeUsageError(f"prepare-data: keep_ids: range {spec!r} ends before it starts")
            ranges.append((low, high))
        elif str(spec).strip():
            exact.add(str(spec).strip())
        else:
            raise CascadeUsageError("prepare-data: keep_ids: expected ids or ranges A-B; found an empty entry")
    return exact, ranges


def keep_rows(rows: list[dict[str, Any]], specs: list[str]) -> list[dict[str, Any]]:
    exact, ranges = parse_keep_ids(specs)

    def kept(row_id: str) -> bool:
        if row_id in exact:
            return True
        number = int(row_id) if re.fullmatch(r"-?\d+", row_id) else None
        return number is not None and any(low <= number <= high for low, high in ranges)

    return [row for row in rows if kept(str(row.get("id")))]


def included_rows(spec: str) -> list[dict[str, Any]]:
    """`include`: the canonical rows of a prepare-data folder (its data.jsonl) or a canonical file, checked."""
    from cascade_cli.data.io import row_error
    from cascade_cli.records import load_rows

    rows = load_rows(spec)
    for number, row in enumerate(rows, start=1):
        problem = row_error(row)
        if problem:
            raise CascadeUsageError(f"include {spec}: row {number}: {problem} (expected canonical rows)")
    return rows
