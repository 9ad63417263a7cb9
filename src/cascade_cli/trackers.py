"""The experiment trackers a stage or an evaluation reports to: `report_to: [tensorboard, wandb, mlflow]`.

Every tracker gets the same three things a run has: its name, config and tags when it opens; numeric
metrics per step (`log`); tables of rows per step (`table`: an RL step's sampled rollouts, an evaluation's
samples). Where each one writes, so that a run on a machine without network keeps everything under OUT:

    tensorboard  OUT/tensorboard (torch's SummaryWriter; a table becomes a markdown text entry)
    wandb        OUT/wandb; offline unless WANDB_MODE says otherwise or WANDB_API_KEY is set (then online).
                 `wandb sync OUT/wandb/offline-run-*` uploads an offline run later. Project: $WANDB_PROJECT,
                 else "cascade".
    mlflow       $MLFLOW_TRACKING_URI, else a file store in OUT/mlruns (`mlflow ui --backend-store-uri
                 OUT/mlruns`). Experiment: $MLFLOW_EXPERIMENT_NAME, else "cascade".

A library that is not installed is one line naming the pip command, before any work (`check_installed`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
from pathlib import Path
from typing import Any

from cascade_cli.console import console
from cascade_cli.errors import CascadeUsageError

TRACKERS = ("tensorboard", "wandb", "mlflow")
DEFAULT_REPORT_TO = ["tensorboard"]
MODULES = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow"}
INSTALL = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow-skinny"}
MLFLOW_PARAM_CHARS = 6000  # MLflow refuses a longer parameter value


def check_installed(report_to: list[str] | tuple[str, ...]) -> None:
    """Every tracker asked for is importable; else one line with the pip command (exit 2)."""
    missing = [name for name in report_to if importlib.util.find_spec(MODULES[name]) is None]
    if missing:
        packages = " ".join(INSTALL[name] for name in missing)
        raise CascadeUsageError(
            f"report_to: {', '.join(missing)} not installed; `pip install {packages}` "
            "(or `pip install 'cascade-cli[trackers]'`), or leave it out of report_to"
        )


def flat_config(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"lora": {"r": 8}} -> {"lora.r": 8}: what a tracker's parameter table shows."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flat_config(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def numeric(values: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in values.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


class TensorBoardTracker:
    def __init__(self, out: Path, name: str, config: dict[str, Any], tags: list[str]) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(str(out / "tensorboard"))
        self.writer.add_text("run", f"**{name}** tags: {', '.join(tags)}", 0)
        self.writer.add_text("config", "```\n" + json.dumps(config, indent=2, default=str) + "\n```", 0)

    def log(self, step: int, values: dict[str, Any]) -> None:
        for key, value in numeric(values).items():
            self.writer.add_scalar(key, value, step)

    def table(self, step: int, name: str, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        columns = list(rows[0])
        lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        for row in rows:
            cells = (str(row.get(column, "")).replace("|", "\\|").replace("\n", "<br>") for column in columns)
            lines.append("| " + " | ".join(cells) + " |")
        self.writer.add_text(name, "\n".join(lines), step)

    def close(self) -> None:
        self.writer.close()


class WandbTracker:
    def __init__(self, out: Path, name: str, config: dict[str, Any], tags: list[str]) -> None:
        import wandb

        self.wandb = wandb
        mode = os.environ.get("WANDB_MODE") or ("online" if os.environ.get("WANDB_API_KEY") else "offline")
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", "cascade"), name=name, config=config, tags=tags,
            dir=str(out), mode=mode, reinit="create_new", settings=wandb.Settings(silent=True, console="off"),
        )  # fmt: skip
        if mode == "offline":
            console.print(
                f"wandb: offline run in {out / 'wandb'} (upload it with `wandb sync {out / 'wandb'}/offline-run-*`)",
                soft_wrap=True,
            )

    def log(self, step: int, values: dict[str, Any]) -> None:
        self.run.log(numeric(values), step=step)

    def table(self, step: int, name: str, rows: list[dict[str, Any]]) -> None:
        if rows:
            columns = list(rows[0])
            data = [[row.get(column) for column in columns] for row in rows]
            self.run.log({name: self.wandb.Table(columns=columns, data=data)}, step=step)

    def close(self) -> None:
        self.run.finish()


class MlflowTracker:
    def __init__(self, out: Path, name: str, config: dict[str, Any], tags: list[str]) -> None:
        uri = os.environ.get("MLFLOW_TRACKING_URI") or f"file:{(out / 'mlruns').resolve()}"
        if uri.startswith("file:"):
            # MLflow 3 keeps the file store only on request; a local store needs no server or database.
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(uri)
        experiment_name = os.environ.get("MLFLOW_EXPERIMENT_NAME", "cascade")
        experiment = self.client.get_experiment_by_name(experiment_name)
        experiment_id = (
            experiment.experiment_id if experiment else self.client.create_experiment(experiment_name)
        )
        run_tags = {"cascade.tags": ",".join(tags), **{f"cascade.{tag}": "true" for tag in tags}}
        self.run_id = self.client.create_run(experiment_id, run_name=name, tags=run_tags).info.run_id
        params = [
            Param(k, json.dumps(v, default=str)[:MLFLOW_PARAM_CHARS]) for k, v in flat_config(config).items()
        ]
        for start in range(0, len(params), 100):  # MLflow takes at most 100 parameters per batch
            self.client.log_batch(self.run_id, params=params[start : start + 100])

    def log(self, step: int, values: dict[str, Any]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [
            Metric(key.replace("@", "_at_"), value, now, step) for key, value in numeric(values).items()
        ]
        if metrics:
            self.client.log_batch(self.run_id, metrics=metrics)

    def table(self, step: int, name: str, rows: list[dict[str, Any]]) -> None:
        if rows:
            columns = {column: [row.get(column) for row in rows] for column in rows[0]}
            self.client.log_table(self.run_id, columns, artifact_file=f"{name}/step_{step:06d}.json")

    def close(self) -> None:
        self.client.set_terminated(self.run_id)


BACKENDS = {"tensorboard": TensorBoardTracker, "wandb": WandbTracker, "mlflow": MlflowTracker}


class Trackers:
    """The trackers of `report_to`, opened with the run's name, config and tags; each call goes to all."""

    def __init__(self, report_to: list[str] | tuple[str, ...], out: str | Path, *, name: str,
                 config: dict[str, Any], tags: list[str]) -> None:  # fmt: skip
        check_installed(report_to)
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        self.open = [BACKENDS[tracker](out, name, config, tags) for tracker in dict.fromkeys(report_to)]

    def log(self, step: int, values: dict[str, Any]) -> None:
        for tracker in self.open:
            tracker.log(step, values)

    def table(self, step: int, name: str, rows: list[dict[str, Any]]) -> None:
        for tracker in self.open:
            tracker.table(step, name, rows)

    def close(self) -> None:
        for tracker in self.open:
            tracker.close()
        self.open = []


