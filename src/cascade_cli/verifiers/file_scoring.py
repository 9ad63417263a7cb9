"""`cascade verify`'s file front-end: read a JSONL file of rollout records, score them through the
scoring path (`verifiers/batch.py`), write the scored rows and summarise them (pass rate, latency, rows/s).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from cascade_cli import verifiers
from cascade_cli.errors import CascadeUsageError
from cascade_cli.jsonl import non_blank_lines, write_jsonl
from cascade_cli.verifiers.batch import Options, RowResult, row_error, score_records, verifier_problem

__all__ = ["Options", "parse_options", "read_records", "summarise", "summary_table", "verify_file"]


def read_records(path: str | Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed row or a RowResult error) for every non-blank line; a bad line is one row's error,
    not the batch's."""
    for number, line in non_blank_lines(path, expected="a JSON Lines file of rollout records"):
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as error:
            yield number, row_error(f"malformed JSON ({error.msg} at column {error.colno})")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[max(0, min(98, round(q) - 1))]


def summarise(results: list[RowResult], wall_s: float) -> dict[str, Any]:
    count = len(results)
    scored = [r for r in results if r.error is None]
    latencies_ms = [r.latency_s * 1000 for r in results]
    return {
        "count": count,
        "errors": count - len(scored),
        "passed": sum(r.passed for r in results),
        "pass_rate": (sum(r.passed for r in results) / count) if count else 0.0,
        "mean_reward": (sum(r.reward for r in results) / count) if count else 0.0,
        "latency_ms_p50": percentile(latencies_ms, 50),
        "latency_ms_p95": percentile(latencies_ms, 95),
        "rows_per_s": count / wall_s if wall_s > 0 else 0.0,
        "wall_s": wall_s,
    }


def parse_options(pairs: list[str], domain: str | None) -> Options:
    """`key=value` (for `domain`) or `domain.key=value`; values are JSON when they parse (true, 3, "x")."""
    options: Options = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise CascadeUsageError(f"--option {pair!r}: expected key=value or domain.key=value")
        target, dot, name = key.partition(".")
        if dot and target in verifiers.known_domains():
            option_domain, key = target, name
        elif domain:
            option_domain = domain
        else:
            raise CascadeUsageError(
                f"--option {pair!r}: say which domain it is for (domain.key=value) or give --domain"
            )
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        options.setdefault(option_domain, {})[key] = value
    return options


def verify_file(
    input_path: str | Path,
    output_path: str | Path | None = None,
    domain: str | None = None,
    options: Options | None = None,
    workers: int = 1,
    on_total: Callable[[int], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Score a JSONL file of rollout records. Returns (summary, output rows in input order); writes the rows to
    `output_path` when given. Each output row is the record plus row, reward, passed, details, latency_ms and,
    for a bad row, error ("row N: what was expected")."""
    options = options or {}
    if domain is not None:
        problem = verifier_problem(domain, options.get(domain, {}))
        if problem:
            raise CascadeUsageError(f"--domain {domain}: {problem}")
    rows = list(read_records(input_path))
    if on_total:
        on_total(len(rows))
    to_score = [(number, row) for number, row in rows if not isinstance(row, RowResult)]
    start = time.perf_counter()
    scored = iter(
        score_records([row for _, row in to_score], domain, options, workers=workers, on_progress=on_progress)
    )
    wall_s = time.perf_counter() - start
    results: list[RowResult] = []
    out_rows: list[dict[str, Any]] = []
    for number, row in rows:
        result = row if isinstance(row, RowResult) else next(scored)
        if isinstance(row, RowResult) and on_progress:
            on_progress(1)
        record = dict(row) if isinstance(row, dict) else {}
        if result.error is not None:
            result.error = f"{Path(input_path).name}: row {number}: {result.error}"
            result.details = {**result.details, "error": result.error}
        results.append(result)
        out_rows.append(
            {
                **record,
                "row": number,
                "reward": result.reward,
                "passed": result.passed,
                "details": result.details,
                "latency_ms": round(result.latency_s * 1000, 4),
                **({"error": result.error} if result.error is not None else {}),
            }
        )
    if output_path is not None:
        write_jsonl(output_path, out_rows)
    return summarise(results, wall_s), out_rows


def summary_table(summary: dict[str, Any], title: str = "verify") -> Any:
    from rich.table import Table

    table = Table(title=title, show_header=True, header_style="bold")
    table.add_column("count", justify="right")
    table.add_column("bad rows", justify="right")
    table.add_column("pass rate", justify="right")
    table.add_column("mean reward", justify="right")
    table.add_column("p50 ms", justify="right")
    table.add_column("p95 ms", justify="right")
    table.add_column("rows/s", justify="right")
    table.add_row(
        str(summary["count"]),
        str(summary["errors"]),
        f"{summary['pass_rate']:.2%}",
        f"{summary['mean_reward']:.4f}",
        f"{summary['latency_ms_p50']:.2f}",
        f"{summary['latency_ms_p95']:.2f}",
        f"{summary['rows_per_s']:.1f}",
    )
    return table
