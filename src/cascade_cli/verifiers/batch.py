"""The scoring path every caller uses: GRPO (`verifiers.verify_batch`), `cascade verify`, the reward service, reward_func,
pass-rate filtering and `cascade eval` all score rollout records through `score_records` here.

    results = score_records(records, domain="code", options={"code": {"workers": 8}})
    results[0].reward, results[0].passed, results[0].details, results[0].latency_s, results[0].error

What happens to a batch, in order:
1. Each record is checked up front: a JSON object, a known domain (the given one or the record's own), a
   `response`, and a `label` the domain's `check_label` accepts. A bad record becomes a row error that says
   what was expected; nothing here raises for a record.
2. The records of each domain go to that domain's verifier, built once per (domain, options) per process
   and kept (so the code verifier's warm sandbox pool serves every later batch; `close_verifiers()` or
   process exit closes them).
3. Up to `verifier.concurrency` records of a domain are scored at once in threads (code: one per warm
   sandbox), each timed, each under a per-record time limit: a record past it scores 0 with
   `details["error"]` saying so, and the rest of the batch goes on. The limit is the domain option
   `record_timeout_s` (default DEFAULT_RECORD_TIMEOUT_S; null for none), read here, never passed to the
   verifier.
With `workers > 1` the batch is split across processes (sympy and the IF checks are CPU-bound).
"""

from __future__ import annotations

import atexit
import json
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from typing import Any

from cascade_cli.verifiers.base import RECORD_TIMEOUT_OPTION, RecordError, Score, Verifier, parse_label
from cascade_cli.verifiers.deadline import DeadlineExceeded, run_with_deadline
from cascade_cli.verifiers.registry import _REGISTRY, get_verifier

Options = dict[str, dict[str, Any]]
DEFAULT_RECORD_TIMEOUT_S = 120.0
# How long past the limit a record may run before its thread is given up on (an interruptible verifier
# normally stops itself at the limit; this catches one blocked in a C call).
ABANDON_GRACE_S = 0.1


@dataclass
class RowResult:
    reward: float
    passed: bool
    details: dict[str, Any] = field(default_factory=dict)
    latency_s: float = 0.0
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_score(self) -> Score:
        return Score(self.reward, self.passed, self.details)


def row_error(message: str, latency_s: float = 0.0, **details: Any) -> RowResult:
    return RowResult(0.0, False, {"error": message, **details}, latency_s, message)


# ---- verifiers, one per (domain, options) per process ---------------------------------------------------

_VERIFIERS: dict[tuple[str, str, str], Verifier] = {}
_VERIFIERS_LOCK = threading.Lock()


def load_verifier(domain: str, options: dict[str, Any]) -> Verifier:
    """The registry's verifier for `domain`, built once per process. Raises KeyError / ImportError /
    TypeError / CascadeRunError (a code sandbox that cannot start) like `get_verifier`."""
    options = {key: value for key, value in options.items() if key != RECORD_TIMEOUT_OPTION}
    key = (domain, _REGISTRY.get(domain, ""), json.dumps(options, sort_keys=True, default=str))
    with _VERIFIERS_LOCK:  # held while building: two threads never build (and probe) the same verifier
        if key not in _VERIFIERS:
            _VERIFIERS[key] = get_verifier(domain, **options)
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


def close_verifiers() -> None:
    """Close every cached verifier (the code verifier's sandboxes) and forget them; runs at process exit."""
    with _VERIFIERS_LOCK:
        cached = list(_VERIFIERS.values())
        _VERIFIERS.clear()
    for verifier in cached:
        close = getattr(verifier, "close", None)
        if close is not None:
            close()


def _forget_after_fork() -> None:
    # A forked worker must not use the parent's sandboxes or threads: it builds its own verifiers.
    global _VERIFIERS_LOCK
    _VERIFIERS.clear()
    _VERIFIERS_LOCK = threading.Lock()


atexit.register(close_verifiers)
os.register_at_fork(after_in_child=_forget_after_fork)


