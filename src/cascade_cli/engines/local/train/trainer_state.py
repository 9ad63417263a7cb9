"""The trainer state of the local trainers (SFT, reward model, GRPO/RLHF, distill) and where they start.

The lifecycle (stage.py) calls, top to bottom:
    begin = start(out, config, kind=..., restart=...)    # manifest.check, then the trainer state: where to start
    load_state(begin, model, optimizer, scheduler)       # when begin.state_dir is set
    ... every save_every steps: save_state(out, step=..., config=..., model=..., optimizer=..., extra=...)
    save_final(out, model, tokenizer); then the manifest, status completed   # the manifest LAST
    drop_state(out)                                      # unless keep_trainer_state: nothing resumes it now

`trainer_state/` holds model.pt, optimizer.pt, scheduler.pt (if any), rng.pt (python, numpy, torch, cuda),
progress.json {step, config_fingerprint, config, fingerprints, extra} and extra.pt (the extra values JSON
cannot hold, e.g. a generator's RNG tensor). It is written as trainer_state.tmp/ and then renamed, so a kill
at any moment leaves the previous state loadable.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from cascade_cli.console import console
from cascade_cli.engines.local.ops.rng import rng_state, set_rng_state
from cascade_cli.files import share, writing
from cascade_cli.manifest import (
    MANIFEST_NAME,
    METRICS_NAME,
    TRAINER_STATE_DIR,
    changed,
    check,
    config_fingerprint,
)

__all__ = ["Start", "drop_state", "load_state", "rng_state", "save_final", "save_state", "set_rng_state", "start"]

STAGING_SUFFIX, PREVIOUS_SUFFIX = ".tmp", ".old"
FINAL_STAGING = ".final.tmp"
# Tests: "STEP[:PHASE]" SIGKILLs this process while saving STEP's state: "write" (default, staging half
# written), "swap" (between the two renames) or "done" (just after the state landed).
KILL_HOOK = "CASCADE_KILL_DURING_SAVE"


@dataclass
class Start:
    """What a trainer starts from: step 0 and no state for a fresh run."""

    step: int = 0
    state_dir: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def resumed(self) -> bool:
        return self.state_dir is not None


# ---- the resume rule -----------------------------------------------------------------------------------


def _state_path(out: Path, suffix: str = "") -> Path:
    return out / (TRAINER_STATE_DIR + suffix)


def find_state(out: str | Path) -> Path | None:
    """The last complete trainer_state/ (or the one a kill left as .old between the two renames)."""
    for suffix in ("", PREVIOUS_SUFFIX):
        candidate = _state_path(Path(out), suffix)
        if (candidate / "progress.json").is_file():
            return candidate
    return None


def read_progress(state_dir: Path) -> dict[str, Any]:
    return json.loads((state_dir / "progress.json").read_text())


def clear(out: str | Path) -> None:
    """Remove what a previous run left for resuming: trainer_state*/, the manifest and metrics.jsonl."""
    out = Path(out)
    drop_state(out)
    shutil.rmtree(out / FINAL_STAGING, ignore_errors=True)
    for name in (MANIFEST_NAME, METRICS_NAME):
        (out / name).unlink(missing_ok=True)


def drop_state(out: str | Path) -> None:
    """Remove trainer_state*/ once a stage has completed: nothing resumes a completed stage."""
    for suffix in ("", STAGING_SUFFIX, PREVIOUS_SUFFIX):
        shutil.rmtree(_state_path(Path(out), suffix), ignore_errors=True)


def start(
    out: str | Path,
    config: dict[str, Any],
    *,
    kind: str,
    restart: bool,
    resume: bool = True,
    fingerprints: dict[str, str] | None = None,
    defaults: dict[str, Any] | None = None,
) -> Start:
    """Where a local trainer starts: the manifest's rule (manifest.check: StageComplete, or CascadeUsageError
    naming what changed), then OUT/trainer_state*/: unfinished with the same config and inputs -> resume from
    it. `restart` or `resume=False` -> remove what was left and start fresh."""
    out = Path(out)
    fingerprints = fingerprints or {}
    if restart or not resume:
        clear(out)
        return Start()
    check(out, config, kind=kind, fingerprints=fingerprints, defaults=defaults)
    state = find_state(out)
    if state is None:
        return Start()
    progress = read_progress(state)
    error = changed(
        out, progress.get("config") or {}, progress.get("fingerprints") or {}, config, fingerprints, defaults
    )
    if error is not None:
        raise error
    extra = dict(progress.get("extra") or {})
    if (state / "extra.pt").is_file():
        extra.update(torch.load(state / "extra.pt", map_location="cpu", weights_only=False))
    console.print(f"resuming {out} from step {progress['step']}", soft_wrap=True)
    return Start(step=int(progress["step"]), state_dir=state, extra=extra)


# ---- trainer_state/ ------------------------------------------------------------------------------------


def _kill_hook(step: int, phase: str) -> None:
    wanted = os.environ.get(KILL_HOOK, "")
    if wanted and wanted.split(":")[0] == str(step) and (wanted.split(":") + ["write"])[1] == phase:
        os.kill(os.getpid(), signal.SIGKILL)


def _json_safe(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def save_state(
    out: str | Path,
    *,
    step: int,
    config: dict[str, Any],
    model,
    optimizer,
    scheduler=None,
    extra: dict[str, Any] | None = None,
    fingerprints: dict[str, str] | None = None,
) -> Path:
    """Write OUT/trainer_state/ atomically (staging folder, then rename)."""
    out = Path(out)
    final, staging, previous = (_state_path(out, s) for s in ("", STAGING_SUFFIX, PREVIOUS_SUFFIX))
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    extra = extra or {}
    as_json = {k: v for k, v in extra.items() if _json_safe(v)}
    progress = {
        "step": step,
        "config_fingerprint": config_fingerprint(config),
        "config": config,
        "fingerprints": fingerprints or {},
        "extra": as_json,
    }
    with writing(staging, "trainer state"):
        torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, staging / "model.pt")
        _kill_hook(step, "write")
        torch.save(optimizer.state_dict(), staging / "optimizer.pt")
        if scheduler is not None:
            torch.save(scheduler.state_dict(), staging / "scheduler.pt")
        torch.save(rng_state(), staging / "rng.pt")
        if len(as_json) < len(extra):
            torch.save({k: v for k, v in extra.items() if k not in as_json}, staging / "extra.pt")
        (staging / "progress.json").write_text(json.dumps(progress, indent=2, default=str) + "\n")
    share(staging)
    if final.exists():  # else a kill mid-swap left `previous` as the only loadable state: keep it for now
        shutil.rmtree(previous, ignore_errors=True)
        os.replace(final, previous)
    _kill_hook(step, "swap")
    os.replace(staging, final)
    shutil.rmtree(previous, ignore_errors=True)
    _kill_hook(step, "done")
    return final


def load_state(start: Start, model, optimizer, scheduler=None) -> None:
    """Restore the model, optimizer, scheduler and global RNGs saved in `start.state_dir`."""
    path = start.state_dir
    if path is None:
        raise ValueError("load_state: a fresh Start has no trainer_state to load")
    model.load_state_dict(torch.load(path / "model.pt", map_location="cpu", weights_only=True))
    optimizer.load_state_dict(torch.load(path / "optimizer.pt", map_location="cpu", weights_only=True))
    if scheduler is not None and (path / "scheduler.pt").is_file():
        scheduler.load_state_dict(torch.load(path / "scheduler.pt", weights_only=False))
    set_rng_state(torch.load(path / "rng.pt", weights_only=False))


# ---- the final checkpoint ------------------------------------------------------------------------------


ADAPTER_DIR = "adapter"  # lora.save both: PEFT's adapter files beside the merged model


def save_final(
    out: str | Path, model, tokenizer=None, *, lora_save: str = "merged", base: str = "", **save_kwargs: Any
) -> None:
    """`save_pretrained` (+ tokenizer) into OUT/.final.tmp/, then rename each file into OUT. The caller
    writes the manifest last (status completed): until then a rerun resumes from trainer_state/. A LoRA
    model is saved as `lora_save` says: merged (a plain HF checkpoint that vLLM and OpenRLHF read), adapter
    (PEFT's adapter files on `base` alone) or both (the merged model, the adapter files in OUT/adapter)."""
    from cascade_cli.engines.local.ops import lora
    from cascade_cli.models.loader import quiet_transformers

    quiet_transformers()
    out = Path(out)
    staging = out / FINAL_STAGING
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    lora_save = lora_save if lora.has_lora(model) else "merged"
    if lora_save != "merged":
        shutil.rmtree(out / ADAPTER_DIR, ignore_errors=True)
    with writing(staging, "checkpoint"):
        if lora_save in ("merged", "both"):
            if lora.has_lora(model):
                save_kwargs["state_dict"] = lora.merged_state_dict(model)
            model.save_pretrained(str(staging), **save_kwargs)
        if lora_save != "merged":
            lora.save_adapter(model, staging / ADAPTER_DIR if lora_save == "both" else staging, base)
        if tokenizer is not None:
            tokenizer.save_pretrained(str(staging))
    share(staging)  # safetensors writes its files 0600
    for file in sorted(staging.iterdir()):
        os.replace(file, out / file.name)
    staging.rmdir()
