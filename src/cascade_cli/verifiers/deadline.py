"""A time limit for pure-Python work that holds in any thread and in any worker process.

`signal.alarm` (math-verify's own timeout) only works in the main thread of the main interpreter; in a
thread it raises, and callers that swallow that error silently lose the reward. Here a watchdog thread
raises `DeadlineExceeded` inside the worker thread instead (`PyThreadState_SetAsyncExc`), re-raising every
few milliseconds until the worker has left the guarded call, so an `except Exception:` inside a library
cannot swallow the limit for good. `DeadlineExceeded` derives from BaseException for the same reason.

Like a signal, the exception is delivered between bytecodes: a single long C call (one huge integer
power) finishes first. Callers bound such inputs before they reach sympy. One landing inside a finalizer
(`__del__`, a weakref callback) is reported by Python as unraisable; the next re-raise, 5 ms later, stops the
guarded call.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

_SET_ASYNC_EXC = ctypes.pythonapi.PyThreadState_SetAsyncExc
_SET_ASYNC_EXC.argtypes = [ctypes.c_ulong, ctypes.py_object]
_SET_ASYNC_EXC.restype = ctypes.c_int
# The same C function with a NULL exception: clears a pending asynchronous exception.
_CLEAR_ASYNC_EXC = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi)
)

_RETRY_S = 0.005


class DeadlineExceeded(BaseException):
    """Raised inside a guarded call whose time is up (BaseException: library `except Exception` misses it)."""


@dataclass
class _Job:
    thread_id: int
    deadline: float
    done: bool = False
    fired: bool = False


class _Watchdog:
    """One daemon thread per process that fires the deadlines of the running guarded calls."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._by_id: dict[int, _Job] = {}
        self._thread: threading.Thread | None = None
        self._next_wake = float("inf")

    def start_job(self, timeout_s: float) -> _Job:
        job = _Job(threading.get_ident(), time.monotonic() + timeout_s)
        with self._lock:
            self._ensure_thread()
            self._by_id[id(job)] = job
            if job.deadline < self._next_wake:  # the watchdog sleeps past this deadline: wake it
                self._lock.notify()
        return job

    def finish_job(self, job: _Job) -> None:
        job.done = True
        with self._lock:  # wait out a watchdog pass that may be firing at this job right now
            pass
        if job.fired:
            # An exception the watchdog raised may still be pending for this thread: drop it.
            _CLEAR_ASYNC_EXC(job.thread_id, None)

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._run, name="cascade-deadline", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        with self._lock:
            while True:
                now = time.monotonic()
                wait_s: float | None = None
                for job in list(self._by_id.values()):
                    if job.done:
                        del self._by_id[id(job)]
                        continue
                    if now >= job.deadline:
                        job.fired = True
                        _SET_ASYNC_EXC(job.thread_id, DeadlineExceeded)
                        wait_s = _RETRY_S if wait_s is None else min(wait_s, _RETRY_S)
                    else:
                        left = job.deadline - now
                        wait_s = left if wait_s is None else min(wait_s, left)
                self._next_wake = float("inf") if wait_s is None else now + wait_s
                self._lock.wait(wait_s)


_WATCHDOG = _Watchdog()


def _fresh_watchdog_after_fork() -> None:
    # The parent's watchdog thread is gone in the child and its lock may have been held at the fork.
    global _WATCHDOG
    _WATCHDOG = _Watchdog()


os.register_at_fork(after_in_child=_fresh_watchdog_after_fork)


def run_with_deadline(function: Callable[[], T], timeout_s: float | None) -> T:
    """`function()`, or `DeadlineExceeded` once `timeout_s` seconds have passed (None: no limit)."""
    if timeout_s is None:
        return function()
    job = _WATCHDOG.start_job(timeout_s)
    try:
        result = function()
    finally:
        # The asynchronous exception may land anywhere, even inside finish_job; retry until it is done.
        while True:
            try:
                _WATCHDOG.finish_job(job)
                break
            except DeadlineExceeded:
                continue
    if job.fired:
        # The deadline fired but the library swallowed it and returned something: not to be trusted.
        raise DeadlineExceeded
    return result
