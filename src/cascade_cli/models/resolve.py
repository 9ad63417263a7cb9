"""Where a model spec loads from: `tiny` / `tiny:SEED` (built once, tiny.py), `smollm2-135m` and
`gguf:FILE.gguf` (converted once, real.py), a local checkpoint folder, or a hub id (specs.py: offline first).

Every command resolves its model here: a local stage once, in its lifecycle (engines/local/train/stage.py), and
passes the folder on; the evaluation, TTS, the pass-rate sampler and the OpenRLHF runner each once at their start.
"""

from __future__ import annotations

import os
from pathlib import Path

from cascade_cli.errors import CascadeUsageError
from cascade_cli.models.specs import is_tiny_spec
from cascade_cli.models.tiny import MARKER_NAME, build_tiny, tiny_seed


def resolve(spec: str | Path, key: str = "model") -> Path:
    """Where `spec` loads from (resolve_model: embedded specs built once, a folder checked, a hub
    id offline first); a bad spec is a usage error that names `key`."""
    try:
        return resolve_model(str(spec))
    except CascadeUsageError as error:
        raise CascadeUsageError(f"{key}: {error}") from None


def default_cache_dir() -> Path:
    root = os.environ.get("CASCADE_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "cascade"
    )
    return Path(root) / "models"


def _looks_like_path(init: str) -> bool:
    return init.startswith(("/", ".", "~")) or init.endswith("/") or init.count("/") > 1


def embedded_target(spec: str, cache_dir: str | Path | None = None) -> Path:
    """Where the cache holds (or will hold) an embedded spec's model, without building it."""
    from cascade_cli.models import real

    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    if real.is_real_spec(spec):
        return real.cache_target(spec.strip(), root)
    return root / f"tiny-{tiny_seed(spec)}"


def resolve_model(init: str, cache_dir: str | Path | None = None) -> Path:
    """Where to load `init` from.

    `tiny`/`tiny:SEED` are built once into `cache_dir/tiny-SEED`; `smollm2-135m` and `gguf:PATH` are
    converted once into a plain HF checkpoint (`cascade_cli.models.real`); both atomically, so parallel
    callers are safe, and that directory is returned. An existing local directory is returned as is. A hub
    id (`org/name`) comes back as its cached snapshot folder, else unchanged as `Path(init)` (`str()` of it
    is the id again) once the hub answers (specs.py: offline first, never a long wait). Anything
    else fails at once, with a did-you-mean among the known specs.
    """
    from cascade_cli.models import real, specs
    from cascade_cli.models.cache import build_once

    init = str(init).strip()
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    if real.is_real_spec(init):
        return real.resolve(init, root)
    if is_tiny_spec(init):
        target = root / f"tiny-{tiny_seed(init)}"
        return build_once(target, MARKER_NAME, lambda staging: build_tiny(init, staging))
    local = Path(init).expanduser()
    if local.exists():
        if not (local / "config.json").is_file():
            if (local / "adapter_config.json").is_file():  # a LoRA adapter alone: say so, and what to do
                from cascade_cli.manifest import require_model_dir

                require_model_dir(local, "model")
            raise CascadeUsageError(f"model {init}: not a model directory (expected config.json)")
        return local
    if _looks_like_path(init) or not init:
        raise CascadeUsageError(
            f"model {init}: not found (expected `tiny`, `tiny:SEED`, `smollm2-135m`, `gguf:FILE.gguf`, "
            "a local checkpoint directory or a hub id like org/name)"
        )
    if not specs.looks_like_hub_id(init):
        raise specs.unknown_spec(init)
    return specs.hub_model(init)
