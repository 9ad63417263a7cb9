"""A supervised pool of scoring worker processes for the reward service (server.py).

Each worker is a spawned process with its own pipe: no lock or queue is shared between workers, so a worker
killed at any moment (OOM killer, a segfaulting verifier, `kill -9`) takes nothing with it but its own task.
One supervisor thread per worker takes requests from a shared queue, hands one at a time to its worker and
waits for the answer, the worker's death, or the request's deadline (`timeout_s`, counted from the first
hand-off):

- answer: the request gets its rows;
- deadline: the worker is killed and replaced; the request gets reward-0 rows flagged `verify_timeout`;
- death: the worker is replaced and the request is retried ONCE, ahead of new requests, by the first free
  worker (within what is left of its deadline). A death is usually not the request's fault (a kill, memory
  pressure elsewhere), so a retry gives the right reward; a request that kills its worker twice gets reward-0
  rows flagged `verify_error` with the reason in `details.error`, the existing contract for a record the
  verifier cannot handle.

A worker that dies while idle is replaced within POLL_S. Every request finishes: the supervisor never waits
without a bound, and an unexpected error in it becomes reward-0 `verify_error` rows.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import queue
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from cascade_cli.serve.protocol import (
    VerifierPool,
    _init_worker,
    _score_task,
    failed_results,
    timeout_results,
)
from cascade_cli.verifiers.batch import Options, RowResult

log = logging.getLogger("cascade.serve")

POLL_S = 0.5  # how often an idle supervisor checks that its worker is alive
RESTART_BACKOFF_S = 5.0  # a worker that died before it was ready (a broken install) is retried this often
START_TIMEOUT_S = 120.0  # a fresh worker must import the verifiers within this
SHUTTING_DOWN = "the reward service is shutting down"
# Scored before a worker says it is ready: the math verifier loads math-verify, sympy and its LaTeX parser on
# the first answer it cannot settle itself (2+ s on a loaded machine), which a replacement worker would
# otherwise spend on a request while the other workers' queues grow.
WARM_RECORDS = [
    {"id": "warm", "prompt": "", "domain": "math", "response": "\\boxed{\\sqrt{x}/2}",
     "label": {"answer": "\\frac{\\sqrt{x}}{2}"}},
]


def _worker_main(conn: Connection, registrations: dict[str, str], options: Options) -> None:
    _init_worker(registrations)
    with contextlib.suppress(Exception):  # a domain that is not installed scores an error row: fine here
        _score_task(WARM_RECORDS, options)
    conn.send(("ready", os.getpid()))
    while True:
        try:
            records = conn.recv()
        except EOFError:  # the service went away
            return
        if records is None:
            return
        try:
            conn.send(("ok", _score_task(records, options)))
        except Exception as error:  # score_records turns record errors into rows; this is anything else
            conn.send(("error", f"{type(error).__name__}: {error}"))


class _Worker:
    """One worker process and the parent's end of its pipe."""

    def __init__(self, registrations: dict[str, str], options: Options) -> None:
        context = multiprocessing.get_context("spawn")  # the host may be threaded or hold CUDA state
        self.conn, child = context.Pipe()
        self.process = context.Process(
            target=_worker_main, args=(child, registrations, options), daemon=True, name="cascade-scorer"
        )
        self.process.start()
        child.close()
        self.started = time.monotonic()
        self.ready = False

    @property
    def pid(self) -> int | None:
        return self.process.pid

    def alive(self) -> bool:
        return self.process.is_alive()

    def wait_ready(self, timeout_s: float) -> bool:
        if self.conn in wait([self.conn, self.process.sentinel], timeout_s):
            with contextlib.suppress(EOFError, OSError):
                self.ready = self.conn.recv()[0] == "ready"
        return self.ready

    def run(self, records: list[dict[str, Any]], timeout_s: float) -> tuple[str, Any]:
        """("ok", rows) | ("error", message) | ("timeout", None) | ("died", exit code)."""
        try:
            self.conn.send(records)
        except (BrokenPipeError, EOFError, OSError):
            return "died", self._exitcode()
        ready = wait([self.conn, self.process.sentinel], max(0.0, timeout_s))
        if self.conn in ready:  # checked first: an answer sent just before dying still counts
            try:
                return self.conn.recv()
            except (EOFError, OSError):
                return "died", self._exitcode()
        if ready:
            return "died", self._exitcode()
        return "timeout", None

    def _exitcode(self) -> int | None:
        self.process.join(1.0)
        return self.process.exitcode

    def stop(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5.0)
        self.conn.close()


@dataclass
class _Task:
    records: list[dict[str, Any]]
    future: Future = field(default_factory=Future)
    deadline: float | None = None  # set when a worker first takes it
    deaths: int = 0  # workers that died holding it


_WAKE = object()  # put on the queue so that an idle supervisor looks at the retry queue now
_STOP = object()


@dataclass
class PoolStats:
    restarts: int = 0  # workers started to replace one that died or was killed
    deaths_in_flight: int = 0  # workers that died holding a request
    retries: int = 0  # requests retried on a fresh worker after such a death
    timeouts: int = 0  # requests that ran past their deadline (their worker was killed)