def record_timeout(options: dict[str, Any]) -> float | None:
    """A domain's per-record limit in seconds (`record_timeout_s`, None for no limit)."""
    value = options.get(RECORD_TIMEOUT_OPTION, DEFAULT_RECORD_TIMEOUT_S)
    return None if value is None else float(value)


# ---- one verifier's records: threads, timing, the per-record limit --------------------------------------


def timeout_score(timeout_s: float) -> Score:
    return Score(
        0.0, False, {"error": f"verification timed out after {timeout_s:g} s (record_timeout_s)", "timeout": True}
    )


def _guarded_score(verifier: Verifier, record: dict[str, Any], timeout_s: float | None) -> Score:
    if timeout_s is None or not verifier.interruptible:
        return verifier.score(record)
    try:
        return run_with_deadline(lambda: verifier.score(record), timeout_s)
    except DeadlineExceeded:
        return timeout_score(timeout_s)


def score_timed(
    verifier: Verifier,
    records: list[dict[str, Any]],
    timeout_s: float | None = DEFAULT_RECORD_TIMEOUT_S,
    on_done: Callable[[int], None] | None = None,
) -> list[tuple[Score, float]]:
    """(score, seconds) of each record through `verifier.score`, `verifier.concurrency` records at once.

    Worker threads take the next record from a shared cursor; this thread watches the clock. A record past
    `timeout_s` scores `timeout_score`: an interruptible verifier is stopped in its thread by a deadline; a
    thread still stuck after ABANDON_GRACE_S more (a C call, a non-interruptible verifier) is left to finish
    on its own, its result dropped, and a fresh thread takes over the rest of the batch.
    """
    results: list[tuple[Score, float] | None] = [None] * len(records)
    running: dict[int, float] = {}  # index -> start time of the records being scored now
    cursor = iter(range(len(records)))
    changed = threading.Condition()
    finished = 0

    def work() -> None:
        nonlocal finished
        while True:
            with changed:
                index = next(cursor, None)
                if index is None:
                    return
                start = running[index] = time.perf_counter()
                changed.notify()
            score = _guarded_score(verifier, records[index], timeout_s)
            latency = time.perf_counter() - start
            with changed:
                if results[index] is not None:  # given up on: this thread retires, its replacement goes on
                    return
                del running[index]
                results[index] = (score, latency)
                finished += 1
                changed.notify()

    def spawn() -> None:
        threading.Thread(target=work, name="cascade-verify", daemon=True).start()

    with changed:
        for _ in range(max(1, min(verifier.concurrency, len(records)))):
            spawn()
    reported = 0
    while reported < len(records):
        with changed:
            if finished == reported:
                changed.wait(_next_wake(running, timeout_s))
            now = time.perf_counter()
            for index, start in list(running.items()):
                if timeout_s is not None and now - start > timeout_s + ABANDON_GRACE_S:
                    del running[index]
                    results[index] = (timeout_score(timeout_s), now - start)
                    finished += 1
                    spawn()
            newly, reported = finished - reported, finished
        if on_done and newly:
            on_done(newly)
    return results  # type: ignore[return-value]


def _next_wake(running: dict[int, float], timeout_s: float | None) -> float | None:
    """Seconds until the oldest running record is overdue (None: wait for a worker's notice)."""
    if timeout_s is None or not running:
        return None
    oldest = min(running.values())
    return max(0.0, oldest + timeout_s + ABANDON_GRACE_S - time.perf_counter())


# ---- a batch of records ---------------------------------------------------------------------------------


