"""Epoch-level prompt filtering on OpenRLHF: a stage with `epoch_filter` runs as one train_ppo_ray job per
epoch, its prompt file rewritten between them (the rule: cascade_cli.data.epoch_filter, shared with the local
engine).

Per epoch, top to bottom: the epoch's pool (every prompt not dropped, plus the dropped ones that re-enter,
seeded); as many whole rollout batches of it as the current phase has steps left (at least one; a pool
smaller than a batch is repeated to fill it); those rows written with `prompt_id` (the row's index in the
converted file) added to each label; one job from the previous output; then the outcomes the agent
appended (engines/openrlhf/agent.py: prompt_id, passed per rollout) decide the next epoch's drops. The state
(`OUT/openrlhf_data/epochs.json`) is written after each finished epoch, so a rerun after a failure resumes
at the epoch that failed, from the last finished epoch's weights.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from itertools import cycle, islice
from pathlib import Path
from typing import Any

from cascade_cli.config.grpo import GRPOConfig, resolve_phases
from cascade_cli.config.structure import to_plain
from cascade_cli.console import console, labelled, print_warning
from cascade_cli.data.epoch_filter import epoch_pool, update_dropped
from cascade_cli.engines.openrlhf.jobs import (
    DATA_DIR,
    OpenRLHFJob,
    converted_data_path,
    outcomes_dir,
    phase_output,
    rl_job,
    stage_name,
    stage_out,
)

STATE_FILE = "epochs.json"


def state_path(config: GRPOConfig) -> Path:
    return stage_out(config) / DATA_DIR / STATE_FILE


def _fingerprint(config: GRPOConfig) -> dict[str, Any]:
    """The config that decides the epochs (`restart` / `dry_run` say how to run, not what)."""
    plain = dict(to_plain(config))
    plain.pop("restart", None)
    plain.pop("dry_run", None)
    return plain


def _fresh_state(config: GRPOConfig) -> dict[str, Any]:
    return {"config": _fingerprint(config), "epoch": 0, "phase": 0, "phase_steps": 0, "dropped": {},
            "init": str(config.init), "jobs": []}


def load_state(config: GRPOConfig) -> dict[str, Any]:
    """The saved state when it belongs to this same stage config (and no restart was asked), else a fresh one."""
    path = state_path(config)
    if path.is_file() and not config.restart:
        state = json.loads(path.read_text())
        if state.get("config") == _fingerprint(config):
            return state
        print_warning(f"{path}: written for another config of the stage; epoch filtering starts over")
    return _fresh_state(config)


def read_outcomes(folder: Path) -> dict[str, list[int]]:
    """prompt_id -> [passed rollouts, rollouts] from every agent process's file in `folder`."""
    stats: dict[str, list[int]] = {}
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip():
                outcome = json.loads(line)
                entry = stats.setdefault(str(outcome["prompt_id"]), [0, 0])
                entry[0] += bool(outcome["passed"])
                entry[1] += 1
    return stats


def write_epoch_file(source: Path, indices: list[int], target: Path) -> None:
    lines = [line for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("w", encoding="utf-8") as sink:
        for index in indices:
            row = json.loads(lines[index])
            row["label"] = json.dumps({**json.loads(row["label"]), "prompt_id": index}, ensure_ascii=False)
            sink.write(json.dumps(row, ensure_ascii=False) + "\n")


def run_epoch_jobs(config: GRPOConfig, run_job: Callable[[OpenRLHFJob], None]) -> dict[str, Any]:
    """Run the stage's epochs (see the module docstring); `run_job` submits one job and raises on failure."""
    phases = resolve_phases(config)
    source = converted_data_path(config)
    n_rows = sum(1 for line in source.read_text(encoding="utf-8").splitlines() if line.strip())
    batch = config.prompts_per_step
    state = load_state(config)
    if state["epoch"]:
        console.print(labelled("resume", "dim", f"{stage_name(config)} at epoch {state['epoch']} (from {state['init']})"))
    while state["phase"] < len(phases):
        phase = phases[state["phase"]]
        epoch = state["epoch"]
        pool = epoch_pool(n_rows, state["dropped"], config.seed, epoch, config.epoch_filter_hard_p,
                          config.epoch_filter_easy_p)
        steps_left = phase.steps - state["phase_steps"]
        steps = min(steps_left, max(1, len(pool) // batch))
        last = state["phase"] == len(phases) - 1 and steps == steps_left
        out = phase_output(config, state["phase"], phase) if steps == steps_left else (
            stage_out(config) / "epochs" / str(epoch))
        tag = f"epoch{epoch}"
        data = stage_out(config) / DATA_DIR / f"{tag}.jsonl"
        write_epoch_file(source, list(islice(cycle(pool), steps * batch)), data)
        shutil.rmtree(outcomes_dir(config, tag), ignore_errors=True)  # a failed attempt's outcomes
        job = rl_job(config, phase, f"{stage_name(config)}/{tag}", tag, data, steps, state["init"], out)
        console.print(f"{job.name}: {len(pool)} of {n_rows} prompts in the pool; {steps} steps")
        run_job(job)
        stats = read_outcomes(outcomes_dir(config, tag))
        if not stats:
            print_warning(f"{job.name}: no outcomes in {outcomes_dir(config, tag)}; nothing is dropped")
        state["dropped"] = update_dropped(state["dropped"], stats)
        state["jobs"].append({"name": job.name, "steps": steps, "pool": len(pool), "output_dir": str(out),
                              "dropped": len(state["dropped"])})
        state.update(epoch=epoch + 1, init=str(out), phase_steps=state["phase_steps"] + steps)
        if state["phase_steps"] == phase.steps:
            state.update(phase=state["phase"] + 1, phase_steps=0)
        state_path(config).write_text(json.dumps(state, indent=1))
        if last:
            break
    return state
