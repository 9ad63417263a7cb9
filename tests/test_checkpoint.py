"""The trainer skeleton: config_diff, the one resume rule, atomic trainer_state/ and final checkpoint."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from cascade_cli import manifest
from cascade_cli.config import diff
from cascade_cli.config.structure import to_plain
from cascade_cli.engines.local.ops.optim import warmup_cosine
from cascade_cli.engines.local.train import trainer_state as ckpt
from cascade_cli.errors import CascadeUsageError
from cascade_cli.manifest import read_manifest, write_manifest

CONFIG = {"lr": 1e-5, "steps": 4, "out": "x", "save_every": 2, "rollout": {"top_k": -1, "backend": "hf"}}


def _trainer(seed: int = 0):
    torch.manual_seed(seed)
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_cosine(10, 2, 0.1, 0.0))
    return model, optimizer, scheduler


def _train_step(model, optimizer, scheduler) -> None:
    model(torch.randn(4, 3)).pow(2).sum().backward()
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()


def _manifest(out: Path, config: dict, status: str, kind: str = "sft", **extra) -> None:
    write_manifest(out, stage="s", kind=kind, config=config, init="tiny", status=status, **extra)


# ---- config_diff ---------------------------------------------------------------------------------------


def test_config_diff_names_dotted_keys_and_ignores_runtime_keys():
    new = {**CONFIG, "lr": 2e-5, "out": "y", "save_every": 0, "eval_limit": 3, "rollout": {"top_k": 5, "backend": "hf"}}
    assert diff.config_diff(CONFIG, new) == ["lr", "rollout.top_k"]
    assert diff.config_diff(CONFIG, {**CONFIG, "phases": [{"steps": 2}]}) == ["phases"]  # a new key differs
    assert diff.config_diff(CONFIG, new, ignore=()) == ["eval_limit", "lr", "out", "rollout.top_k", "save_every"]
    assert diff.config_diff(CONFIG, {**CONFIG, "cluster": {"nodes": 4}}) == []  # a pattern covers its subtree
    assert diff.describe_diff(CONFIG, new, ["lr", "rollout.top_k"]) == "lr (1e-05 -> 2e-05), rollout.top_k (-1 -> 5)"


def test_a_key_added_since_at_its_default_is_no_change():
    defaults = {"lr": 1e-5, "warmup": 0, "lora": {"r": 0, "alpha": 16.0}}
    added = {**CONFIG, "warmup": 0, "lora": {"r": 0, "alpha": 16.0}}
    assert diff.config_diff(CONFIG, added, defaults=defaults) == []
    assert diff.config_diff(CONFIG, {**added, "warmup": 3}, defaults=defaults) == ["warmup"]
    assert diff.config_diff(CONFIG, added) == ["lora.alpha", "lora.r", "warmup"]  # without the defaults
    assert diff.config_diff({**CONFIG, "warmup": 3}, added, defaults=defaults) == ["warmup"]  # recorded: compared


def test_a_stage_trained_before_a_key_existed_stays_complete(tmp_path):
    from cascade_cli.config.diff import class_defaults
    from cascade_cli.config.sft import SFTConfig

    config = SFTConfig(data="d.jsonl", init="tiny", out=str(tmp_path))
    now = to_plain(config)
    recorded = {key: value for key, value in now.items() if key != "packing"}  # `packing` did not exist yet
    _manifest(tmp_path, recorded, "completed")
    with pytest.raises(manifest.StageComplete):
        ckpt.start(tmp_path, now, kind="sft", restart=False, defaults=class_defaults(config))
    with pytest.raises(CascadeUsageError, match=r"packing \(unset -> True\)"):
        ckpt.start(tmp_path, {**now, "packing": True}, kind="sft", restart=False, defaults=class_defaults(config))


def test_every_stage_config_key_that_only_drives_the_run_is_a_runtime_key():
    for key in ("out", "save_every", "resume", "restart", "stop_after", "log_every", "tensorboard", "threads",
                "keep_trainer_state"):
        assert diff.config_diff({key: 1}, {key: 2}) == []
    assert diff.config_diff({"eval_prompts": "a"}, {"eval_prompts": "b"}) == []


# ---- the resume rule -----------------------------------------------------------------------------------


def test_fresh_output_directory_starts_at_step_zero(tmp_path):
    begin = ckpt.start(tmp_path / "out", CONFIG, kind="sft", restart=False)
    assert (begin.step, begin.state_dir, begin.extra, begin.resumed) == (0, None, {}, False)


def test_save_then_resume_restores_model_optimizer_scheduler_rng_and_extra(tmp_path, capsys):
    model, optimizer, scheduler = _trainer()
    _train_step(model, optimizer, scheduler)
    generator_rng = torch.Generator().manual_seed(7).get_state()
    extra = {"cursor": {"epoch": 1, "index": 3}, "generator_rng": generator_rng}
    path = ckpt.save_state(tmp_path, step=1, config=CONFIG, model=model, optimizer=optimizer, scheduler=scheduler, extra=extra)
    assert sorted(p.name for p in path.iterdir()) == [
        "extra.pt", "model.pt", "optimizer.pt", "progress.json", "rng.pt", "scheduler.pt"
    ]
    progress = json.loads((path / "progress.json").read_text())
    assert progress["step"] == 1 and progress["config"] == CONFIG and progress["extra"] == {"cursor": extra["cursor"]}
    draws = (random.random(), np.random.rand())
    _train_step(model, optimizer, scheduler)  # torch's RNG draws the inputs
    reference = {k: v.clone() for k, v in model.state_dict().items()}

    fresh_model, fresh_optimizer, fresh_scheduler = _trainer(seed=1)
    random.seed(99)
    begin = ckpt.start(tmp_path, {**CONFIG, "out": "elsewhere", "save_every": 5}, kind="sft", restart=False)
    assert begin.step == 1 and begin.state_dir == path
    assert begin.extra["cursor"] == extra["cursor"] and torch.equal(begin.extra["generator_rng"], generator_rng)
    assert "resuming" in capsys.readouterr().err
    ckpt.load_state(begin, fresh_model, fresh_optimizer, fresh_scheduler)
    assert (random.random(), np.random.rand()) == draws
    assert fresh_scheduler.last_epoch == 1
    _train_step(fresh_model, fresh_optimizer, fresh_scheduler)
    for key, value in fresh_model.state_dict().items():
        assert torch.equal(value, reference[key]), key


def test_changed_config_is_a_usage_error_naming_the_keys(tmp_path):
    model, optimizer, _ = _trainer()
    ckpt.save_state(tmp_path, step=2, config=CONFIG, model=model, optimizer=optimizer, fingerprints={"data": "a"})
    changed = {**CONFIG, "lr": 2e-5, "steps": 6}
    with pytest.raises(CascadeUsageError, match=r"different config: lr \(1e-05 -> 2e-05\), steps \(4 -> 6\); pass --restart"):
        ckpt.start(tmp_path, changed, kind="sft", restart=False)
    assert ckpt.find_state(tmp_path) is not None  # nothing was removed
    with pytest.raises(CascadeUsageError, match=r"data \(its contents changed\)"):
        ckpt.start(tmp_path, CONFIG, kind="sft", restart=False, fingerprints={"data": "b"})


def test_input_fingerprints_cover_data_and_an_init_stage_manifest(tmp_path):
    data, init = tmp_path / "data.jsonl", tmp_path / "init"
    data.write_text('{"a": 1}\n')
    assert set(manifest.input_fingerprints("tiny", data=data, eval_data=None)) == {"data"}
    _manifest(init, CONFIG, "completed")
    first = manifest.input_fingerprints(str(init), data=data)
    _manifest(init, {**CONFIG, "lr": 1.0}, "completed")  # the init stage trained again
    assert set(first) == {"data", "init"} and manifest.input_fingerprints(str(init), data=data)["init"] != first["init"]


def test_restart_and_resume_false_remove_the_old_run(tmp_path):
    for flags in ({"restart": True}, {"restart": False, "resume": False}):
        model, optimizer, _ = _trainer()
        ckpt.save_state(tmp_path, step=2, config=CONFIG, model=model, optimizer=optimizer)
        _manifest(tmp_path, CONFIG, "completed")
        (tmp_path / "metrics.jsonl").write_text('{"step": 1}\n')
        begin = ckpt.start(tmp_path, {**CONFIG, "lr": 3e-5}, kind="sft", **flags)
        assert begin.step == 0 and begin.state_dir is None
        assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_completed_manifest_with_the_same_config_raises_stage_complete(tmp_path):
    _manifest(tmp_path, CONFIG, "completed", metrics={"train/loss": 0.5})
    with pytest.raises(manifest.StageComplete) as caught:
        ckpt.start(tmp_path, {**CONFIG, "log_every": 9}, kind="sft", restart=False)
    assert "already complete" in caught.value.message and caught.value.metrics == {"train/loss": 0.5}
    with pytest.raises(CascadeUsageError, match=r"steps \(4 -> 5\)"):
        ckpt.start(tmp_path, {**CONFIG, "steps": 5}, kind="sft", restart=False)
    with pytest.raises(CascadeUsageError, match="holds a sft stage, not reward_model"):
        ckpt.start(tmp_path, CONFIG, kind="reward_model", restart=False)


def test_unfinished_manifest_resumes_from_state_or_starts_fresh_without_one(tmp_path):
    _manifest(tmp_path, CONFIG, "running")
    assert ckpt.start(tmp_path, CONFIG, kind="sft", restart=False).step == 0
    model, optimizer, _ = _trainer()
    ckpt.save_state(tmp_path, step=3, config=CONFIG, model=model, optimizer=optimizer)
    _manifest(tmp_path, CONFIG, "stopped")
    assert ckpt.start(tmp_path, CONFIG, kind="sft", restart=False).step == 3
    with pytest.raises(CascadeUsageError, match=r"lr \(1e-05 -> 0.1\)"):
        ckpt.start(tmp_path, {**CONFIG, "lr": 0.1}, kind="sft", restart=False)


# ---- atomic writes -------------------------------------------------------------------------------------

_SAVE_TWICE = textwrap.dedent(
    """
    import os, sys, torch
    from cascade_cli.engines.local.train import trainer_state as ckpt
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(model.parameters())
    ckpt.save_state(sys.argv[1], step=1, config={"lr": 1}, model=model, optimizer=optimizer)
    os.environ[ckpt.KILL_HOOK] = sys.argv[2]
    ckpt.save_state(sys.argv[1], step=2, config={"lr": 1}, model=model, optimizer=optimizer)
    """
)


@pytest.mark.parametrize("phase", ["2", "2:swap"])
def test_a_kill_during_save_leaves_the_previous_state_loadable(tmp_path, phase):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", _SAVE_TWICE, str(tmp_path), phase], env=env, check=False)
    assert done.returncode == -signal.SIGKILL
    state = ckpt.find_state(tmp_path)
    assert state is not None and ckpt.read_progress(state)["step"] == 1
    begin = ckpt.start(tmp_path, {"lr": 1}, kind="sft", restart=False)
    assert begin.step == 1
    model = torch.nn.Linear(3, 2)
    ckpt.load_state(begin, model, torch.optim.AdamW(model.parameters()))
    ckpt.save_state(tmp_path, step=3, config={"lr": 1}, model=model, optimizer=torch.optim.AdamW(model.parameters()))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trainer_state"]


class _Saves:
    def __init__(self, name: str):
        self.name = name

    def save_pretrained(self, path: str, **kwargs) -> None:
        (Path(path) / self.name).write_text(json.dumps(kwargs))


def test_save_final_renames_the_files_into_out(tmp_path):
    (tmp_path / "config.json").write_text("old")
    ckpt.save_final(tmp_path, _Saves("config.json"), _Saves("tokenizer.json"), safe_serialization=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "tokenizer.json"]
    assert json.loads((tmp_path / "config.json").read_text()) == {"safe_serialization": True}
    assert read_manifest(tmp_path) is None  # the caller writes the manifest last


def test_every_model_a_stage_reads_is_an_input_distills_teachers_by_domain(tmp_path):
    """The init, the reward model and each of distill's teachers: retrained since, a resume is refused naming it."""
    from cascade_cli.config.distill import DistillConfig
    from cascade_cli.engines.local.train.stage import Stage
    from cascade_cli.models.resolve import resolve_model

    student, teacher, data = resolve_model("tiny", tmp_path / "models"), tmp_path / "math_rl", tmp_path / "d.jsonl"
    _manifest(teacher, CONFIG, "completed")
    data.write_text("{}\n")
    config = DistillConfig(init=str(student), out=str(tmp_path / "out"), teachers={"math": str(teacher)}, data=[str(data)])
    stage = Stage.open(config, **{"data.0": data})
    assert set(stage.inputs) == {"data.0", "teachers.math"}  # the tiny student is no stage output: no manifest
    stage.save_state(1, torch.nn.Linear(1, 1), torch.optim.SGD(torch.nn.Linear(1, 1).parameters(), lr=0.1))
    stage.record("running")
    _manifest(teacher, {**CONFIG, "lr": 1.0}, "completed")  # the teacher trained again
    with pytest.raises(CascadeUsageError, match=r"other inputs: teachers\.math \(that checkpoint was trained again"):
        Stage.open(config, **{"data.0": data})
