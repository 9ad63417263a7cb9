"""The HTTP reward service against OpenRLHF 0.11.2's real client code (`SingleTurnAgentExecutor`) and its
experience construction, over real sockets on loopback."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cascade_cli import verifiers
from cascade_cli.chat import render_prompt
from cascade_cli.serve.protocol import recover_response
from cascade_cli.serve.server import Guard, RewardService
from cascade_cli.verifiers.swe import preimage_from_patch

sys.path.insert(0, str(Path(__file__).parent))
import echo_verifier  # noqa: E402
from openrlhf_peers import check_rollout_batching, process_response_into_experience, run_executor  # noqa: E402
from real_reward_cases import CASES, code_options, service_label  # noqa: E402
from service_thread import ServiceThread  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
GOLDEN = "--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,3 @@\n def f(x):\n-    return x - 1\n+    return x + 1\n \n"
SWE_LABEL = {"domain": "swe", "golden_patch": GOLDEN, "original_files": preimage_from_patch(GOLDEN)}


class LiveService(ServiceThread):
    """A RewardService with the echo verifier on 127.0.0.1:<free port> (service_thread.py), plus HTTP helpers."""

    def __init__(
        self,
        workers: int = 2,
        timeout_s: float = 30.0,
        domain: str | None = None,
        options: dict | None = None,
        guard: Guard | None = None,
    ) -> None:
        verifiers.register("echo", echo_verifier.TARGET)
        service = RewardService(workers, timeout_s, domain, options, registrations={"echo": echo_verifier.TARGET})
        super().__init__(service, guard)

    def post(self, body: bytes | dict, path: str = "/get_reward", headers: dict | None = None) -> tuple[int, dict]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", data=data, method="POST")
        request.add_header("Content-Type", "application/json")
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def health(self, path: str = "/health") -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=30) as answer:
            return json.loads(answer.read())

@pytest.fixture(scope="module")
def live():
    service = LiveService(workers=2, timeout_s=60.0, options=code_options())
    yield service
    service.close()
    verifiers._REGISTRY.pop("echo", None)


def echo_label(expected: str, **extra) -> str:
    return json.dumps({"domain": "echo", "expected": expected, **extra})


def chat_prompt(text: str) -> str:
    return render_prompt(text, mode="think")


def test_recover_response_from_query():
    prompt = chat_prompt("What is 1+1?")
    assert recover_response(prompt + "<think>x</think>2<|im_end|>", prompt) == "<think>x</think>2"
    # A prompt that does not prefix the decoded query (tokenizer normalisation, truncation): last header.
    assert (
        recover_response("<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\nok<|im_end|>", "other")
        == "ok"
    )
    assert recover_response("plain<|im_end|><|endoftext|><|endoftext|>", None) == "plain"
    assert recover_response(prompt + "unfinished", prompt) == "unfinished"


def test_single_and_batched_requests(live):
    prompt = chat_prompt("say yes")
    status, reply = live.post(
        {"query": [prompt + "yes<|im_end|>"], "prompts": [prompt], "labels": [echo_label("yes")]}
    )
    assert status == 200
    assert (
        reply["rewards"] == 1.0 and reply["scores"] == 1.0
    )  # one sample -> plain numbers (see protocol doc)
    assert set(reply["extra_logs"]) == {"passed", "verify_error", "verify_timeout", "verify_latency_ms"}
    assert reply["extra_logs"]["passed"] == 1.0 and reply["extra_logs"]["verify_error"] == 0.0

    queries = [prompt + answer + "<|im_end|>" for answer in ("yes", "no", "<think>hm</think>yes")]
    status, reply = live.post({"query": queries, "prompts": [prompt] * 3, "labels": [echo_label("yes")] * 3})
    assert status == 200 and reply["rewards"] == [1.0, 0.0, 1.0] and reply["scores"] == [1.0, 0.0, 1.0]
    assert reply["extra_logs"]["passed"] == [1.0, 0.0, 1.0]

    # A label the verifier cannot read is a reward-0 row flagged in extra_logs, not an HTTP error.
    status, reply = live.post(
        {"query": ["x"], "prompts": [""], "labels": [json.dumps({"domain": "echo"})], "return_details": True}
    )
    assert status == 200 and reply["rewards"] == 0.0 and reply["extra_logs"]["verify_error"] == 1.0
    assert "label of the wrong shape" in reply["details"][0]["error"]


def test_protocol_errors_are_400_and_the_service_stays_up(live):
    good = {"query": ["a"], "prompts": ["p"], "labels": [echo_label("a")]}
    cases = [
        (b"{not json", "malformed JSON"),
        (b"\xff\xfe", "malformed JSON"),
        ({"prompts": ["p"], "labels": [echo_label("a")]}, "missing field 'query'"),
        ({"query": ["a"], "prompts": ["p"]}, "missing field 'labels'"),
        ({**good, "labels": [json.dumps({"domain": "nosuch"})]}, "unknown domain 'nosuch'"),
        ({**good, "labels": [json.dumps({"expected": "a"})]}, "missing 'domain'"),
        ({**good, "labels": ["not json"]}, "labels[0]: expected a JSON object string"),
        ({**good, "prompts": ["p", "q"]}, "same length"),
        ({**good, "query": [1]}, "'query' must be a list of strings"),
        ([1, 2], "expected a JSON object"),
    ]
    for body, message in cases:
        status, reply = live.post(body)
        assert status == 400 and message in reply["error"], (body, reply)
    status, reply = live.post(good)
    assert status == 200 and reply["rewards"] == 1.0
    health = live.health()
    assert health["status"] == "ok" and health["bad_requests"] >= len(cases) and "echo" in health["domains"]


def test_timeouts_and_dead_workers_become_reward_zero():
    short = LiveService(workers=1, timeout_s=2.0)
    try:
        start = time.perf_counter()
        status, reply = short.post({"query": ["a"], "prompts": [""], "labels": [echo_label("a", sleep_s=60)]})
        assert status == 200 and reply["rewards"] == 0.0 and reply["extra_logs"]["verify_timeout"] == 1.0
        assert time.perf_counter() - start < 20
        status, reply = short.post({"query": ["a"], "prompts": [""], "labels": [echo_label("a", exit=True)]})
        assert status == 200 and reply["rewards"] == 0.0 and reply["extra_logs"]["verify_error"] == 1.0
        # The pool replaced both workers.
        reply = short.post({"query": ["a", "b"], "prompts": ["", ""], "labels": [echo_label("a")] * 2})[1]
        assert reply["rewards"] == [1.0, 0.0]
    finally:
        short.close()


def test_openrlhf_executor_and_experiences_against_two_services(live):
    """OpenRLHF's SingleTurnAgentExecutor with a list of two reward URLs (it rotates between them) over
    known-correct and known-wrong math, IF, code and SWE responses (real verifiers) and the echo domain; then
    its own `_process_response_into_experience` and `split_rollout_samples` on the outputs."""
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    second = LiveService(workers=1, timeout_s=60.0, options=code_options())
    try:
        cases = [
            (chat_prompt("say yes"), echo_label("yes"), "<think>easy</think>yes<|im_end|>"),
            (chat_prompt("say yes!"), echo_label("yes"), "no<|im_end|>"),
        ] + [
            (chat_prompt(f"task {index}"), service_label(domain, label), response + "<|im_end|>")
            for index, (domain, label, response, _) in enumerate(CASES)
        ]
        expected = [1.0, 0.0] + [reward for *_, reward in CASES]
        before = (live.service.requests, second.service.requests)
        executor = SingleTurnAgentExecutor([live.url, second.url])
        outputs = run_executor(executor, cases)
        assert [output["reward"] for output in outputs] == expected
        assert [output["scores"] for output in outputs] == expected
        assert all(output["extra_logs"]["verify_error"] == 0.0 for output in outputs)
        assert outputs[0]["extra_logs"]["passed"] == 1.0
        half = len(cases) // 2
        assert live.service.requests - before[0] == half and second.service.requests - before[1] == half

        process = process_response_into_experience()
        experiences = [process(output, max_len=8192) for output in outputs]
        for output, experience in zip(outputs, experiences, strict=True):
            length = len(output["observation_tokens"])
            assert experience.sequences.shape == (1, length)
            assert experience.action_mask.shape == (1, length - 1)
            assert experience.rewards.shape == (1,) and experience.scores.shape == (1,)
            assert experience.info["reward"].shape == (1,) and experience.info["passed"].shape == (1,)
        check_rollout_batching(experiences, expected)
    finally:
        second.close()


def test_openrlhf_client_retries_on_400_and_reports_no_reward(live):
    """A protocol error (unknown domain) is not retried into a wrong reward: the executor gets no reward."""
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    async def no_sleep(_):
        return None

    executor = SingleTurnAgentExecutor(live.url)
    original_sleep = asyncio.sleep
    asyncio.sleep = no_sleep  # OpenRLHF sleeps 1 s between its 5 tries
    try:
        (output,) = run_executor(
            executor, [(chat_prompt("q"), json.dumps({"domain": "nosuch"}), "a<|im_end|>")]
        )
    finally:
        asyncio.sleep = original_sleep
    assert output["reward"] is None and output["extra_logs"] == {}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
label_values = st.one_of(
    json_values,
    st.builds(
        lambda d, rest: json.dumps({"domain": d, **rest}),
        st.sampled_from(["echo", "swe", "nosuch", ""]),
        st.dictionaries(st.text(max_size=8), json_values),
    ),
)
bodies = st.one_of(
    st.binary(max_size=64),
    json_values.map(lambda value: json.dumps(value).encode()),
    st.fixed_dictionaries(
        {},
        optional={
            "query": st.one_of(json_values, st.lists(st.text(max_size=30), max_size=3)),
            "prompts": st.one_of(json_values, st.lists(st.text(max_size=10), max_size=3)),
            "labels": st.one_of(json_values, st.lists(label_values, max_size=3)),
        },
    ).map(lambda value: json.dumps(value).encode()),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=bodies)
def test_fuzzed_bodies_get_200_or_400_never_a_crash(live, body):
    status, reply = live.post(body)
    assert status in (200, 400), (status, reply)
    if status == 400:
        assert isinstance(reply["error"], str) and reply["error"]
    else:
        assert "rewards" in reply and "extra_logs" in reply


def test_fuzzing_left_the_service_healthy(live):
    assert live.health()["status"] == "ok"
    assert live.post({"query": ["a"], "prompts": [""], "labels": [echo_label("a")]})[1]["rewards"] == 1.0


def test_cli_serve_subprocess_speaks_the_protocol():
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "cascade_cli", "verify", "--serve", "--port", "0", "--workers", "1"],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        port = None
        lines = []
        deadline = time.time() + 120
        while port is None and time.time() < deadline:
            line = proc.stderr.readline()
            lines.append(line)
            match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
            port = int(match.group(1)) if match else None
        assert port, "".join(lines)
        body = {"query": [f"</think>{GOLDEN}"], "prompts": [""], "labels": [json.dumps(SWE_LABEL)]}
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/get_reward", data=json.dumps(body).encode()
        )
        with urllib.request.urlopen(request, timeout=60) as answer:
            assert json.loads(answer.read())["rewards"] == 1.0
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=30) as answer:
            assert json.loads(answer.read())["requests"] == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert re.search(r"POST /get_reward 200 n=1 domain=swe mean_reward=1\.0000 errors=0 [\d.]+ ms", err), err


def test_serve_on_a_taken_port_is_a_one_line_error():
    import socket

    from typer.testing import CliRunner

    from cascade_cli.cli import app

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(app, ["verify", "--serve", "--port", str(port)])
    assert result.exit_code == 1 and f"cannot listen on 127.0.0.1:{port}" in result.output
