"""Run a stage on OpenRLHF over Ray: validate, convert the data, submit each job, stream its logs, record
the job ids and the output in the stage manifest. The output directory is the next stage's `init`.

A dry run (`dry_run=true`, `--dry-run`) prints the commands and touches nothing: no files, no Ray, no torch.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cascade_cli.chat import CHAT_TEMPLATE
from cascade_cli.config.common import StageConfig
from cascade_cli.console import console, labelled, print_skip, print_warning
from cascade_cli.engines.openrlhf.agent_file import export, export_command
from cascade_cli.engines.openrlhf.data import RL_KINDS, convert_stage_data, stage_mode, write_phase_files
from cascade_cli.engines.openrlhf.epoch_jobs import run_epoch_jobs
from cascade_cli.engines.openrlhf.jobs import (
    JobBuilder,
    OpenRLHFJob,
    converted_data_path,
    phase_data_path,
    phase_samples,
    stage_jobs,
    stage_name,
)
from cascade_cli.engines.openrlhf.preflight import preflight
from cascade_cli.errors import CascadeRunError, CascadeUsageError
from cascade_cli.manifest import StageManifest
from cascade_cli.models.resolve import resolve_model
from cascade_cli.models.tiny import is_embedded_spec
from cascade_cli.serve.auth import expand_token_ref, with_token_env

LOG_DIR = "openrlhf_logs"
TAIL_LINES = 40
FOLLOW_RETRIES = 20
# `ray job status` prints "Job 'ID' succeeded" / "failed" / "was stopped" when done, else "Status for job 'ID': RUNNING".
_DONE = re.compile(r"Job '[^']*' (succeeded|failed|was stopped)")
_STATUS = re.compile(r"Status for job '[^']*': ([A-Z]+)")
_DONE_STATUS = {"succeeded": "SUCCEEDED", "failed": "FAILED", "was stopped": "STOPPED"}

EntrypointOverride = Callable[[OpenRLHFJob], list[str]]
EPOCH_FILTER_PLAN = (
    "epoch_filter: `recipe run` runs each phase below as one job per epoch: after each, the prompts solved "
    "by 0% or 100% of their rollouts (the agent's outcomes) leave the prompt file, re-entering with p = "
    "epoch_filter_hard_p / epoch_filter_easy_p (seeded); the state is in OUT/openrlhf_data/epochs.json"
)


def conversion_command(config: StageConfig) -> list[str]:
    argv = [
        "python3",
        "-m",
        "cascade_cli.engines.openrlhf.data",
        config.kind,
        str(Path(config.data).resolve()),
        str(converted_data_path(config)),
    ]
    mode = stage_mode(config)
    if mode:
        argv += ["--mode", mode]
    if config.kind == "rlvr":
        argv += ["--domain", str(config.domain)]
    if config.kind == "reward_model" and not config.strip_thinking:
        argv += ["--keep-thinking"]
    if config.kind in RL_KINDS:
        argv += ["--phase-samples", ",".join(map(str, phase_samples(config))), "--seed", str(config.seed)]
    return argv


def plan_commands(config: StageConfig, builder: JobBuilder) -> list[str]:
    """Shell lines for the stage: the data conversion, then each OpenRLHF job (notes as comments)."""
    lines = [shlex.join(conversion_command(config))]
    if config.kind in RL_KINDS and config.epoch_filter:
        lines.append(f"# {EPOCH_FILTER_PLAN}")
    for job in stage_jobs(config, builder):
        lines += [f"# note: {note}" for note in job.notes]
        if job.agent:
            lines.append(export_command(*job.agent))
        lines.append(job.shell())
    return lines


def ray_cli() -> str:
    found = shutil.which("ray") or str(Path(sys.executable).with_name("ray"))
    if not Path(found).exists():
        raise CascadeUsageError(
            "engine openrlhf: the `ray` command was not found (pip install 'ray[default]')"
        )
    return found


def _job_id(name: str) -> str:
    return "cascade-" + re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-") + f"-{int(time.time() * 1000)}"


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "RAY_ADDRESS": ""})


def submit_job(job: OpenRLHFJob, entrypoint: list[str], job_id: str) -> None:
    ray = ray_cli()
    separator = job.submit.index("--")
    submit = with_token_env(job.submit[1:separator])
    argv = [ray, *submit, "--submission-id", job_id, "--no-wait", "--", *expand_token_ref(entrypoint)]
    result = _run(argv)
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-TAIL_LINES:]
        raise CascadeRunError(f"job {job.name}: `ray job submit` failed:\n" + "\n".join(tail))


def follow_logs(address: str, job_id: str, log_path: Path) -> deque[str]:
    """Stream `ray job logs --follow` to the console and to `log_path`; returns the last lines."""
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    argv = [ray_cli(), "job", "logs", "--address", address, "--follow", job_id]
    with (
        log_path.open("a", encoding="utf-8") as sink,
        subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "RAY_ADDRESS": ""},
        ) as process,
    ):
        assert process.stdout is not None
        for line in process.stdout:
            sink.write(line)
            sink.flush()
            tail.append(line.rstrip("\n"))
            console.print(labelled(job_id, "dim", line.rstrip()))
    return tail


def job_status(address: str, job_id: str, attempts: int = 10) -> str:
    """The job's final status (SUCCEEDED, FAILED, STOPPED); waits while it is still PENDING / RUNNING."""
    status = "UNKNOWN"
    for _ in range(attempts):
        result = _run([ray_cli(), "job", "status", "--address", address, job_id])
        text = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout + result.stderr)
        done, current = _DONE.findall(text), _STATUS.findall(text)
        status = _DONE_STATUS[done[-1]] if done else (current[-1] if current else "UNKNOWN")
        if status not in ("PENDING", "RUNNING"):
            return status
        time.sleep(1)
    return status


