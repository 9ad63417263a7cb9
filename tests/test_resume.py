"""Kill -9 the real `cascade sft` / `cascade rlhf rm` at several points, rerun the same command: the final
weights and metrics equal an uninterrupted run. A completed rerun trains nothing, a changed config exits 2
naming the key, and `restart=true` trains afresh.

Kill points come from the CASCADE_KILL_DURING_SAVE hook of engines/local/train/trainer_state.py (deterministic, unlike
a timer): "2:done" right after the step-2 checkpoint landed, "4" halfway through writing step 4's state,
"4:swap" between its two renames, "6:done" after the last state but before the final weights and manifest.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file

from cascade_cli.data.tiny_tasks import generate
from cascade_cli.engines.local.train.trainer_state import KILL_HOOK
from cascade_cli.jsonl import write_jsonl
from cascade_cli.manifest import read_manifest
from cascade_cli.models.resolve import resolve_model

sys.path.insert(0, str(Path(__file__).parent))
import cli_fork  # noqa: E402

# 6:done: after the last step's state, which only a stage trained with keep_trainer_state saves.
KILL_POINTS = ["2:done", "4", "4:swap", "6:done"]
TIMING_KEYS = {"tokens_per_s"}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("resume")
    model = resolve_model("tiny", root / "models")
    write_jsonl(root / "sft.jsonl", generate("sft", 24, seed=0))
    write_jsonl(root / "pref.jsonl", generate("pref", 32, seed=0))
    return root, model


def commands(setup) -> dict[str, list[str]]:
    root, model = setup
    common = ["--init", str(model), "lr=3e-3", "bf16=false", "max_steps=6", "save_every=2"]
    return {
        "sft": ["sft", "--data", str(root / "sft.jsonl"), *common, "batch_size=4", "threads=1"],
        "rm": ["rlhf", "rm", "--data", str(root / "pref.jsonl"), *common, "batch_size=4", "micro_batch=4",
               "heldout_fraction=0.25"],
    }


def cascade(args: list[str], out: Path, kill_at: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "CASCADE_THREADS": "1", "COLUMNS": "200"}
    env.pop(KILL_HOOK, None)
    if kill_at:
        env[KILL_HOOK] = kill_at
    return cli_fork.run([*args, "--out", str(out)], env)  # a real process, killed for real, forked ready


def metrics(out: Path) -> list[dict]:
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in row.items() if k not in TIMING_KEYS} for row in rows]


def weights(out: Path) -> dict:
    return load_file(out / "model.safetensors")


@pytest.fixture(scope="module")
def straight(setup):
    """One uninterrupted run per trainer, the reference for every kill point."""
    runs = {}
    for name, args in commands(setup).items():
        out = setup[0] / f"straight-{name}"
        done = cascade(args, out)
        assert done.returncode == 0, done.stderr[-2000:]
        runs[name] = out
    return runs


@pytest.mark.parametrize("kill_at", KILL_POINTS)
@pytest.mark.parametrize("trainer", ["sft", "rm"])
def test_kill_then_rerun_equals_an_uninterrupted_run(setup, straight, tmp_path, trainer, kill_at):
    args, out = commands(setup)[trainer], tmp_path / "killed"
    keep = kill_at == "6:done"
    args = [*args, "keep_trainer_state=true"] if keep else args
    killed = cascade(args, out, kill_at=kill_at)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert read_manifest(out)["status"] == "running" and not (out / "model.safetensors").exists()
    resumed = cascade(args, out)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    step = int(kill_at.split(":")[0]) if kill_at.endswith(":done") else int(kill_at.split(":")[0]) - 2
    assert f"resuming {out} from step {step}" in resumed.stderr
    assert metrics(out) == metrics(straight[trainer])
    expected, found = weights(straight[trainer]), weights(out)
    assert expected.keys() == found.keys()
    assert all(found[key].equal(expected[key]) for key in expected)
    manifest, reference = read_manifest(out), read_manifest(straight[trainer])
    assert manifest["status"] == "completed"
    for key in ("train/loss", "eval/init_accuracy", "heldout_accuracy", "heldout_accuracy_before", "final_loss"):
        assert manifest["metrics"].get(key) == reference["metrics"].get(key), key
    assert not any(p.name.startswith(("trainer_state.", ".final")) for p in out.iterdir())
    assert (out / "trainer_state").is_dir() == keep


@pytest.mark.parametrize("trainer", ["sft", "rm"])
def test_completed_rerun_trains_nothing(setup, straight, trainer):
    out = straight[trainer]
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir() if p.is_file()}
    done = cascade(commands(setup)[trainer] + ["log_every=3"], out)  # a runtime key may differ
    assert done.returncode == 0, done.stderr[-2000:]
    assert "already complete" in done.stderr and "resuming" not in done.stderr
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir() if p.is_file()} == before


@pytest.mark.parametrize("trainer", ["sft", "rm"])
def test_changed_config_exits_2_naming_the_key_unless_restart(setup, straight, tmp_path, trainer):
    args, out = commands(setup)[trainer], tmp_path / "out"
    stopped = cascade([*args, "stop_after=2"], out)
    assert stopped.returncode == 0 and read_manifest(out)["status"] == "stopped", stopped.stderr[-2000:]
    changed = cascade([*args, "lr=1e-3"], out)
    assert changed.returncode == 2, changed.stderr[-2000:]
    assert "different config: lr (0.003 -> 0.001)" in changed.stderr and "--restart" in changed.stderr
    assert read_manifest(out)["status"] == "stopped"  # nothing was touched
    restarted = cascade([*args, "lr=1e-3", "max_steps=3", "restart=true"], out)
    assert restarted.returncode == 0, restarted.stderr[-2000:]
    assert "resuming" not in restarted.stderr and [row["step"] for row in metrics(out)] == [1, 2, 3]
    assert read_manifest(out)["config"]["lr"] == 1e-3 and read_manifest(out)["status"] == "completed"