def stage_tags(config: Any) -> list[str]:
    """What a stage's run is tagged with: its kind, engine, domain (RLVR) and whether it trains LoRA."""
    tags = ["cascade", str(config.kind), str(config.engine)]
    if getattr(config, "domain", None):
        tags.append(str(config.domain))
    lora = getattr(config, "lora", None)
    if lora is not None and lora.r:
        tags.append("lora")
    return tags


EVAL_SAMPLE_ROWS = 64  # samples an evaluation's tracker table shows (samples.jsonl has them all)


def report_evaluation(
    report_to: list[str],
    out: str | Path,
    results: dict[str, Any],
    samples: list[dict[str, Any]],
    *,
    model: str,
) -> None:
    """An evaluation as one tracker run `eval-MODEL`: each benchmark's scores (`BENCHMARK/avg@1`, ...) at
    step 0 and a table of the first samples (benchmark, prompt, response, reward, verdict)."""
    if not report_to:
        return
    names = list(results["benchmarks"])
    trackers = Trackers(
        report_to, out, name=f"eval-{model}", config=results["settings"], tags=["cascade", "eval", *names]
    )
    scores: dict[str, Any] = {}
    for name, summary in results["benchmarks"].items():
        scores[f"{name}/score"] = summary.get("score")
        scores.update({f"{name}/{key}": value for key, value in (summary.get("metrics") or {}).items()})
    trackers.log(0, scores)
    columns = ("benchmark", "id", "prompt", "response", "reward", "passed")
    rows = [{column: sample.get(column) for column in columns} for sample in samples[:EVAL_SAMPLE_ROWS]]
    trackers.table(0, "samples", [{**row, "prompt": str(row["prompt"])} for row in rows])
    trackers.close()