class WorkerPool(VerifierPool):
    """VerifierPool's interface and constructor (workers, timeout_s, options, registrations) over supervised
    worker processes instead of pebble's pool; submit() -> a Future of RowResults that always completes."""

    def _new_pool(self) -> None:
        self.stats = PoolStats()
        self._tasks: queue.Queue[Any] = queue.Queue()  # _Task, _WAKE or _STOP
        self._retries: queue.Queue[_Task] = queue.Queue()
        self._closing = False
        self._lock = threading.Lock()
        self._workers: list[_Worker | None] = [None] * self.workers
        self._threads = [
            threading.Thread(target=self._supervise, args=(slot,), daemon=True, name=f"cascade-scorer-{slot}")
            for slot in range(self.workers)
        ]
        for thread in self._threads:
            thread.start()

    # ---- the public side (event loop / request threads) ----

    def submit(self, records: list[dict[str, Any]]) -> Future:
        task = _Task(records)
        if self._closing:
            task.future.set_result(failed_results(len(records), SHUTTING_DOWN))
        else:
            self._tasks.put(task)
        return task.future

    def collect(self, future: Future, count: int) -> list[RowResult]:
        return future.result()

    def score(self, records: list[dict[str, Any]]) -> list[RowResult]:
        return self.submit(records).result()

    def worker_pids(self) -> list[int]:
        """The pids of the workers that are up and serving."""
        with self._lock:
            workers = [w for w in self._workers if w is not None]
        return [w.pid for w in workers if w.ready and w.pid is not None and w.alive()]

    def close(self) -> None:
        self._closing = True
        for _ in self._threads:
            self._tasks.put(_STOP)
        for thread in self._threads:
            thread.join(10.0)
        for waiting in (self._retries, self._tasks):  # still queued: answer them rather than leave them waiting
            while not waiting.empty():
                task = waiting.get_nowait()
                if isinstance(task, _Task) and (task.deaths or task.future.set_running_or_notify_cancel()):
                    task.future.set_result(failed_results(len(task.records), SHUTTING_DOWN))
        for slot, worker in enumerate(self._workers):
            if worker is not None:
                worker.stop()
                self._workers[slot] = None

    # ---- one supervisor thread per worker ----

    def _next(self) -> Any:
        """A retry first (the request already waited), else the next request; None when idle for POLL_S."""
        try:
            return self._retries.get_nowait()
        except queue.Empty:
            pass
        try:
            return self._tasks.get(timeout=POLL_S)
        except queue.Empty:
            return None

    def _supervise(self, slot: int) -> None:
        self._start(slot, replacing=False)
        while True:
            task = self._next()
            if task is _STOP:
                return
            if task is None or task is _WAKE:
                worker = self._workers[slot]
                if self._closing or worker is None or worker.alive():
                    continue
                if worker.ready or time.monotonic() - worker.started > RESTART_BACKOFF_S:
                    self._start(slot, replacing=True)  # died idle (killed) or while starting: replace it
                continue
            if not task.deaths and not task.future.set_running_or_notify_cancel():
                continue  # cancelled while queued
            if self._closing:
                task.future.set_result(failed_results(len(task.records), SHUTTING_DOWN))
                continue
            try:
                results = self._run(slot, task)
            except Exception as error:  # a bug here must not leave a request waiting forever
                results = failed_results(len(task.records), f"scoring failed: {type(error).__name__}: {error}")
            if results is not None:
                task.future.set_result(results)

    def _start(self, slot: int, replacing: bool) -> _Worker | None:
        old = self._workers[slot]
        if old is not None:
            old.stop()
        if self._closing:
            return None
        started = time.perf_counter()
        worker = _Worker(self.registrations, self.options)
        with self._lock:
            self._workers[slot] = worker
            self.stats.restarts += replacing
        ready = worker.wait_ready(START_TIMEOUT_S)
        if replacing:
            log.warning(
                "scoring worker %d: pid %s (exit code %s) replaced by pid %s, %s in %.2f s", slot,
                old.pid if old else None, old.process.exitcode if old else None, worker.pid,
                "ready" if ready else "NOT ready", time.perf_counter() - started,
            )
        return worker if ready else None

    def _run(self, slot: int, task: _Task) -> list[RowResult] | None:
        """The task's rows; None when it went back on the retry queue (its worker died under it)."""
        count = len(task.records)
        worker = self._workers[slot]
        if worker is None or not worker.ready or not worker.alive():
            worker = self._start(slot, replacing=worker is not None and worker.ready)
            if worker is None:
                return failed_results(count, "verification failed: a scoring worker did not start")
        if task.deadline is None:
            task.deadline = time.monotonic() + self.timeout_s
        status, value = worker.run(task.records, task.deadline - time.monotonic())
        if status == "ok":
            return [RowResult(**row) for row in value]
        if status == "error":
            return failed_results(count, f"verification failed: {value}")
        if status == "timeout":
            with self._lock:
                self.stats.timeouts += 1
            self._start(slot, replacing=True)
            return timeout_results(count, self.timeout_s)
        task.deaths += 1
        retry = task.deaths == 1 and time.monotonic() < task.deadline and not self._closing
        with self._lock:
            self.stats.deaths_in_flight += 1
            self.stats.retries += retry
        if retry:  # the first free worker takes it while this one restarts
            self._retries.put(task)
            self._tasks.put(_WAKE)
            self._start(slot, replacing=True)
            return None
        self._start(slot, replacing=True)
        if task.deaths == 1:
            return timeout_results(count, self.timeout_s)
        return failed_results(
            count, f"verification failed: the scoring worker died twice on this request (exit code {value})"
        )
