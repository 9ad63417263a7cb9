"""Every file and folder a command writes is readable by the group and others as the umask allows (weights
included: safetensors and temporary folders start private); a completed stage keeps its trainer_state/ only
with keep_trainer_state (a finished stage is its checkpoint: the optimizer state is twice its size)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest


def cascade(args: list, umask: int, env: dict[str, str]) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "cascade_cli", *map(str, args)], capture_output=True, text=True, timeout=600,
        env=env, preexec_fn=lambda: os.umask(umask),
    )
    assert result.returncode == 0, result.stderr[-3000:]


def modes(root: Path) -> dict[str, int]:
    return {str(path.relative_to(root.parent)): stat.S_IMODE(path.stat().st_mode) for path in [root, *root.rglob("*")]}


@pytest.mark.parametrize("umask", [0o002])  # group-writable: a fixed 0644 or 0600 fails as well
def test_outputs_follow_the_umask(tmp_path, umask):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CASCADE_CACHE": str(tmp_path / "cache")}
    cascade(["prepare-data", "--source", "tiny:sft", "--out", tmp_path / "sft_data", "--n", "8"], umask, env)
    cascade(["prepare-data", "--source", "tiny:math", "--out", tmp_path / "math_data", "--n", "8"], umask, env)
    cascade(["sft", "--init", "tiny", "--data", tmp_path / "sft_data", "--out", tmp_path / "sft", "max_steps=1",
             "batch_size=2", "max_seq_len=64", "keep_trainer_state=true"], umask, env)
    cascade(["rlvr", "--domain", "math", "--init", tmp_path / "sft", "--data", tmp_path / "math_data", "--out",
             tmp_path / "rl", "steps=1", "prompts_per_step=2", "group_size=2", "max_response_len=8"], umask, env)
    cascade(["eval", "--model", tmp_path / "rl", "--benchmarks", "tiny_math", "--limit", "1", "--k", "1",
             "--max-tokens", "4", "--backend", "hf", "--out", tmp_path / "eval"], umask, env)
    found = {}
    for folder in ("sft_data", "sft", "rl", "eval", "cache"):
        found.update(modes(tmp_path / folder))
    assert "rl/model.safetensors" in found and "cache/models/tiny-0/model.safetensors" in found
    wrong = {
        name: oct(mode) for name, mode in found.items()
        if mode != (0o777 if (tmp_path / name).is_dir() else 0o666) & ~umask
    }
    assert not wrong, f"modes other than the umask allows (umask {umask:03o}): {wrong}"
    assert (tmp_path / "sft" / "trainer_state" / "progress.json").is_file()
    assert not any(path.name.startswith("trainer_state") for path in (tmp_path / "rl").iterdir())
