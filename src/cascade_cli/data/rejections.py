"""Source rows that did not become rows, each with its file, row number and reason.

Two kinds, both written to `OUT/rejected.jsonl` and counted per reason in the data card:

- rejected: the row could not be read or does not fit (malformed JSON, a missing column, a value of the
  wrong type). These are mistakes in the data or the mapping: more of them than `max_rejected` (a share of
  the rows read, default 0) ends the run with exit 2 naming the first few.
- skipped: the row states nothing to train on by its format's own rules (a preference tie, an OASST tree
  with no ranked pair). Expected of such data, so counted and listed but never failing the run.

Rows the filters drop on request (decontamination, prompt overlap, the held-out split's overlap,
drop_math_code, drop_code_switch) are neither: the card's `filters` and `OUT/removed.jsonl` report them.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cascade_cli.console import console
from cascade_cli.errors import CascadeUsageError
from cascade_cli.jsonl import write_jsonl

REJECTED_FILE = "rejected.jsonl"
FIRST_FEW = 3  # rejections named in the error line
RAW_CHARS = 2000  # a rejected row is kept in rejected.jsonl up to this many characters of JSON
_VARYING = re.compile(
    r"(?:[;,] found| \(columns:|; columns:) .*$"
)  # the row's own values: not part of the reason's name


def reason_of(error: Exception, where: str, number: int) -> str:
    """An error's message without its `WHERE: row N: ` prefix(es), the part that says what is wrong."""
    text = str(error)
    for prefix in (f"{where}: row {number}: ", "row 1: "):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    return text


def reason_name(reason: str) -> str:
    """The reason without the row's own values, so that rows failing the same way count together."""
    return _VARYING.sub("", reason).rstrip(" ;,(") or reason


def _raw(row: Any) -> Any:
    text = json.dumps(row, ensure_ascii=False, default=str)
    return row if len(text) <= RAW_CHARS else text[:RAW_CHARS] + "..."


@dataclass
class Rejections:
    records: list[dict[str, Any]] = field(default_factory=list)

    def reject(self, where: str, number: int, reason: str, row: Any) -> None:
        self.records.append(
            {"file": where, "row": number, "reason": reason, "skipped": False, "source_row": _raw(row)}
        )

    def skip(self, where: str, number: int, reason: str, row: Any) -> None:
        self.records.append(
            {"file": where, "row": number, "reason": reason, "skipped": True, "source_row": _raw(row)}
        )

    @property
    def rejected(self) -> list[dict[str, Any]]:
        return [record for record in self.records if not record["skipped"]]

    @property
    def skipped(self) -> list[dict[str, Any]]:
        return [record for record in self.records if record["skipped"]]

    def counts(self) -> dict[str, Any]:
        """What the data card carries: totals and counts per reason."""
        return {
            "rejected": len(self.rejected),
            "skipped": len(self.skipped),
            "rejected_by_reason": dict(
                Counter(reason_name(r["reason"]) for r in self.rejected).most_common()
            ),
            "skipped_by_reason": dict(Counter(reason_name(r["reason"]) for r in self.skipped).most_common()),
        }

    def write(self, out: Path) -> None:
        """OUT/rejected.jsonl with every record (a stale one from an earlier run removed when there are none)."""
        path = out / REJECTED_FILE
        if self.records:
            write_jsonl(path, self.records)
        elif path.exists():
            path.unlink()

    def print_counts(self) -> None:
        counts = self.counts()
        for kind in ("rejected", "skipped"):
            for reason, count in counts[f"{kind}_by_reason"].items():
                console.print(f"{kind} {count} row(s): {reason}", soft_wrap=True, markup=False)

    def check_share(self, read: int, max_rejected: float, out: Path | None) -> None:
        """Exit 2 (a usage error naming the first few) when more than `max_rejected` of the rows read were
        rejected."""
        rejected = self.rejected
        if not rejected or len(rejected) <= max_rejected * read:
            return
        first = "; ".join(f"{r['file']}: row {r['row']}: {r['reason']}" for r in rejected[:FIRST_FEW])
        more = f" (+{len(rejected) - FIRST_FEW} more)" if len(rejected) > FIRST_FEW else ""
        listed = f"; all in {out / REJECTED_FILE}" if out is not None else ""
        reasons = self.counts()["rejected_by_reason"]
        by_reason = (
            "" if len(reasons) < 2 else " [" + "; ".join(f"{n} x {r}" for r, n in reasons.items()) + "]"
        )
        raise CascadeUsageError(
            f"{len(rejected)} of {read} source rows rejected ({len(rejected) / max(read, 1):.1%}, more than "
            f"max_rejected={max_rejected:g}){by_reason}: {first}{more}{listed}"
        )
