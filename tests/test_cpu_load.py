"""cpu_load: the busy cores measured from /proc/stat, the OpenMP wait policy and the stage thread count that
follow from them."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from cascade_cli import cpu_load
from cascade_cli.engines.local.ops import compute


def _spin(seconds: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", f"import time\nend = time.time() + {seconds}\nwhile time.time() < end: pass"])


def test_busy_cores_sees_a_spinning_process():
    spinner = _spin(3.0)
    try:
        time.sleep(0.3)
        busy = cpu_load.busy_cores(sample_s=0.5)
    finally:
        spinner.kill()
        spinner.wait()
    assert 0.7 <= busy <= (os.cpu_count() or 1) + 0.01


def test_wait_policy_is_passive_only_on_a_busy_machine(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.setattr(cpu_load, "busy_cores", lambda: 0.1)
    assert cpu_load.choose_wait_policy() == "default" and "OMP_WAIT_POLICY" not in os.environ
    monkeypatch.setattr(cpu_load, "busy_cores", lambda: 1.2)
    assert cpu_load.choose_wait_policy() == "PASSIVE" and os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")  # the user's choice wins
    assert cpu_load.choose_wait_policy() == "ACTIVE"


def test_idle_cores_leave_out_the_busy_ones(monkeypatch):
    cores = len(os.sched_getaffinity(0))
    monkeypatch.setattr(compute, "busy_cores", lambda: 0.0)
    assert compute.idle_cores() == cores
    monkeypatch.setattr(compute, "busy_cores", lambda: cores + 3.0)
    assert compute.idle_cores() == 1


_CLI_THEN_POLICY = """
import os, sys
from typer.testing import CliRunner
from cascade_cli.cli import app
assert "torch" not in sys.modules
CliRunner().invoke(app, sys.argv[1:])
print("policy", os.environ.get("OMP_WAIT_POLICY", "default"))
"""


def _policy_after(*args: str) -> str:
    env = {key: value for key, value in os.environ.items() if key != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", _CLI_THEN_POLICY, *args], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.split("policy ")[-1].strip()


def test_a_command_on_a_busy_machine_sleeps_its_idle_threads_but_importing_or_help_does_not_sample():
    spinner = _spin(20.0)
    try:
        time.sleep(0.3)
        assert _policy_after("recipe", "list") == "PASSIVE"
        assert _policy_after("recipe", "list", "--help") == "default"
    finally:
        spinner.kill()
        spinner.wait()
