"""Chained real commands, as a shell script chains them: a stage resumed on top of an init checkpoint that was
trained again since exits 2 naming the init (its state was trained from the old model), unless --restart.

For each pair (SFT -> RM, SFT -> RLVR, RLHF -> RLVR): train the first stage, stop the second one midway (its
trainer_state/ saved, as a kill leaves it), retrain the first with --restart and another lr, then rerun the
second with the same command. The SFT every chain starts from is trained once (`trained_sft`); each test
takes a copy of it, which it may train again.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cascade_cli.data.tiny_tasks import generate
from cascade_cli.engines.local.train.trainer_state import KILL_HOOK
from cascade_cli.jsonl import write_jsonl
from cascade_cli.manifest import read_manifest
from cascade_cli.models.resolve import resolve_model

sys.path.insert(0, str(Path(__file__).parent))
import cli_fork  # noqa: E402

pytestmark = pytest.mark.timeout(900)

FIRST_STAGE_CHANGED = "other inputs: init (that checkpoint was trained again since)"


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("chain")
    (root / "init").symlink_to(resolve_model("tiny", root / "models"))
    write_jsonl(root / "sft.jsonl", generate("sft", 16, seed=0))
    write_jsonl(root / "pref.jsonl", generate("pref", 16, seed=0))
    write_jsonl(root / "math.jsonl", generate("math", 16, seed=0))
    write_jsonl(root / "chat.jsonl", generate("general", 16, seed=0))
    return root


def cascade(root: Path, *args: str, kill_at: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "CASCADE_THREADS": "1", "COLUMNS": "200"}
    env.pop(KILL_HOOK, None)
    if kill_at:
        env[KILL_HOOK] = kill_at
    return cli_fork.run(list(args), env)  # a real process, killed for real, forked ready (cli_fork.py)


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def sft(root: Path, out: Path, *extra: str) -> list[str]:
    return ["sft", "--init", str(root / "init"), "--data", str(root / "sft.jsonl"), "--out", str(out), "max_steps=2",
            "batch_size=4", "bf16=false", *extra]


def rm(root: Path, init: Path, out: Path) -> list[str]:
    return ["rlhf", "rm", "--init", str(init), "--data", str(root / "pref.jsonl"), "--out", str(out),
            "max_steps=3", "batch_size=4", "micro_batch=4", "save_every=1", "bf16=false"]


def rlvr(root: Path, init: Path, out: Path) -> list[str]:
    return ["rlvr", "--domain", "math", "--init", str(init), "--data", str(root / "math.jsonl"), "--out", str(out),
            "steps=3", "prompts_per_step=2", "group_size=2", "max_response_len=8", "save_every=1"]


def rlhf(root: Path, init: Path, reward_model: Path, out: Path, *extra: str) -> list[str]:
    return ["rlhf", "--init", str(init), "--reward-model", str(reward_model), "--data", str(root / "chat.jsonl"),
            "--out", str(out), "steps=2", "prompts_per_step=2", "group_size=2", "max_response_len=8", *extra]


@pytest.fixture(scope="module")
def trained_sft(root) -> Path:
    out = root / "sft"
    ok(cascade(root, *sft(root, out)))
    return out


def copy_of(trained: Path, tmp_path: Path) -> Path:
    """The trained stage as if this test had trained it into tmp_path (same files, same manifest)."""
    return Path(shutil.copytree(trained, tmp_path / trained.name, symlinks=True))


def interrupted(root: Path, args: list[str], out: Path) -> None:
    """The stage killed right after its step-1 state landed: a rerun would resume from step 1."""
    killed = cascade(root, *args, kill_at="1:done")
    assert killed.returncode < 0, killed.stderr[-3000:]
    assert read_manifest(out)["status"] == "running" and (out / "trainer_state").is_dir()


def assert_refused_then_restarts(root: Path, args: list[str], out: Path) -> None:
    refused = cascade(root, *args)
    assert refused.returncode == 2, refused.stderr[-3000:]
    said = " ".join(refused.stderr.split())  # one line however the console wrapped it
    assert FIRST_STAGE_CHANGED in said and "--restart" in said
    assert "Traceback" not in refused.stderr and "resuming" not in refused.stderr
    assert read_manifest(out)["status"] == "running"  # nothing was touched
    restarted = ok(cascade(root, *args, "--restart"))
    assert "resuming" not in restarted.stderr and read_manifest(out)["status"] == "completed"


# SFT -> RLVR is slow (`make test-all`): RLVR refusing a retrained init is RLHF -> RLVR below, and RLVR resuming
# on an unchanged SFT is test_unchanged_init_resumes.
@pytest.mark.parametrize("second", ["rm", pytest.param("rlvr", marks=pytest.mark.slow)])
def test_a_stage_resumed_on_a_retrained_sft_exits_2_naming_the_init(root, trained_sft, tmp_path, second):
    sft_out, out = copy_of(trained_sft, tmp_path), tmp_path / second
    args = rm(root, sft_out, out) if second == "rm" else rlvr(root, sft_out, out)
    interrupted(root, args, out)
    ok(cascade(root, *sft(root, sft_out, "lr=5e-3", "--restart")))  # SFT retrained
    assert_refused_then_restarts(root, args, out)


def test_unchanged_init_resumes(root, trained_sft, tmp_path):
    sft_out, out = copy_of(trained_sft, tmp_path), tmp_path / "rl"
    interrupted(root, rlvr(root, sft_out, out), out)
    resumed = ok(cascade(root, *rlvr(root, sft_out, out)))
    assert f"resuming {out} from step 1" in " ".join(resumed.stderr.split())


def test_rlvr_resumed_on_a_retrained_rlhf_exits_2_naming_the_init(root, trained_sft, tmp_path):
    sft_out = copy_of(trained_sft, tmp_path)
    rm_out, rlhf_out, out = (tmp_path / name for name in ("rm", "rlhf", "rl"))
    ok(cascade(root, *rm(root, sft_out, rm_out)))
    ok(cascade(root, *rlhf(root, sft_out, rm_out, rlhf_out)))
    args = rlvr(root, rlhf_out, out)
    interrupted(root, args, out)
    ok(cascade(root, *rlhf(root, sft_out, rm_out, rlhf_out, "lr=5e-4", "restart=true")))  # RLHF retrained
    assert_refused_then_restarts(root, args, out)
