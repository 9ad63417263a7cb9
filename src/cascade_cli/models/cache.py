"""Build a model directory once into the cascade cache: a file lock so parallel callers wait instead of
converting twice, a staging directory renamed into place so a reader never sees half a model."""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from cascade_cli.files import share


def build_once(target: Path, marker: str, build: Callable[[Path], None]) -> Path:
    """Return `target`, first running `build(staging)` and renaming staging to `target` unless
    `target/marker` already exists (the marker is written last, so its presence means complete)."""
    if (target / marker).is_file():
        return target
    root = target.parent
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if this process dies
        if (target / marker).is_file():  # another caller finished while we waited
            return target
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=root))
        try:
            build(staging)
            share(staging)  # mkdtemp made it 0700: other users of a shared cache could not read it
            if target.exists():  # an incomplete leftover (no marker) from a build that was killed
                shutil.rmtree(target, ignore_errors=True)
            try:
                os.replace(staging, target)
            except OSError:
                if not (target / marker).is_file():  # someone without the lock won with a complete build
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target
