"""OpenRLHF's Python-file reward mode (`--reward.remote_url file.py`) with the shipped reward_func module and
an exported shim, driven by OpenRLHF 0.11.2's own SingleTurnAgentExecutor (which loads the file itself)."""

from __future__ import annotations

import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from cascade_cli import verifiers
from cascade_cli.chat import render_prompt
from cascade_cli.cli import app
from cascade_cli.serve import reward_func
from cascade_cli.verifiers.swe import preimage_from_patch

sys.path.insert(0, str(Path(__file__).parent))
import echo_verifier  # noqa: E402
from openrlhf_peers import check_rollout_batching, process_response_into_experience, run_executor  # noqa: E402
from real_reward_cases import CASES, code_options, service_label  # noqa: E402

GOLDEN = "--- a/m.py\n+++ b/m.py\n@@ -1,3 +1,3 @@\n def f(x):\n-    return x - 1\n+    return x + 1\n \n"
SWE_LABEL = json.dumps(
    {"domain": "swe", "golden_patch": GOLDEN, "original_files": preimage_from_patch(GOLDEN)}
)


@pytest.fixture(autouse=True)
def echo_domain(monkeypatch):
    verifiers.register("echo", echo_verifier.TARGET)
    monkeypatch.setenv("CASCADE_REWARD_WORKERS", "2")
    monkeypatch.setenv("CASCADE_REWARD_TIMEOUT_S", "30")
    yield
    reward_func.configure()  # closes the pool of the package module
    verifiers._REGISTRY.pop("echo", None)


def echo(expected: str, **extra) -> str:
    return json.dumps({"domain": "echo", "expected": expected, **extra})


def close_loaded(executor) -> None:
    """The executor loaded its own copy of the file: close that copy's pool."""
    executor.reward_func.__globals__["configure"]()


def test_print_path_and_executor_with_the_shipped_file():
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    result = CliRunner().invoke(app, ["verify", "--print-reward-func-path"])
    path = result.stdout.strip()
    assert (
        result.exit_code == 0 and path.endswith("reward_func.py") and Path(path) == reward_func.module_path()
    )

    executor = SingleTurnAgentExecutor(path)
    try:
        cases = [
            (render_prompt("say ok"), echo("ok"), "<think>fine</think>ok<|im_end|>"),
            (render_prompt("say ok!"), echo("ok"), "not ok<|im_end|>"),
            (render_prompt("fix f"), SWE_LABEL, f"```diff\n{GOLDEN}```<|im_end|>"),
            (render_prompt("fix f!"), SWE_LABEL, "no patch<|im_end|>"),
        ]
        outputs = run_executor(executor, cases)
    finally:
        close_loaded(executor)
    assert [float(output["reward"]) for output in outputs] == [1.0, 0.0, 1.0, -1.0]
    assert all(
        isinstance(output["reward"], torch.Tensor) and output["reward"].shape == (1,) for output in outputs
    )
    process = process_response_into_experience()
    experiences = [process(output, max_len=4096) for output in outputs]
    assert all(e.rewards.shape == (1,) and e.info["verify_error"].shape == (1,) for e in experiences)
    check_rollout_batching(experiences, [1.0, 0.0, 1.0, -1.0])


def test_exported_shim_bakes_in_domain_and_options(tmp_path):
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    shim = tmp_path / "reward.py"
    result = CliRunner().invoke(
        app, ["verify", "--export-reward-func", str(shim), "--domain", "echo", "--option", "bonus=0.5"]
    )
    assert result.exit_code == 0, result.output
    assert "from cascade_cli.serve.reward_func import" in shim.read_text()
    executor = SingleTurnAgentExecutor(str(shim))
    # Labels without a domain key use the baked-in domain; the option reaches the verifier.
    cases = [(render_prompt("a"), json.dumps({"expected": "a"}), "a<|im_end|>")]
    (output,) = run_executor(executor, cases)
    assert float(output["reward"]) == 1.5
    bad = CliRunner().invoke(app, ["verify", "--export-reward-func", str(tmp_path / "reward.txt")])
    assert bad.exit_code == 2 and "must end in .py" in bad.output


def test_threads_timeouts_and_bad_labels_never_raise():
    """OpenRLHF calls reward_func from asyncio.to_thread: many threads at once, no signals there."""
    reward_func.configure(workers=2, timeout_s=2.0)
    prompts = [render_prompt(f"q{i}") for i in range(24)]

    def call(i: int):
        answer = "yes" if i % 2 else "no"
        return reward_func.reward_func([prompts[i] + answer + "<|im_end|>"], [prompts[i]], [echo("yes")])

    assert threading.current_thread() is threading.main_thread()
    with ThreadPoolExecutor(max_workers=12) as pool:
        replies = list(pool.map(call, range(24)))
    assert [float(reply["rewards"][0]) for reply in replies] == [float(i % 2) for i in range(24)]

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=2) as pool:
        slow = pool.submit(reward_func.reward_func, ["a"], [""], [echo("a", sleep_s=60)])
        fast = pool.submit(reward_func.reward_func, ["a"], [""], [echo("a")])
        slow_reply, fast_reply = slow.result(timeout=30), fast.result(timeout=30)
    assert time.perf_counter() - start < 15
    assert (
        float(slow_reply["rewards"][0]) == 0.0 and float(slow_reply["extra_logs"]["verify_timeout"][0]) == 1.0
    )
    assert float(fast_reply["rewards"][0]) == 1.0

    reply = reward_func.reward_func(
        ["a", "b", "c"], ["", "", ""], [json.dumps({"domain": "nosuch"}), "not json", echo("c")]
    )
    assert reply["rewards"].tolist() == [0.0, 0.0, 1.0]
    assert reply["extra_logs"]["verify_error"].tolist() == [1.0, 1.0, 0.0]
    assert reply["rewards"].shape == (3,) and set(reply) == {"rewards", "scores", "extra_logs"}


def test_real_verifiers_through_openrlhf_and_the_reward_func(tmp_path):
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    shim = reward_func.export(tmp_path / "reward.py", options=code_options(), workers=2, timeout_s=60)
    executor = SingleTurnAgentExecutor(str(shim))
    cases = [
        (render_prompt(f"task {index}"), service_label(domain, label), response + "<|im_end|>")
        for index, (domain, label, response, _) in enumerate(CASES)
    ]
    outputs = run_executor(executor, cases)
    expected = [reward for *_, reward in CASES]
    assert [float(output["reward"]) for output in outputs] == expected
    experiences = [process_response_into_experience()(output, max_len=8192) for output in outputs]
    check_rollout_batching(experiences, expected)
