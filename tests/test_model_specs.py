"""Model specs resolve offline first: a typo of a known spec gets a did-you-mean before any model library
loads; a hub id is looked up in the local cache, and the hub (a real HTTP server on loopback here) is asked
once, briefly: offline (`HF_HUB_OFFLINE`), silent or without the model, the spec fails at once, saying so."""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from cascade_cli.errors import CascadeUsageError
from cascade_cli.models import specs

PROBE = """
import sys
from cascade_cli.cli import main
sys.argv = ["cascade", *sys.argv[1:]]
try:
    main()
except SystemExit as exit:
    print("exit", exit.code, "transformers loaded:", "transformers" in sys.modules)
"""


def test_a_typo_of_a_spec_gets_a_did_you_mean_before_any_model_library_loads(tmp_path):
    for spec, expected in (("smollm2-135", "did you mean smollm2-135m?"), ("tinny", "did you mean tiny?")):
        result = subprocess.run(
            [sys.executable, "-c", PROBE, "sft", "--init", spec, "--data", tmp_path, "--out", tmp_path / "o"],
            capture_output=True, text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        assert "exit 2 transformers loaded: False" in result.stdout, result.stdout + result.stderr
        assert f"init {spec}: not a known model spec" in result.stderr and expected in result.stderr
        assert "tiny, tiny:SEED, smollm2-135m, gguf:FILE.gguf" in result.stderr


def test_a_bad_tiny_seed_is_named_as_written(cli, tmp_path):
    result = cli(["sft", "--init", "tiny:abc", "--data", tmp_path, "--out", tmp_path / "o"])
    assert result.exit_code == 2
    assert "init tiny:abc: expected `tiny` or `tiny:SEED` with SEED a non-negative integer; found seed 'abc'" in result.output


class Hub(http.server.BaseHTTPRequestHandler):
    """A stand-in hub: `status` for every model-info request (None: accept the request, never answer)."""

    status: int | None = 404
    requests: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (the http.server name)
        Hub.requests.append(self.path)
        if Hub.status is None:
            time.sleep(30)
            return
        self.send_response(Hub.status)
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args) -> None:
        pass


@contextmanager
def hub(status: int | None) -> Iterator[str]:
    Hub.status, Hub.requests = status, []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub_cache"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub_cache"))


def test_offline_the_hub_is_not_asked(empty_cache, monkeypatch):
    with hub(200) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        with pytest.raises(CascadeUsageError, match="not in the local Hugging Face cache; HF_HUB_OFFLINE is set"):
            specs.hub_model("org/model")
        assert Hub.requests == []


def test_a_silent_hub_fails_within_seconds(empty_cache, monkeypatch):
    with hub(None) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        started = time.monotonic()
        with pytest.raises(CascadeUsageError, match=r"cannot be reached \(no answer within 5 s"):
            specs.hub_model("org/model")
        assert time.monotonic() - started < specs.HUB_TIMEOUT_S + 5
        assert Hub.requests == ["/api/models/org/model"]  # asked once, no retries


def test_no_hub_at_all_fails_at_once(empty_cache, monkeypatch):
    with hub(404) as endpoint:
        closed = endpoint  # the server is gone after the block: nothing listens on its port
    monkeypatch.setenv("HF_ENDPOINT", closed)
    started = time.monotonic()
    with pytest.raises(CascadeUsageError, match="cannot be reached"):
        specs.hub_model("org/model")
    assert time.monotonic() - started < specs.HUB_TIMEOUT_S


def test_the_hub_answers_for_a_model_it_has_and_one_it_has_not(empty_cache, monkeypatch):
    with hub(404) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        with pytest.raises(CascadeUsageError, match=r"has no such model \(HTTP 404\)"):
            specs.hub_model("org/missing")
    with hub(200) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        assert str(specs.hub_model("org/model")) == "org/model"  # transformers downloads it from here


def test_a_cached_hub_model_needs_no_hub(empty_cache, tmp_path, monkeypatch):
    """A snapshot in the Hugging Face cache layout is found with no request (HF_HUB_OFFLINE set as well)."""
    snapshot = tmp_path / "hub_cache" / "models--org--model" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    refs = tmp_path / "hub_cache" / "models--org--model" / "refs"
    refs.mkdir()
    (refs / "main").write_text("abc123")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert specs.hub_model("org/model") == snapshot
