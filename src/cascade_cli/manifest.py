"""The checkpoint directory contract.

Every training command writes: HF `save_pretrained` weights + tokenizer, `cascade_stage.json` (stage name,
kind, resolved config, input checkpoint, data fingerprints, metrics, status, timings), `trainer_state/` for
resume, and `metrics.jsonl`.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from cascade_cli import __version__
from cascade_cli.errors import CascadeUsageError
from cascade_cli.files import naming, write_text

MANIFEST_NAME = "cascade_stage.json"
METRICS_NAME = "metrics.jsonl"
TRAINER_STATE_DIR = "trainer_state"


def fingerprint_path(path: str | Path) -> str:
    """sha256 over a file's bytes, or over every file (relative name + bytes) under a directory."""
    path = Path(path)
    digest = hashlib.sha256()
    if path.is_file():
        files = [path]
        root = path.parent
    elif path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and TRAINER_STATE_DIR not in p.parts)
        root = path
    else:
        raise CascadeUsageError(f"{path}: not found (cannot fingerprint a missing input)")
    for file in files:
        digest.update(str(file.relative_to(root)).encode())
        with file.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return "sha256:" + digest.hexdigest()


def config_fingerprint(config: dict[str, Any]) -> str:
    blob = json.dumps(config, sort_keys=True, default=str).encode()
    return "sha256:" + hashlib.sha256(blob).hexdigest()


def write_manifest(
    out_dir: str | Path,
    *,
    stage: str,
    kind: str,
    config: dict[str, Any],
    init: str | None,
    data_fingerprints: dict[str, str] | None = None,
    metrics: dict[str, Any] | None = None,
    status: str = "completed",
    timings: dict[str, float] | None = None,
    extra: dict[str, Any] | None = None,
) -> Path:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = {
        "cascade_version": __version__,
        "stage": stage,
        "kind": kind,
        "status": status,
        "init": init,
        "config": config,
        "config_fingerprint": config_fingerprint(config),
        "data_fingerprints": data_fingerprints or {},
        "metrics": metrics or {},
        "timings": timings or {},
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        **(extra or {}),
    }
    target = out_dir / MANIFEST_NAME
    tmp = target.with_suffix(".json.tmp")
    write_text(tmp, json.dumps(manifest, indent=2, default=str) + "\n")
    os.replace(tmp, target)
    return target


def read_manifest(ckpt_dir: str | Path) -> dict[str, Any] | None:
    path = Path(ckpt_dir) / MANIFEST_NAME
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise CascadeUsageError(f"{path}: malformed manifest ({error.msg})") from None


def is_model_dir(path: str | Path) -> bool:
    return (Path(path) / "config.json").is_file()


def require_model_dir(path: str | Path, what: str = "checkpoint") -> Path:
    path = Path(path)
    if not path.exists():
        from cascade_cli.models.specs import close_spec, unknown_spec

        if close_spec(str(path)):  # a typo of a spec (`smollm2-135`), not a missing folder
            raise unknown_spec(str(path), what)
        raise CascadeUsageError(f"{what} {path}: not found")
    if not is_model_dir(path) and (path / "adapter_config.json").is_file():
        raise CascadeUsageError(
            f"{what} {path}: a LoRA adapter alone (lora.save=adapter), not a model; load it with "
            "peft.PeftModel.from_pretrained onto its base, or train with lora.save=both (merged model + adapter/)"
        )
    if not is_model_dir(path):
        raise CascadeUsageError(
            f"{what} {path}: not a model directory (expected config.json from save_pretrained)"
        )
    return path


class MetricsLog:
    """Appends one JSON object per step to `metrics.jsonl`, and a table's rows to `NAME.jsonl` (an RL step's
    sampled rollouts: `rollouts.jsonl`), each also to the stage's trackers (trackers.py). A resumed run keeps
    the lines up to the step it resumes from; a fresh one starts the files anew."""

    def __init__(self, out_dir: str | Path, trackers: Any = None, truncate_after_step: int | None = None):
        self.out_dir = Path(out_dir)
        self.path = self.out_dir / METRICS_NAME
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.truncate_after_step = truncate_after_step
        self._started: set[Path] = set()
        self._start(self.path)
        self.trackers = trackers

    def _start(self, path: Path) -> None:
        """A file's first write this run: on resume drop the lines after the step resumed from, else drop it."""
        self._started.add(path)
        if not path.exists():
            return
        if self.truncate_after_step is None:
            path.unlink()
            return
        kept = [
            line
            for line in path.read_text().splitlines()
            if line.strip() and json.loads(line).get("step", 0) <= self.truncate_after_step
        ]
        path.write_text("".join(line + "\n" for line in kept))

    def _append(self, path: Path, records: list[dict[str, Any]]) -> None:
        if path not in self._started:
            self._start(path)
        with naming(path), path.open("a") as handle:
            handle.writelines(json.dumps(record, default=float) + "\n" for record in records)

    def log(self, step: int, values: dict[str, Any]) -> None:
        self._append(self.path, [{"step": step, **values}])
        if self.trackers is not None:
            self.trackers.log(step, values)

    def table(self, step: int, name: str, rows: list[dict[str, Any]]) -> None:
        """Rows of a table at this step: OUT/NAME.jsonl (each row with its step) and each tracker's table."""
        self._append(self.out_dir / f"{name}.jsonl", [{"step": step, **row} for row in rows])
        if self.trackers is not None:
            self.trackers.table(step, name, rows)

    def close(self) -> None:
        if self.trackers is not None:
            self.trackers.close()
            self.trackers = None


def read_metrics(ckpt_dir: str | Path) -> list[dict[str, Any]]:
    path = Path(ckpt_dir) / METRICS_NAME
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
