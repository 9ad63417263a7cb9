"""The stage manifest and its resume rule: what every stage writes into its OUT, and when OUT already holds it.

Every stage writes `cascade_stage.json` (stage name, kind, resolved config and its fingerprint, the init as the
config names it, input fingerprints, metrics, status, timings) through `StageManifest`: the local trainers
(engines/local/train/stage.py), the OpenRLHF runner, prepare-data and the pass-rate filter. A training stage
also writes HF `save_pretrained` weights + tokenizer, `metrics.jsonl` (MetricsLog) and, while it runs,
`trainer_state/` (engines/local/train/trainer_state.py). docs/architecture.md has the whole contract.

    record = StageManifest(out, config, init=config.init, inputs=input_fingerprints(...))
    done = record.completed(defaults=class_defaults(config))   # the rule: completed -> its metrics; changed -> exit 2
    record.write("running"); ...; record.write("completed", metrics, timings={...})

The rule (`check`): OUT's manifest of another kind, or of this kind with another config or inputs (a changed
data file, a model input trained again since), refuses with the keys that differ unless `restart`; the same
config and inputs with status completed is a stage already done.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from cascade_cli import __version__
from cascade_cli.config.diff import config_diff, describe_diff
from cascade_cli.config.structure import to_plain
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


# Config keys that name model checkpoints (fingerprinted by their own manifest); teachers: a dict by domain.
MODEL_INPUTS = ("init", "reward_model", "teachers")


def input_fingerprints(
    init: str | None = None, *, models: dict[str, str | None] | None = None, **paths: str | Path | None
) -> dict[str, str]:
    """sha256 of each existing data path, plus each model input's manifest when it is a stage output (`init`,
    and `models` by key, e.g. the reward model): cheap even for a large model, and it changes whenever that
    stage trains again, so a resume never mixes state trained from one model with another."""
    prints = {name: fingerprint_path(path) for name, path in paths.items() if path and Path(path).exists()}
    for name, model in {"init": init, **(models or {})}.items():
        if model and (Path(model) / MANIFEST_NAME).is_file():
            prints[name] = fingerprint_path(Path(model) / MANIFEST_NAME)
    return prints


def model_inputs(config: Any) -> dict[str, str | None]:
    """The config's model inputs by key (MODEL_INPUTS; several by name, as distill's teachers: KEY.NAME)."""
    models: dict[str, str | None] = {}
    for key in MODEL_INPUTS:
        value = getattr(config, key, None)
        if hasattr(value, "items"):
            models.update({f"{key}.{name}": str(spec) for name, spec in value.items()})
        else:
            models[key] = value
    return models


class StageComplete(Exception):
    """OUT already holds this stage, completed with the same config: nothing to train."""

    def __init__(self, message: str, manifest: dict[str, Any]):
        super().__init__(message)
        self.message = message
        self.manifest = manifest
        self.metrics: dict[str, Any] = manifest.get("metrics") or {}


def _input_changed(name: str) -> str:
    if name.split(".")[0] in MODEL_INPUTS:  # teachers.math: distill's teacher of math
        return f"{name} (that checkpoint was trained again since)"
    return f"{name} (its contents changed)"


def changed(
    out: Path,
    saved_config: dict[str, Any],
    saved_prints: dict[str, Any],
    config: dict[str, Any],
    fingerprints: dict[str, str],
    defaults: dict[str, Any] | None = None,
) -> CascadeUsageError | None:
    """The error naming what differs between a saved config and inputs and these, or None."""
    keys = config_diff(saved_config, config, defaults=defaults)
    inputs = [name for name, value in fingerprints.items() if saved_prints.get(name, value) != value]
    changes = []
    if keys:
        changes.append(f"a different config: {describe_diff(saved_config, config, keys)}")
    if inputs:
        changes.append(f"other inputs: {', '.join(map(_input_changed, inputs))}")
    if not changes:
        return None
    return CascadeUsageError(
        f"{out} was trained with {' and '.join(changes)}; pass --restart (restart=true) to start over"
    )


def check(
    out: str | Path,
    config: dict[str, Any],
    *,
    kind: str,
    fingerprints: dict[str, str] | None = None,
    defaults: dict[str, Any] | None = None,
) -> None:
    """The rule on OUT's manifest: another kind, config or inputs -> CascadeUsageError naming them; the same,
    completed -> StageComplete; else (none yet, or unfinished with the same config) nothing. `defaults`: the
    config class's defaults, so a key added to cascade since the manifest was written, at its default, is no
    change."""
    out = Path(out)
    manifest = read_manifest(out)
    if manifest is None:
        return
    if manifest.get("kind") not in (None, kind):
        raise CascadeUsageError(
            f"{out} holds a {manifest.get('kind')} stage, not {kind}; pass --restart (restart=true) "
            "to train over it, or choose another --out"
        )
    error = changed(
        out, manifest.get("config") or {}, manifest.get("data_fingerprints") or {}, config, fingerprints or {},
        defaults,
    )
    if error is not None:
        raise error
    if manifest.get("status") == "completed":
        raise StageComplete(
            f"{out}: stage {manifest.get('stage') or kind} is already complete with this config; nothing "
            "to train (pass --restart to train it again)",
            manifest,
        )


class StageManifest:
    """One stage's manifest: its name, kind, config and inputs fixed when the stage opens, written at every
    status change (running, stopped, interrupted, failed, completed) with the metrics and timings so far."""

    def __init__(
        self, out: str | Path, config: Any, *, init: str | None, inputs: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:  # fmt: skip
        self.out, self.kind = Path(out), config.kind
        self.stage = config.name or config.kind
        self.config = to_plain(config)
        self.init, self.inputs, self.extra = init, dict(inputs or {}), dict(extra or {})

    def check(self, defaults: dict[str, Any] | None = None) -> None:
        """The resume rule (`check`) on OUT for this stage's config and inputs."""
        check(self.out, self.config, kind=self.kind, fingerprints=self.inputs, defaults=defaults)

    def previous(self) -> dict[str, Any]:
        """What an earlier run of this stage left in OUT's manifest ({} when none)."""
        return read_manifest(self.out) or {}

    def write(
        self, status: str, metrics: dict[str, Any] | None = None, timings: dict[str, float] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> Path:  # fmt: skip
        return write_manifest(
            self.out, stage=self.stage, kind=self.kind, config=self.config, init=self.init,
            data_fingerprints=self.inputs, metrics=metrics, status=status, timings=timings,
            extra={**self.extra, **(extra or {})} or None,
        )


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
