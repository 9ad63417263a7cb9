"""Score rollout records through the verifier registry, one timing per record (what `cascade verify`, the
reward service and reward_func run).

Records are scored as `verifiers.verify_batch` scores them: grouped by domain (the given one or the
record's), each group through its verifier's own `verify_batch` (code runs its sandboxes in parallel there),
the verifier from `get_verifier(domain, **options[domain])`. Added here: an up-front `check_label`, so a
label of the wrong shape is reported as such; the wall time of each record; and verifiers kept per process
(warm sandboxes and caches survive across chunks and requests). Nothing here raises for a bad record: it
becomes a row error that says what was expected.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cascade_cli import verifiers
from cascade_cli.errors import CascadeUsageError
from cascade_cli.jsonl import write_jsonl
from cascade_cli.verifiers.base import RecordError, Score, Verifier, error_score, parse_label

Options = dict[str, dict[str, Any]]
# Records handed to a verifier's verify_batch at once in one process (progress is reported per chunk).
IN_PROCESS_CHUNK = 64


@dataclass
class RowResult:
    reward: float
    passed: bool
    details: dict[str, Any] = field(default_factory=dict)
    latency_s: float = 0.0
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "reward": self.reward,
            "passed": self.passed,
            "details": self.details,
            "latency_s": self.latency_s,
            "error": self.error,
        }


# Verifiers built in this process, by (domain, options). Construction may be costly (sandbox probes).
_VERIFIERS: dict[tuple[str, str], Verifier] = {}


def load_verifier(domain: str, options: dict[str, Any]) -> Verifier:
    """The registry's verifier for `domain`, cached per process. Raises KeyError / ImportError / TypeError."""
    key = (domain, json.dumps(options, sort_keys=True, default=str))
    if key not in _VERIFIERS:
        _VERIFIERS[key] = verifiers.get_verifier(domain, **options)
    return _VERIFIERS[key]


def verifier_problem(domain: str, options: dict[str, Any]) -> str | None:
    """None when `domain` has a working verifier for these options, else what is wrong (for up-front checks)."""
    try:
        load_verifier(domain, options)
    except KeyError as error:
        return str(error.args[0])
    except ImportError as error:
        return f"the verifier for domain {domain!r} is not available ({error})"
    except TypeError as error:
        return f"bad option for the {domain!r} verifier: {error}"
    except Exception as error:  # e.g. the code verifier without a usable sandbox (CascadeRunError)
        return f"the {domain!r} verifier cannot start: {error}"
    return None


def _error(message: str) -> RowResult:
    return RowResult(0.0, False, {"error": message}, error=message)


def _precheck(record: Any, domain: str | None, options: Options) -> RowResult | str:
    """The record's domain when it can be scored, else its row error."""
    if not isinstance(record, dict):
        return _error(f"expected a JSON object (a rollout record), found {type(record).__name__}")
    record_domain = domain or record.get("domain")
    if not record_domain or not isinstance(record_domain, str):
        return _error("missing field 'domain' (and no --domain given)")
    problem = verifier_problem(record_domain, options.get(record_domain, {}))
    if problem:
        return _error(problem)
    verifier = load_verifier(record_domain, options.get(record_domain, {}))
    for name in ("response", "label"):
        if name not in record:
            return _error(f"missing field {name!r}")
    try:
        label_problem = verifier.check_label(parse_label(record))
    except RecordError as error:
        return _error(str(error))
    except Exception as error:  # a verifier bug in check_label must not end the batch
        return _error(f"verifier error in check_label: {type(error).__name__}: {error}")
    if label_problem:
        return _error(f"label of the wrong shape for domain {record_domain!r}: {label_problem}")
    return record_domain


