"""The one scoring path (verifiers/batch.py): a warm code sandbox pool across batches, a latency for every
record, per-record timeouts that leave the rest of the batch scored, thread safety, row errors for bad labels."""

from __future__ import annotations

import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from cascade_cli import verifiers
from cascade_cli.verifiers import batch, verify_batch
from cascade_cli.verifiers.base import RecordError, Score, Verifier, parse_label, require_response
from cascade_cli.verifiers.code import sandbox as code_sandbox

sys.path.insert(0, str(Path(__file__).parent))
import echo_verifier  # noqa: E402
from real_reward_cases import CALL_ADD, STDIO_SUM, code_options, fenced  # noqa: E402


class SpinVerifier(Verifier):
    """Reward 1 for a response "ok"; label.spin_s busy-waits in Python (a deadline can stop it)."""

    domain = "spin"

    def check_label(self, label: Any) -> str | None:
        return None if isinstance(label, dict) else f"expected an object; found {type(label).__name__}"

    def verify_one(self, record: dict[str, Any]) -> Score:
        response, label = require_response(record), parse_label(record)
        if not isinstance(label, dict):
            raise RecordError("label must be an object")
        end = time.monotonic() + float(label.get("spin_s", 0))
        while time.monotonic() < end:
            pass
        return Score(float(response == "ok"), response == "ok", {})


@pytest.fixture(autouse=True)
def test_domains():
    verifiers.register("echo", echo_verifier.TARGET)
    verifiers.register("spin", f"{__name__}:SpinVerifier")
    yield
    batch.close_verifiers()
    verifiers._REGISTRY.pop("echo", None)
    verifiers._REGISTRY.pop("spin", None)


def echo(i: int, response: str, expected: str = "yes", **label: Any) -> dict:
    return {"id": f"e{i}", "prompt": "say it", "response": response, "label": {"expected": expected, **label},
            "domain": "echo"}  # fmt: skip


def code_records() -> list[dict]:
    records = [
        {"id": "sum", "response": fenced("a, b = map(int, input().split())\nprint(a + b)"), "label": STDIO_SUM},
        {"id": "add", "response": fenced("def add(a, b):\n    return a + b"), "label": CALL_ADD},
    ]
    return [{**record, "domain": "code"} for record in records]


def sandbox_pids(verifier: Any) -> list[int]:
    workers = list(verifier._pool._idle.queue)
    return sorted(worker.sandbox.result().proc.pid for worker in workers)


def test_a_second_code_batch_reuses_the_warm_sandbox_pool(monkeypatch):
    options = code_options()
    probes: list[object] = []
    real_probe = code_sandbox.probe
    monkeypatch.setattr("cascade_cli.verifiers.code.probe", lambda spec: probes.append(spec) or real_probe(spec))

    first = verify_batch(code_records(), domain="code", options=options)
    verifier = batch.load_verifier("code", options["code"])
    pool, pids = verifier._pool, sandbox_pids(verifier)
    second = verify_batch(code_records(), domain="code", options=options)

    assert [s.passed for s in first] == [s.passed for s in second] == [True, True]
    assert batch.load_verifier("code", options["code"]) is verifier and verifier._pool is pool
    assert sandbox_pids(verifier) == pids  # the same sandbox processes served both batches
    assert sum(worker.jobs for worker in pool._idle.queue) == 4  # both batches ran on this pool
    assert len(probes) == (0 if options["code"].get("unsafe_no_sandbox") else 1)  # bwrap probed once
    batch.close_verifiers()
    assert all(code_sandbox_gone(pid) for pid in pids)


def code_sandbox_gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split()[2] == "Z"
    except FileNotFoundError:
        return True


def test_every_record_gets_a_latency():
    records = [echo(i, "yes" if i % 2 else "no") for i in range(20)] + code_records()
    options = code_options()
    results = batch.score_records(records, options=options)
    assert [r.reward for r in results] == [float(i % 2) for i in range(20)] + [1.0, 1.0]
    assert all(r.latency_s > 0 for r in results)
    slow = batch.score_records([echo(0, "yes", sleep_s=0.2), echo(1, "yes")])
    assert slow[0].latency_s >= 0.2 > slow[1].latency_s > 0


