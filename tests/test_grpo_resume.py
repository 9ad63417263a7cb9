"""Kill -9 the real `cascade rlvr` at several points, rerun the same command: the final weights and metrics
equal an uninterrupted run. A completed rerun trains nothing and exits 0 (it used to train the last steps
again), a changed config exits 2 naming the key, and `restart=true` trains afresh.

Kill points: the CASCADE_KILL_DURING_SAVE hook of engines/local/train/trainer_state.py ("2:done" right after the
step-2 checkpoint, "4" halfway through writing step 4's state, "4:swap" between its two renames) and
test_grpo_support.KILL_AT_SCORE inside the reward hook (the held-out eval before training is call 1, step
k's scoring is call k + 1): during step 5, after the step-4 checkpoint, and during step 1, before any.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file

sys.path.insert(0, str(Path(__file__).parent))
import cli_fork  # noqa: E402
from cascade_cli.engines.local.train.trainer_state import KILL_HOOK  # noqa: E402
from cascade_cli.jsonl import write_jsonl  # noqa: E402
from cascade_cli.manifest import read_manifest, read_metrics  # noqa: E402
from test_grpo_support import KILL_AT_SCORE, TIME_KEYS, build_model_dir, toy_rows, without_timings  # noqa: E402

# (kill point, step the rerun resumes from; 0: it starts over)
KILL_POINTS = [("save:2:done", 2), ("save:4", 2), ("save:4:swap", 2), ("score:6", 4), ("score:2", 0)]


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("grpo-resume")
    model = build_model_dir(root / "tiny", seed=0)
    write_jsonl(root / "train.jsonl", toy_rows(32, seed=0))
    write_jsonl(root / "heldout.jsonl", toy_rows(4, seed=1))
    args = ["rlvr", "--domain", "math", "--init", str(model), "--data", str(root / "train.jsonl"),
            "--eval-data", str(root / "heldout.jsonl"), "steps=6", "save_every=2", "prompts_per_step=4",
            "group_size=4", "max_response_len=8", "truncated_reward=null", "mode=no_think", "lr=3e-3",
            "epoch_filter=true"]  # fmt: skip
    return root, args


def cascade(args: list[str], out: Path, kill_at: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "CASCADE_THREADS": "1", "COLUMNS": "200"}
    env.pop(KILL_HOOK, None)
    env.pop(KILL_AT_SCORE, None)
    if kill_at:
        where, point = kill_at.split(":", 1)
        env[KILL_HOOK if where == "save" else KILL_AT_SCORE] = point
    # `test_grpo_support.cli_main`: the real CLI with the toy verifier; a real process, forked ready (cli_fork.py)
    return cli_fork.run([*args, "--out", str(out)], env, entry="cli_main")


@pytest.fixture(scope="module")
def straight(setup) -> Path:
    root, args = setup
    done = cascade(args, root / "straight")
    assert done.returncode == 0, done.stderr[-3000:]
    return root / "straight"


def same_run(out: Path, reference: Path) -> None:
    assert without_timings(read_metrics(out)) == without_timings(read_metrics(reference))
    expected, found = load_file(reference / "model.safetensors"), load_file(out / "model.safetensors")
    assert expected.keys() == found.keys() and all(found[k].equal(expected[k]) for k in expected)
    manifest, wanted = read_manifest(out), read_manifest(reference)
    assert manifest["status"] == "completed"
    def learned(metrics: dict) -> dict:
        return {k: v for k, v in metrics.items() if k != "wall_s" and k.removeprefix("final_") not in TIME_KEYS}

    assert learned(manifest["metrics"]) == learned(wanted["metrics"])


def kill_then_rerun(args: list[str], out: Path, kill_at: str, resumes_from: int, straight: Path) -> None:
    """Kill -9 the command at `kill_at`, rerun it: it resumes from `resumes_from` and ends as `straight`."""
    killed = cascade(args, out, kill_at=kill_at)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert read_manifest(out)["status"] == "running" and not (out / "model.safetensors").exists()
    resumed = cascade(args, out)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert (f"resuming {out} from step {resumes_from}" in resumed.stderr) == bool(resumes_from)
    same_run(out, straight)
    assert not any(p.name.startswith(("trainer_state.", ".final")) for p in out.iterdir())


@pytest.mark.parametrize(("kill_at", "resumes_from"), KILL_POINTS)
def test_kill_then_rerun_equals_an_uninterrupted_run(setup, straight, tmp_path, kill_at, resumes_from):
    kill_then_rerun(setup[1], tmp_path / "killed", kill_at, resumes_from, straight)


def test_completed_rerun_trains_nothing_and_exits_0(setup, straight):
    _, args = setup
    before = {p.name: p.stat().st_mtime_ns for p in straight.iterdir() if p.is_file()}
    done = cascade([*args, "save_every=3"], straight)  # a runtime key may differ
    assert done.returncode == 0, done.stderr[-3000:]
    assert "already complete" in done.stderr and "resuming" not in done.stderr
    assert {p.name: p.stat().st_mtime_ns for p in straight.iterdir() if p.is_file()} == before


def test_changed_config_exits_2_naming_the_key_unless_restart(setup, straight, tmp_path):
    _, args = setup
    out = tmp_path / "out"
    killed = cascade(args, out, kill_at="save:2:done")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    changed = cascade([*args, "lr=1e-3"], out)
    message = changed.stderr.replace("\n", " ")
    assert changed.returncode == 2 and "lr (0.003 -> 0.001)" in message and "--restart" in message, message
    assert read_manifest(out)["status"] == "running"  # nothing was touched
    restarted = cascade([*args, "steps=3", "lr=1e-3", "restart=true"], out)
    assert restarted.returncode == 0, restarted.stderr[-3000:]
    assert "resuming" not in restarted.stderr and [m["step"] for m in read_metrics(out)] == [1, 2, 3]
    assert read_manifest(out)["config"]["lr"] == 1e-3 and read_manifest(out)["status"] == "completed"
    # The same command again: complete, nothing trained.
    again = cascade([*args, "steps=3", "lr=1e-3"], out)
    assert again.returncode == 0 and "already complete" in again.stderr


def test_dynamic_filter_resume_draws_as_many_prompts_as_an_uninterrupted_run(setup, tmp_path):
    # Half the prompts ask for a letter the tokenizer cannot produce (all-zero groups), so after step 1 each
    # round draws more prompts than are missing, by the kept fraction so far: state the resume must restore.
    root, args = setup
    data = tmp_path / "filtered.jsonl"
    never = [{"id": f"never-{i}", "prompt": "Write ☃.", "label": {"answer": "☃"}} for i in range(16)]
    write_jsonl(data, toy_rows(32, seed=0) + never)
    args = [str(data) if a == str(root / "train.jsonl") else a for a in args] + ["dynamic_filter=true"]
    straight = cascade(args, tmp_path / "straight")
    assert straight.returncode == 0, straight.stderr[-3000:]
    assert max(m["groups_sampled"] for m in read_metrics(tmp_path / "straight")[2:]) > 4
    killed = cascade(args, tmp_path / "killed", kill_at="save:2:done")
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    resumed = cascade(args, tmp_path / "killed")
    assert resumed.returncode == 0 and "from step 2" in resumed.stderr, resumed.stderr[-3000:]
    same_run(tmp_path / "killed", tmp_path / "straight")
