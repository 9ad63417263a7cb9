"""Kill -9 the real `cascade distill` and rerun the same command: the final weights and metrics equal an
uninterrupted run (GRPO's resume protocol, engines/local/checkpoint.py, with the teachers loaded afresh and
the learning-rate warm-up a function of the step).

Kill points as in test_grpo_resume.py: right after the step-2 checkpoint, between the two renames of step 4's,
and inside the reward hook during step 5 (the held-out eval before training is call 1)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cascade_cli.checkpoint import read_metrics  # noqa: E402
from cascade_cli.jsonl import write_jsonl  # noqa: E402
from test_grpo_resume import cascade, kill_then_rerun  # noqa: E402
from test_grpo_support import build_model_dir, toy_rows  # noqa: E402

KILL_POINTS = [("save:2:done", 2), ("save:4:swap", 2), ("score:6", 4)]


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> tuple[Path, list[str]]:
    root = tmp_path_factory.mktemp("distill-resume")
    student, teacher = build_model_dir(root / "student", seed=0), build_model_dir(root / "teacher", seed=1)
    write_jsonl(root / "train.jsonl", toy_rows(32, seed=0))
    write_jsonl(root / "heldout.jsonl", toy_rows(4, seed=1))
    args = ["distill", "--init", str(student), "--teachers", f"math={teacher}", "--data", str(root / "train.jsonl"),
            "--eval-data", str(root / "heldout.jsonl"), "steps=6", "save_every=2", "prompts_per_step=4",
            "group_size=4", "max_response_len=8", "mode=no_think", "lr=3e-3", "warmup_steps=4",
            "warmup_start_lr=3e-4", "reward_weight=0.5"]  # fmt: skip
    return root, args


@pytest.fixture(scope="module")
def straight(setup) -> Path:
    root, args = setup
    done = cascade(args, root / "straight")
    assert done.returncode == 0, done.stderr[-3000:]
    metrics = read_metrics(root / "straight")
    assert [m["lr"] for m in metrics][:5] == pytest.approx([3e-4, 9.75e-4, 1.65e-3, 2.325e-3, 3e-3])
    assert all(m["teacher_advantage"] != 0 and m["grad_norm"] > 0 for m in metrics)
    return root / "straight"


@pytest.mark.parametrize(("kill_at", "resumes_from"), KILL_POINTS)
def test_kill_then_rerun_equals_an_uninterrupted_run(setup, straight, tmp_path, kill_at, resumes_from):
    kill_then_rerun(setup[1], tmp_path / "killed", kill_at, resumes_from, straight)
