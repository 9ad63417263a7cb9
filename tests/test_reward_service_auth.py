"""The reward service on a shared network: the token (path segment, ?token=, Bearer), 401 / 413, the refusal
log lines, and the token never in a log; with OpenRLHF 0.11.2's real HTTP client (`SingleTurnAgentExecutor`,
which sends no headers) against a token-protected service on loopback."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import secrets
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from cascade_cli import verifiers
from cascade_cli.serve.auth import RedactingFilter, authorized, is_loopback, resolve_token
from cascade_cli.serve.server import Guard

sys.path.insert(0, str(Path(__file__).parent))
from openrlhf_peers import run_executor  # noqa: E402
from test_reward_service import GOLDEN, REPO_ROOT, SWE_LABEL, LiveService, chat_prompt, echo_label  # noqa: E402

TOKEN = secrets.token_urlsafe(24)
WRONG = secrets.token_urlsafe(24)
MAX_BODY = 64 * 1024


@pytest.fixture(scope="module")
def guarded():
    service = LiveService(workers=1, timeout_s=30.0, guard=Guard(TOKEN, max_body_bytes=MAX_BODY, max_samples=4))
    yield service
    service.close()
    verifiers._REGISTRY.pop("echo", None)


def body(count: int = 1, expected: str = "yes") -> dict:
    prompt = chat_prompt("say yes")
    return {
        "query": [prompt + "yes<|im_end|>"] * count,
        "prompts": [prompt] * count,
        "labels": [echo_label(expected)] * count,
    }


@pytest.fixture
def no_sleep(monkeypatch):
    """OpenRLHF sleeps 1 s between its 5 tries."""
    original = asyncio.sleep

    async def quick(delay, *args, **kwargs):
        return await original(0)

    monkeypatch.setattr(asyncio, "sleep", quick)


def test_loopback_and_token_rules(monkeypatch):
    assert all(is_loopback(host) for host in ("127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(host) for host in ("0.0.0.0", "::", "10.0.0.5", "example.org", ""))
    monkeypatch.delenv("CASCADE_REWARD_TOKEN", raising=False)
    assert resolve_token(None, "127.0.0.1") is None
    with pytest.raises(Exception, match="needs a token"):
        resolve_token(None, "0.0.0.0")
    monkeypatch.setenv("CASCADE_REWARD_TOKEN", TOKEN)
    assert resolve_token(None, "0.0.0.0") == TOKEN and resolve_token(TOKEN + "x", "::") == TOKEN + "x"
    for bad in ("short", "a,b" * 10, "x" * 20 + "/"):
        with pytest.raises(Exception, match="at least 16 characters"):
            resolve_token(bad, "0.0.0.0")
    assert authorized(TOKEN, f"/{TOKEN}/get_reward", None, None)
    assert authorized(TOKEN, "/get_reward", TOKEN, None) and authorized(TOKEN, "/", None, f"Bearer {TOKEN}")
    assert not authorized(TOKEN, f"/get_reward/{TOKEN}", None, None)  # the FIRST segment only
    assert not authorized(TOKEN, f"/{TOKEN[:-1]}/get_reward", WRONG, f"Basic {TOKEN}")
    assert authorized(None, "/anything", None, None)


def test_openrlhf_client_with_the_token_in_the_path_and_in_the_query(guarded):
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    base = f"http://127.0.0.1:{guarded.port}"
    for url in (f"{base}/{TOKEN}/get_reward", f"{base}/get_reward?token={TOKEN}"):
        cases = [(chat_prompt("say yes"), echo_label("yes"), "yes<|im_end|>"), (chat_prompt("no"), echo_label("yes"), "no<|im_end|>")]
        outputs = run_executor(SingleTurnAgentExecutor(url), cases)
        assert [output["reward"] for output in outputs] == [1.0, 0.0], url
        assert outputs[0]["extra_logs"]["passed"] == 1.0


def test_bearer_header_and_the_health_endpoint(guarded):
    status, reply = guarded.post(body(), headers={"Authorization": f"Bearer {TOKEN}"})
    assert status == 200 and reply["rewards"] == 1.0
    assert guarded.health(f"/{TOKEN}/health")["status"] == "ok"
    assert guarded.health(f"/health?token={TOKEN}")["status"] == "ok"
    with pytest.raises(urllib.error.HTTPError) as refused:
        guarded.health()
    assert refused.value.code == 401


def test_missing_or_wrong_token_is_401(guarded, no_sleep):
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    attempts = [
        ("/get_reward", None),
        (f"/{WRONG}/get_reward", None),
        (f"/get_reward?token={WRONG}", None),
        ("/get_reward", {"Authorization": f"Bearer {WRONG}"}),
        (f"/get_reward/{TOKEN}", None),
        (f"/{TOKEN}x/get_reward", None),
    ]
    for path, headers in attempts:
        status, reply = guarded.post(body(), path=path, headers=headers)
        assert status == 401 and "missing or wrong token" in reply["error"], path
    # OpenRLHF's client retries 5 times on the 401 and then reports no reward (never a wrong one).
    (output,) = run_executor(
        SingleTurnAgentExecutor(f"http://127.0.0.1:{guarded.port}/{WRONG}/get_reward"),
        [(chat_prompt("q"), echo_label("yes"), "yes<|im_end|>")],
    )
    assert output["reward"] is None and output["extra_logs"] == {}


def test_body_and_sample_limits_are_413(guarded):
    path = f"/{TOKEN}/get_reward"
    big = body()
    big["prompts"] = ["x" * (MAX_BODY + 10)]
    status, reply = guarded.post(big, path=path)
    assert status == 413 and f"over {MAX_BODY} bytes" in reply["error"] and "--max-body-mb" in reply["error"]
    status, reply = guarded.post(body(count=5), path=path)
    assert status == 413 and "too many samples: 5" in reply["error"] and "at most 4" in reply["error"]
    status, reply = guarded.post(body(count=4), path=path)
    assert status == 200 and reply["rewards"] == [1.0] * 4
    # Unauthenticated, a big body is a 401 (the body is not read before the token is checked).
    assert guarded.post(big)[0] == 401


def test_refusals_are_one_line_each_and_the_token_is_never_logged(guarded, caplog):
    caplog.set_level(logging.INFO)
    for handler in logging.getLogger().handlers:  # what run_server installs on the service's handlers
        handler.addFilter(RedactingFilter(TOKEN))
    try:
        assert guarded.post(body(), path=f"/{TOKEN}/get_reward")[0] == 200
        assert guarded.post(body(), path=f"/get_reward?token={TOKEN}")[0] == 200
        assert guarded.post(b"{broken", path=f"/{TOKEN}/get_reward")[0] == 400
        assert guarded.post(body(count=9), path=f"/{TOKEN}/get_reward")[0] == 413
        assert guarded.post(body(), path=f"/{WRONG}/get_reward")[0] == 401
        assert guarded.post(body(), headers={"Authorization": f"Bearer {WRONG}"})[0] == 401
        time.sleep(0.2)
    finally:
        for handler in logging.getLogger().handlers:
            handler.filters = [f for f in handler.filters if not isinstance(f, RedactingFilter)]
    text = caplog.text
    assert TOKEN not in text and WRONG not in text
    refused = [record.getMessage() for record in caplog.records if record.getMessage().startswith("refused")]
    assert len(refused) == 4, refused
    assert re.search(r"refused POST /\*\*\*/get_reward 400 from 127\.0\.0\.1: malformed JSON", refused[0])
    assert re.search(r"refused POST /\*\*\*/get_reward 413 from 127\.0\.0\.1: too many samples: 9", refused[1])
    assert all(re.fullmatch(r"refused POST 401 from 127\.0\.0\.1: missing or wrong token.*", line) for line in refused[2:])
    assert "POST /***/get_reward 200 n=1" in text


def test_redacting_filter_scrubs_messages_args_and_tracebacks():
    record = logging.LogRecord("aiohttp.server", logging.ERROR, __file__, 1, "bad %s", (f"/{TOKEN}/x",), None)
    try:
        raise ValueError(f"url /{TOKEN}/get_reward")
    except ValueError:
        record.exc_info = sys.exc_info()
    RedactingFilter(TOKEN).filter(record)
    assert record.getMessage() == "bad /***/x" and TOKEN not in record.exc_text


def _cli_env(**extra: str) -> dict:
    env = {key: value for key, value in os.environ.items() if key != "CASCADE_REWARD_TOKEN"}
    return {**env, "PYTHONPATH": str(REPO_ROOT / "src") + os.pathsep + env.get("PYTHONPATH", ""), **extra}


def test_cli_refuses_a_network_bind_without_a_token():
    result = subprocess.run(
        [sys.executable, "-m", "cascade_cli", "verify", "--serve", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True, text=True, env=_cli_env(), timeout=120,
    )
    assert result.returncode == 2, result.stderr
    assert "--host 0.0.0.0: a reward service reachable from the network needs a token" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr  # one clear line, no traceback


def test_cli_with_the_token_from_the_environment_masks_it_everywhere():
    proc = subprocess.Popen(
        [sys.executable, "-m", "cascade_cli", "verify", "--serve", "--port", "0", "--workers", "1"],
        stderr=subprocess.PIPE, text=True, env=_cli_env(CASCADE_REWARD_TOKEN=TOKEN),
    )
    try:
        port, lines, deadline = None, [], time.time() + 120
        while port is None and time.time() < deadline:
            lines.append(proc.stderr.readline())
            match = re.search(r"http://127\.0\.0\.1:(\d+)", lines[-1])
            port = int(match.group(1)) if match else None
        assert port, "".join(lines)
        assert f"--reward.remote_url http://127.0.0.1:{port}/$CASCADE_REWARD_TOKEN/get_reward" in "".join(lines)
        data = json.dumps({"query": [f"</think>{GOLDEN}"], "prompts": [""], "labels": [json.dumps(SWE_LABEL)]}).encode()
        for path, code in ((f"/{TOKEN}/get_reward", 200), (f"/{WRONG}/get_reward", 401), ("/get_reward", 401)):
            try:
                with urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data), timeout=60) as answer:
                    status = answer.status
            except urllib.error.HTTPError as error:
                status = error.code
            assert status == code, path
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    output = "".join(lines) + err
    assert proc.returncode == 0, output
    assert TOKEN not in output and WRONG not in output
    assert re.search(r"POST /\*\*\*/get_reward 200 n=1 domain=swe mean_reward=1\.0000", output), output
    assert len(re.findall(r"refused POST 401 from 127\.0\.0\.1", output)) == 2, output


def test_token_reference_in_reward_urls():
    from cascade_cli.serve.auth import url_with_token_ref

    ref = "$CASCADE_REWARD_TOKEN"
    assert url_with_token_ref("http://h:5000/get_reward", None) == "http://h:5000/get_reward"
    assert url_with_token_ref("http://h:5000/get_reward", TOKEN) == f"http://h:5000/{ref}/get_reward"
    assert url_with_token_ref("https://h/x/get_reward?a=1", TOKEN) == f"https://h/{ref}/x/get_reward?a=1"
    assert url_with_token_ref("http://h:5000", TOKEN) == f"http://h:5000/{ref}"
    assert url_with_token_ref(f"http://h:5000/{TOKEN}/get_reward", TOKEN) == f"http://h:5000/{ref}/get_reward"
    for kept in (f"http://h:5000/{ref}/get_reward", "http://h:5000/get_reward?token=x"):
        assert url_with_token_ref(kept, TOKEN) == kept


def test_printed_plan_carries_the_reference_and_the_expanded_url_reaches_the_service(
    guarded, cli, tmp_path, monkeypatch
):
    """`--engine openrlhf --dry-run` prints a `${CASCADE_REWARD_TOKEN}` reference, never the literal; the
    shell running the printed plan (or expand_token_ref, for a direct submission) puts the value in, and
    OpenRLHF's client gets rewards through that URL."""
    from openrlhf.utils.agent import SingleTurnAgentExecutor

    from cascade_cli.engines.openrlhf.jobs import remote_reward
    from cascade_cli.serve.auth import expand_token_ref

    monkeypatch.setenv("CASCADE_REWARD_TOKEN", TOKEN)
    reward_file = tmp_path / "reward.py"
    assert remote_reward(["http://10.0.0.5:5000/get_reward", str(reward_file)]) == [
        "--reward.remote_url", f"http://10.0.0.5:5000/$CASCADE_REWARD_TOKEN/get_reward,{reward_file}"
    ]
    result = cli(
        [
            "rlvr", "--domain", "math", "--init", "Qwen/Qwen3-8B-Base", "--data", tmp_path / "m.jsonl",
            "--out", tmp_path / "math_rl", "--engine", "openrlhf", "--dry-run",
            f"cluster.reward_urls=[http://127.0.0.1:{guarded.port}/get_reward]",
        ]
    )
    assert result.exit_code == 0, result.output
    assert TOKEN not in result.output
    line = next(line for line in result.stdout.splitlines() if line.startswith("ray job submit"))
    assert f'--reward.remote_url http://127.0.0.1:{guarded.port}/"${{CASCADE_REWARD_TOKEN}}"/get_reward ' in line
    # The printed line, run by a shell with the variable set, hands ray the URL with the token in it ...
    words = subprocess.run(
        ["bash", "-c", "printf '%s\\n' " + line.split(" -- ", 1)[1]], capture_output=True, text=True,
        env={"PATH": os.environ["PATH"], "CASCADE_REWARD_TOKEN": TOKEN}, check=True,
    ).stdout.splitlines()
    shell_url = words[words.index("--reward.remote_url") + 1]
    # ... the same URL as expand_token_ref makes from the job's argv (for direct submission).
    _, url = remote_reward([f"http://127.0.0.1:{guarded.port}/get_reward"])
    assert url == f"http://127.0.0.1:{guarded.port}/$CASCADE_REWARD_TOKEN/get_reward"
    assert expand_token_ref([url]) == [shell_url] == [f"http://127.0.0.1:{guarded.port}/{TOKEN}/get_reward"]
    (output,) = run_executor(
        SingleTurnAgentExecutor(shell_url), [(chat_prompt("say yes"), echo_label("yes"), "yes<|im_end|>")]
    )
    assert output["reward"] == 1.0
    monkeypatch.delenv("CASCADE_REWARD_TOKEN")
    with pytest.raises(Exception, match="CASCADE_REWARD_TOKEN is not set here"):
        expand_token_ref([url])