@pytest.mark.parametrize(
    ("domain", "label"),
    [("spin", {"spin_s": 30}), ("echo", {"expected": "yes", "sleep_s": 30})],
    ids=["interrupted-in-python", "thread-given-up-in-a-c-call"],
)
def test_a_record_past_its_timeout_scores_zero_and_the_rest_are_scored(domain, label):
    records = [
        {"id": "a", "response": "ok" if domain == "spin" else "yes", "label": {"expected": "yes"}},
        {"id": "slow", "response": "ok", "label": label},
        {"id": "b", "response": "ok" if domain == "spin" else "yes", "label": {"expected": "yes"}},
    ]
    options = {domain: {"record_timeout_s": 0.5}}
    threads_before = verify_threads()
    start = time.perf_counter()
    results = batch.score_records(records, domain, options)
    assert time.perf_counter() - start < 10
    assert [r.reward for r in results] == [1.0, 0.0, 1.0]
    assert results[1].error is not None and "timed out after 0.5 s" in results[1].error
    assert results[1].details["timeout"] is True and 0.5 <= results[1].latency_s < 5
    assert results[0].error is None and results[2].error is None
    time.sleep(0.2)
    # A deadline stopped the spinning verifier in its thread; the sleeping one's thread is left to finish.
    assert verify_threads() - threads_before == (0 if domain == "spin" else 1)


def verify_threads() -> int:
    return sum(thread.name == "cascade-verify" for thread in threading.enumerate())


def test_timeout_applies_through_verify_batch_and_can_be_turned_off():
    (score,) = verify_batch([echo(0, "yes", sleep_s=0.6)], options={"echo": {"record_timeout_s": 0.2}})
    assert score.reward == 0.0 and "timed out" in score.details["error"]
    (score,) = verify_batch([echo(0, "yes", sleep_s=0.3)], options={"echo": {"record_timeout_s": None}})
    assert score.reward == 1.0


def test_verify_batch_from_two_threads_matches_sequential():
    records = [echo(i, "yes" if i % 3 else "no") for i in range(40)]
    records += [{**r, "id": f"c{i}"} for i, r in enumerate(code_records() * 3)]
    records.append({**records[-1], "response": fenced("print(0)"), "id": "wrong"})
    options = code_options()
    sequential = [verify_batch(records, options=options) for _ in range(2)]
    barrier = threading.Barrier(2)

    def run(_: int) -> list[Score]:
        barrier.wait()
        return verify_batch(records, options=options)

    with ThreadPoolExecutor(max_workers=2) as threads:
        concurrent = list(threads.map(run, range(2)))
    assert concurrent == sequential
    assert [s.passed for s in sequential[0]][-7:] == [True] * 6 + [False]


def test_a_label_of_the_wrong_shape_is_a_row_error():
    records = [
        echo(0, "yes"),
        {**echo(1, "yes"), "label": ["not", "an", "object"]},
        {"id": "c", "domain": "code", "response": fenced("print(1)"), "label": {"kind": "stdio", "inputs": [1]}},
        {"id": "m", "domain": "math", "response": "\\boxed{1}", "label": {"answer": None}},
    ]
    results = batch.score_records(records, options=code_options())
    assert results[0].error is None and results[0].reward == 1.0
    assert results[1].error.startswith("label of the wrong shape for domain 'echo': expected an object")
    assert results[2].error.startswith("label of the wrong shape for domain 'code':")
    assert results[3].error.startswith("label of the wrong shape for domain 'math':")
    assert all(r.reward == 0.0 and r.details["error"] == r.error for r in results[1:])


def test_workers_and_progress():
    records = [echo(i, str(i % 5), "2") for i in range(150)] + ["not a record"]
    seen: list[int] = []
    one = batch.score_records(records, on_progress=seen.append)
    assert sum(seen) == len(records)
    seen.clear()
    two = batch.score_records(records, workers=2, on_progress=seen.append)
    assert sum(seen) == len(records) and len(seen) > 2
    assert [(r.reward, r.error) for r in one] == [(r.reward, r.error) for r in two]
    assert one[-1].error == "expected a JSON object (a rollout record), found str"
