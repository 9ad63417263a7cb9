"""A warm pool of sandboxes: started ahead of use, each serving several programs before it is replaced.

Starting bwrap + python costs tens of milliseconds; forking a test child inside a running harness costs about
one. So a sandbox serves up to `programs_per_sandbox` programs (each run, one program on one test, gets network
and IPC namespaces and tmpfs directories of its own, and its processes are killed after it: sandbox.py), and
is replaced at once when it crashed or timed out.
`programs_per_sandbox=1` gives every program a brand-new sandbox.

bwrap's --die-with-parent follows the *thread* that started it, so all sandboxes are started by one
long-lived spawner thread, never by a short-lived worker thread.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from cascade_cli.verifiers.code.sandbox import Sandbox, SandboxSpec

T = TypeVar("T")


class _Worker:
    def __init__(self, sandbox: Future[Sandbox]) -> None:
        self.sandbox = sandbox
        self.jobs = 0


class WorkerPool:
    def __init__(self, spec: SandboxSpec, size: int, programs_per_sandbox: int = 32) -> None:
        self.spec = spec
        self.size = max(1, size)
        self.programs_per_sandbox = max(1, programs_per_sandbox)
        self._spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cascade-sandbox-spawner")
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._lock = threading.Lock()
        self._closed = False
        self._pid = os.getpid()
        for _ in range(self.size):
            self._idle.put(self._new_worker())

    def _new_worker(self) -> _Worker:
        return _Worker(self._spawner.submit(Sandbox, self.spec))

    def run(self, job: Callable[[Sandbox], tuple[T, bool]]) -> T:
        """Run `job(sandbox) -> (result, sandbox still healthy)` on a warm sandbox."""
        worker = self._idle.get()
        healthy = False
        try:
            sandbox = worker.sandbox.result()
            result, healthy = job(sandbox)
            return result
        finally:
            worker.jobs += 1
            replacement: _Worker | None = worker
            if not healthy or worker.jobs >= self.programs_per_sandbox or self._closed:
                if worker.sandbox.done() and worker.sandbox.exception() is None:
                    worker.sandbox.result().close()
                with self._lock:
                    replacement = None if self._closed else self._new_worker()
            if replacement is not None:
                self._idle.put(replacement)

    def close(self) -> None:
        if os.getpid() != self._pid:  # a forked child's copy: the sandboxes belong to the parent
            return
        with self._lock:
            self._closed = True
        while True:
            try:
                worker = self._idle.get_nowait()
            except queue.Empty:
                break
            with contextlib.suppress(Exception):
                worker.sandbox.result(timeout=30).close()
        self._spawner.shutdown(wait=True)