def init_template_warning(config: StageConfig) -> str | None:
    """RL stages render prompts with the init checkpoint's own chat template (train_ppo_ray has no flag to
    override it): warn when a local init carries another template than ours."""
    if config.kind not in RL_KINDS:
        return None
    init = Path(str(config.init))
    candidates = [init / "chat_template.jinja", init / "tokenizer_config.json"]
    for path in candidates:
        if not path.is_file():
            continue
        text = path.read_text()
        template = text if path.suffix == ".jinja" else json.loads(text).get("chat_template")
        if template and template != CHAT_TEMPLATE:
            return (
                f"{init}: its tokenizer's chat template is not cascade's (/think, /no_think); OpenRLHF renders "
                "RL prompts with it. Start RL from a cascade SFT output (its tokenizer carries ours)."
            )
        if template:
            return None
    return None


def completed_jobs(record: StageManifest) -> dict[str, dict[str, Any]]:
    """Jobs an earlier run of this stage finished (from its manifest), by name."""
    earlier = record.previous()
    return {job["name"]: job for job in earlier.get("openrlhf_jobs", []) if job.get("status") == "SUCCEEDED"}


def run_openrlhf_stage(
    config: StageConfig, builder: JobBuilder, entrypoint_override: EntrypointOverride | None = None
) -> dict[str, Any]:
    """Validate, then (unless dry_run) convert the data and run the stage's jobs in order. `builder` is the
    kind's job builder from the stage table (`cascade_cli.stage_kinds`).

    `entrypoint_override` replaces what each job runs on the cluster (the submission, log streaming and
    manifest stay real); tests use it to let a CPU stand-in play the trainer.
    """
    stage_jobs(config, builder)  # refuse bad flags, clusters and reward sources before anything is written
    if config.dry_run:
        commands = plan_commands(config, builder)
        for line in commands:
            print(line)
        return {"dry_run": True, "commands": commands}

    if config.cluster.launcher == "slurm":
        raise CascadeUsageError(
            f"stage {stage_name(config)}: cluster.launcher slurm: this command submits to Ray; write sbatch "
            "scripts with `cascade recipe plan RECIPE --launcher slurm --out DIR` and run DIR/submit.sh "
            "(or set cluster.launcher=ray)"
        )
    if is_embedded_spec(str(config.init)):
        resolve_model(str(config.init))  # build the embedded model where model_ref points
    warning = init_template_warning(config)
    if warning:
        print_warning(warning)
    out = Path(config.out).resolve()
    data_path = converted_data_path(config)
    started = time.time()
    rows = convert_stage_data(config, data_path)
    jobs = stage_jobs(config, builder)
    if config.kind in RL_KINDS and not config.epoch_filter:  # epoch filtering writes a file per epoch
        samples = phase_samples(config)
        write_phase_files(
            data_path, samples, [phase_data_path(config, k) for k in range(len(samples))], config.seed
        )
    records: list[dict[str, Any]] = []
    checked: list[bool] = []  # the cluster checks run once, before the first job this run submits

    stage_manifest = StageManifest(
        out, config, init=str(config.init), extra={"engine": "openrlhf", "output_dir": str(out), "openrlhf_data": str(data_path)}
    )

    def manifest(status: str) -> None:
        stage_manifest.write(
            status, {"jobs": len(records), "rows": rows}, timings={"seconds": round(time.time() - started, 2)},
            extra={"openrlhf_jobs": records},
        )

    def run_job(job: OpenRLHFJob) -> None:
        for note in job.notes:
            print_warning(f"{job.name}: {note}")
        # Ray reachable, enough nodes and GPUs, `out` visible; once (DeepSpeed's hostfile launcher reaches its
        # nodes over ssh, not through Ray: nothing to count there).
        if not checked and not (config.cluster.launcher == "hostfile" and job.cli != "train_ppo_ray"):
            preflight(config.cluster, out, ray_cli())
            checked.append(True)
        if job.agent:
            export(*job.agent, origin=f"the runner, for job {job.name}")
        job_id = _job_id(job.name)
        address = job.submit[job.submit.index("--address") + 1]
        log_path = out / LOG_DIR / f"{job_id}.log"
        record = {
            "name": job.name,
            "job_id": job_id,
            "output_dir": job.output_dir,
            "init": job.init,
            "log": str(log_path),
            "command": job.argv,
            "status": "SUBMITTED",
        }
        records.append(record)
        manifest("running")
        entrypoint = entrypoint_override(job) if entrypoint_override else job.entrypoint
        submit_job(job, entrypoint, job_id)
        console.print(f"submitted {job_id} ({job.name}); logs: {log_path}")
        try:
            tail = follow_logs(address, job_id, log_path)
            record["status"] = job_status(address, job_id)
            for _ in range(FOLLOW_RETRIES):  # the log stream can drop while the job still runs: follow again
                if record["status"] not in ("PENDING", "RUNNING"):
                    break
                tail.extend(follow_logs(address, job_id, log_path))
                record["status"] = job_status(address, job_id)
        except KeyboardInterrupt:
            record["status"] = "DETACHED"
            manifest("interrupted")
            print_warning(
                f"{job_id} keeps running on the cluster; stop it with: ray job stop --address {address} {job_id}"
            )
            raise
        if record["status"] != "SUCCEEDED":
            record["last_log_lines"] = list(tail)
            manifest("failed")
            raise CascadeRunError(
                f"stage {stage_name(config)}: OpenRLHF job {job_id} ({job.name}) ended {record['status']}; "
                f"last log lines:\n" + "\n".join(tail)
            )

    if config.kind in RL_KINDS and config.epoch_filter:
        run_epoch_jobs(config, run_job)  # one job per epoch, resumable from its own state file
    else:
        done = completed_jobs(stage_manifest)
        for job in jobs:
            earlier = done.get(job.name)
            if earlier and earlier.get("command") == job.argv and (Path(job.output_dir) / "config.json").is_file():
                records.append({**earlier, "reused": True})  # a rerun continues after the last finished phase
                print_skip(f"{job.name}: job {earlier['job_id']} already produced {job.output_dir}")
                continue
            run_job(job)
    if not (out / "config.json").is_file():
        print_warning(
            f"{out}: no config.json after the jobs; is {out.parent} on a filesystem the cluster shares?"
        )
    manifest("completed")
    return {"jobs": len(records), "job_ids": [record["job_id"] for record in records], "output_dir": str(out)}