def _precheck(
    record: Any, domain: str | None, options: Options, loaded: dict[str, Verifier | str]
) -> RowResult | str:
    """The record's domain when it can be scored, else its row error. `loaded`: domain -> verifier or problem."""
    if not isinstance(record, dict):
        return row_error(f"expected a JSON object (a rollout record), found {type(record).__name__}")
    record_domain = domain or record.get("domain")
    if not record_domain or not isinstance(record_domain, str):
        return row_error("missing field 'domain' (and no --domain given)")
    if record_domain not in loaded:
        domain_options = options.get(record_domain, {})
        problem = verifier_problem(record_domain, domain_options)
        loaded[record_domain] = problem or load_verifier(record_domain, domain_options)
    verifier = loaded[record_domain]
    if isinstance(verifier, str):
        return row_error(verifier)
    problem = record_problem(verifier, record, record_domain)
    return row_error(problem) if problem else record_domain


def record_problem(verifier: Verifier, record: dict[str, Any], domain: str) -> str | None:
    """Why `verifier` cannot score `record` (a missing field, a label `check_label` refuses), or None."""
    for name in ("response", "label"):
        if name not in record:
            return f"missing field {name!r}"
    try:
        label_problem = verifier.check_label(parse_label(record))
    except RecordError as error:
        return str(error)
    except Exception as error:  # a verifier bug in check_label must not end the batch
        return f"verifier error in check_label: {type(error).__name__}: {error}"
    if label_problem:
        return f"label of the wrong shape for domain {domain!r}: {label_problem}"
    return None


def score_with(
    verifier: Verifier, records: list[dict[str, Any]], timeout_s: float | None = DEFAULT_RECORD_TIMEOUT_S
) -> list[Score]:
    """Every record through one verifier the batch way: checked up front (a bad record scores 0 with
    `details["error"]`), then `score_timed`."""
    scores: list[Score | None] = [None] * len(records)
    problems = {i: record_problem(verifier, record, verifier.domain) for i, record in enumerate(records)}
    for i, problem in problems.items():
        if problem:
            scores[i] = row_error(problem).to_score()
    good = [i for i in range(len(records)) if scores[i] is None]
    for i, (score, _) in zip(good, score_timed(verifier, [records[i] for i in good], timeout_s), strict=True):
        scores[i] = score
    return scores  # type: ignore[return-value]


def _score_in_process(
    records: list[Any], domain: str | None, options: Options, on_progress: Callable[[int], None] | None
) -> list[RowResult]:
    results: list[RowResult | None] = [None] * len(records)
    loaded: dict[str, Verifier | str] = {}
    groups: dict[str, list[int]] = {}
    for index, record in enumerate(records):
        start = time.perf_counter()
        checked = _precheck(record, domain, options, loaded)
        if isinstance(checked, RowResult):
            checked.latency_s = time.perf_counter() - start
            results[index] = checked
        else:
            groups.setdefault(checked, []).append(index)
    if on_progress and len(records) > sum(map(len, groups.values())):
        on_progress(len(records) - sum(map(len, groups.values())))
    for record_domain, indices in groups.items():
        verifier = loaded[record_domain]
        assert isinstance(verifier, Verifier)
        timed = score_timed(
            verifier, [records[i] for i in indices], record_timeout(options.get(record_domain, {})), on_progress
        )
        for index, (score, latency) in zip(indices, timed, strict=True):
            details = dict(score.details)
            results[index] = RowResult(
                float(score.reward), bool(score.passed), details, latency, details.get("error")
            )
    return results  # type: ignore[return-value]


def _score_chunk(args: tuple[list[Any], str | None, Options]) -> list[dict[str, Any]]:
    records, domain, options = args
    return [result.to_dict() for result in _score_in_process(records, domain, options, None)]


def score_records(
    records: list[Any],
    domain: str | None = None,
    options: Options | None = None,
    *,
    workers: int = 1,
    on_progress: Callable[[int], None] | None = None,
) -> list[RowResult]:
    """Score rollout records in order; `domain` overrides each record's own, `options` maps a domain to its
    verifier's keyword arguments (plus `record_timeout_s`). `on_progress(n)` hears of n more records done.
    With `workers > 1` chunks run in a process pool. Never raises for a record."""
    options = options or {}
    if workers <= 1 or len(records) < 2:
        return _score_in_process(records, domain, options, on_progress)
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
