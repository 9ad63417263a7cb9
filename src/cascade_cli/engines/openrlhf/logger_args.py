"""`report_to` on the OpenRLHF engine: the stage's trackers as OpenRLHF 0.11.2's logger flags.

OpenRLHF logs to wandb when `--logger.wandb.key` is set, and calls `wandb.login(key)` only when wandb finds
no key of its own (WANDB_API_KEY in the job's environment). So the flag carries a placeholder, never the
key: the job's environment (cluster.runtime_env_json's env_vars) brings WANDB_API_KEY for an online run or
WANDB_MODE=offline for files on the cluster. TensorBoard is `--logger.tensorboard_dir` (OpenRLHF writes it
only when wandb is off). OpenRLHF has no MLflow logger: that choice is a note on the job.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

WANDB_KEY_PLACEHOLDER = "from-WANDB_API_KEY"  # never a key: OpenRLHF's login is skipped when one is set
WANDB_ENV_NOTE = (
    "report_to wandb: the job's environment needs WANDB_API_KEY (online) or WANDB_MODE=offline; set it in "
    'cluster.runtime_env_json, e.g. {"env_vars": {"WANDB_MODE": "offline"}}'
)
MLFLOW_NOTE = (
    "report_to mlflow: OpenRLHF 0.11.2 has no MLflow logger; use tensorboard or wandb on this engine"
)


def logger_args(config: Any, out: Path, run_name: str) -> tuple[list[str], list[str]]:
    """(OpenRLHF flags, notes) for the stage's `report_to`."""
    report_to = list(config.report_to)
    args: list[str] = []
    notes: list[str] = []
    if "wandb" in report_to:
        args += [
            "--logger.wandb.key", WANDB_KEY_PLACEHOLDER,
            "--logger.wandb.project", "cascade",
            "--logger.wandb.run_name", run_name,
        ]  # fmt: skip
        if not _job_env_has_wandb(config.cluster.runtime_env_json):
            notes.append(WANDB_ENV_NOTE)
    if "tensorboard" in report_to:
        args += ["--logger.tensorboard_dir", str(out / "tensorboard")]
    if "mlflow" in report_to:
        notes.append(MLFLOW_NOTE)
    return args, notes


def _job_env_has_wandb(runtime_env_json: str) -> bool:
    env = json.loads(runtime_env_json).get("env_vars", {}) if runtime_env_json else {}
    return bool(env.get("WANDB_API_KEY") or env.get("WANDB_MODE"))
