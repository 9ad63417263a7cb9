"""The reward service's supervised scoring workers (serve/workers.py), on loopback: a worker killed in the
middle of a request is replaced and the request retried once (the client gets the right reward); a request
that kills its worker twice gets an explicit error row; an idle worker that dies is replaced; the service
keeps serving throughout."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from cascade_cli import verifiers

sys.path.insert(0, str(Path(__file__).parent))
from test_reward_service import LiveService, echo_label  # noqa: E402


@pytest.fixture
def one_worker():
    service = LiveService(workers=1, timeout_s=30.0)
    assert service.post({"query": ["a"], "prompts": [""], "labels": [echo_label("a")]})[1]["rewards"] == 1.0
    yield service
    service.close()
    verifiers._REGISTRY.pop("echo", None)


def wait_for(condition, timeout_s: float = 30.0):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_a_worker_killed_mid_request_is_replaced_and_the_request_retried(one_worker):
    (pid,) = one_worker.health()["worker_pids"]
    answer: dict = {}

    def slow_request() -> None:
        start = time.perf_counter()
        answer["reply"] = one_worker.post(
            {"query": ["yes"], "prompts": [""], "labels": [echo_label("yes", sleep_s=2.0)], "return_details": True}
        )
        answer["seconds"] = time.perf_counter() - start

    thread = threading.Thread(target=slow_request)
    thread.start()
    wait_for(lambda: one_worker.service.pool._tasks.empty() and one_worker.service.requests >= 2)
    time.sleep(0.5)  # taken from the queue and handed to the worker: it is inside the verifier's sleep
    os.kill(pid, signal.SIGKILL)
    thread.join(60)
    status, reply = answer["reply"]
    assert status == 200 and reply["rewards"] == 1.0 and reply["extra_logs"]["verify_error"] == 0.0
    assert answer["seconds"] < 25  # within the request's 30 s deadline: one retry, not a hang
    health = one_worker.health()
    assert health["workers_restarted"] == 1 and health["worker_deaths_in_flight"] == 1
    assert health["retried_requests"] == 1 and health["worker_pids"] and health["worker_pids"] != [pid]
    assert one_worker.post({"query": ["b"], "prompts": [""], "labels": [echo_label("b")]})[1]["rewards"] == 1.0


def test_a_request_that_kills_its_worker_twice_gets_an_explicit_error(one_worker):
    status, reply = one_worker.post(
        {"query": ["a"], "prompts": [""], "labels": [echo_label("a", exit=True)], "return_details": True}
    )
    assert status == 200 and reply["rewards"] == 0.0 and reply["extra_logs"]["verify_error"] == 1.0
    assert "the scoring worker died twice on this request (exit code 3)" in reply["details"][0]["error"]
    health = one_worker.health()
    assert health["workers_restarted"] == 2 and health["retried_requests"] == 1
    assert one_worker.post({"query": ["a"], "prompts": [""], "labels": [echo_label("a")]})[1]["rewards"] == 1.0


def test_an_idle_worker_that_dies_is_replaced():
    service = LiveService(workers=2, timeout_s=30.0)
    try:
        first = wait_for(lambda: len(service.health()["worker_pids"]) == 2 and service.health()["worker_pids"])
        os.kill(first[0], signal.SIGKILL)
        replaced = wait_for(
            lambda: (pids := service.health()["worker_pids"]) and len(pids) == 2 and first[0] not in pids and pids
        )
        assert first[1] in replaced and service.health()["workers_restarted"] == 1
        reply = service.post({"query": ["a", "b"], "prompts": ["", ""], "labels": [echo_label("a")] * 2})[1]
        assert reply["rewards"] == [1.0, 0.0]
    finally:
        service.close()
        verifiers._REGISTRY.pop("echo", None)


def test_close_answers_every_queued_request():
    service = LiveService(workers=1, timeout_s=30.0)
    pool = service.service.pool
    futures = [pool.submit([{"id": "0", "prompt": "", "response": "a", "label": {"expected": "a", "sleep_s": 0.3},
                             "domain": "echo"}]) for _ in range(5)]
    service.close()
    verifiers._REGISTRY.pop("echo", None)
    results = [future.result(timeout=30) for future in futures]
    assert all(len(rows) == 1 for rows in results)
    assert any(rows[0].error and "shutting down" in rows[0].error for rows in results)