def _timed_verify_batch(verifier: Verifier, records: list[dict[str, Any]]) -> list[RowResult]:
    """`verifier.verify_batch(records)` (a verifier may run its batch in parallel, as code does) with the wall
    time of each record: `verify_batch` scores each record through `self.score`, which is timed here."""
    latencies: dict[int, float] = {}
    plain_score = verifier.score

    def timed_score(record: dict[str, Any]) -> Score:
        start = time.perf_counter()
        try:
            return plain_score(record)
        finally:
            latencies[id(record)] = time.perf_counter() - start

    verifier.score = timed_score  # type: ignore[method-assign]
    try:
        scores = verifier.verify_batch(records)
    except Exception as error:  # a verifier bug in its batch path: every row says so, the batch goes on
        message = f"verifier error in verify_batch: {type(error).__name__}: {error}"
        scores = [error_score(message) for _ in records]
    finally:
        del verifier.score
    results = []
    for record, score in zip(records, scores, strict=True):
        error = score.details.get("error") if isinstance(score.details, dict) else None
        results.append(
            RowResult(
                float(score.reward),
                bool(score.passed),
                dict(score.details),
                latencies.get(id(record), 0.0),
                error,
            )
        )
    return results


def score_records(
    records: list[Any], domain: str | None = None, options: Options | None = None
) -> list[RowResult]:
    """Score records in order, each domain's records through its verifier's `verify_batch`. Never raises."""
    options = options or {}
    results: list[RowResult | None] = [None] * len(records)
    groups: dict[str, list[int]] = {}
    for index, record in enumerate(records):
        start = time.perf_counter()
        checked = _precheck(record, domain, options)
        if isinstance(checked, RowResult):
            checked.latency_s = time.perf_counter() - start
            results[index] = checked
        else:
            groups.setdefault(checked, []).append(index)
    for record_domain, indices in groups.items():
        verifier = load_verifier(record_domain, options.get(record_domain, {}))
        for index, result in zip(
            indices, _timed_verify_batch(verifier, [records[i] for i in indices]), strict=True
        ):
            results[index] = result
    return results  # type: ignore[return-value]


def score_record(record: Any, domain: str | None = None, options: Options | None = None) -> RowResult:
    """One record -> RowResult. Never raises."""
    return score_records([record], domain, options)[0]


def _score_chunk(args: tuple[list[Any], str | None, Options]) -> list[dict[str, Any]]:
    records, domain, options = args
    return [result.to_dict() for result in score_records(records, domain, options)]


def score_many(
    records: list[Any],
    domain: str | None = None,
    options: Options | None = None,
    workers: int = 1,
    on_progress: Callable[[int], None] | None = None,
) -> list[RowResult]:
    """Score records in order; with `workers > 1` chunks run in a process pool (verifiers are CPU-bound)."""
    options = options or {}
    if workers <= 1 or len(records) < 2:
        results = []
        for start in range(0, len(records), IN_PROCESS_CHUNK):
            chunk = score_records(records[start : start + IN_PROCESS_CHUNK], domain, options)
            results.extend(chunk)
            if on_progress:
                on_progress(len(chunk))
        return results
    chunk_size = max(1, min(64, -(-len(records) // (workers * 8))))
    starts = list(range(0, len(records), chunk_size))
    by_start: dict[int, list[RowResult]] = {}
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {
            pool.submit(_score_chunk, (records[start : start + chunk_size], domain, options)): start
            for start in starts
        }
        for future in as_completed(futures):
            chunk = [RowResult(**row) for row in future.result()]
            by_start[futures[future]] = chunk
            if on_progress:
                on_progress(len(chunk))
    return [result for start in starts for result in by_start[start]]


def read_records(path: str | Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed row or a RowResult error) for every non-blank line; a bad line is one row's error,
    not the batch's."""
    path = Path(path)
    if not path.exists():
        raise CascadeUsageError(f"{path}: file not found")
    if path.is_dir():
        raise CascadeUsageError(f"{path}: expected a JSON Lines file of rollout records, found a directory")
    with path.open("r", encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as error:
                yield number, _error(f"malformed JSON ({error.msg} at column {error.colno})")


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
    scored = iter(score_many([row for _, row in to_score], domain, options, workers, on_progress))
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
