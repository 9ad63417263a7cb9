"""OpenRLHF Python-file reward mode: `--reward.remote_url /path/to/this/file.py`.

OpenRLHF 0.11.2 loads this file with `spec_from_file_location` and calls
`reward_func(queries, prompts, labels)` from `asyncio.to_thread`, one sample per call, in many threads at
once. Signal-based timeouts (math-verify's, `signal.alarm`) do not work there, so verification runs in a
small pool of worker processes with a per-call timeout that kills a stuck worker (protocol.py).

Configuration (environment, or `configure()` in an exported shim, see `cascade verify --export-reward-func`):
CASCADE_REWARD_WORKERS (default min(4, CPUs)), CASCADE_REWARD_TIMEOUT_S (default 60),
CASCADE_REWARD_DOMAIN (domain for labels without one), CASCADE_REWARD_OPTIONS (JSON {domain: {key: value}}).
"""

from __future__ import annotations

import atexit
import json
import os
import threading
from pathlib import Path
from typing import Any

from cascade_cli.serve.protocol import (
    ProtocolError,
    VerifierPool,
    build_records,
    default_workers,
    make_reply,
)
from cascade_cli.verifiers.batch import Options, RowResult, row_error

_lock = threading.Lock()
_pool: VerifierPool | None = None
_settings: dict[str, Any] = {}


def configure(
    domain: str | None = None,
    options: Options | None = None,
    workers: int | None = None,
    timeout_s: float | None = None,
) -> None:
    """Set the domain, verifier options, pool size and timeout (before the first call, or to restart)."""
    global _pool
    with _lock:
        _settings.update(domain=domain, options=options or {}, workers=workers, timeout_s=timeout_s)
        if _pool is not None:
            _pool.close()
            _pool = None


def _setting(name: str, env: str, default: Any, cast: Any) -> Any:
    value = _settings.get(name)
    if value is not None:
        return value
    raw = os.environ.get(env)
    return cast(raw) if raw else default


def _get_pool() -> VerifierPool:
    global _pool
    with _lock:
        if _pool is None:
            from cascade_cli import verifiers

            _pool = VerifierPool(
                workers=_setting("workers", "CASCADE_REWARD_WORKERS", default_workers(), int),
                timeout_s=_setting("timeout_s", "CASCADE_REWARD_TIMEOUT_S", 60.0, float),
                options=_setting("options", "CASCADE_REWARD_OPTIONS", {}, json.loads),
                registrations=dict(verifiers._REGISTRY),
            )
            atexit.register(_pool.close)
        return _pool


def _as_tensors(reply: dict[str, Any]) -> dict[str, Any]:
    """Lists -> 1-D float tensors, as OpenRLHF's own reward_func examples return (torch is there when
    OpenRLHF is; a one-sample tensor becomes a (1,) reward in `_process_response_into_experience`)."""
    try:
        import torch
    except ImportError:  # pragma: no cover - OpenRLHF always has torch
        return reply

    def tensor(value: Any) -> Any:
        return torch.tensor(value, dtype=torch.float)

    return {
        "rewards": tensor(reply["rewards"]),
        "scores": tensor(reply["scores"]),
        "extra_logs": {key: tensor(value) for key, value in reply["extra_logs"].items()},
    }


def reward_func(queries: list[str], prompts: list[str], labels: list[Any], **kwargs: Any) -> dict[str, Any]:
    """Rewards for `queries` (prompt + response, special tokens included) with our verifiers.

    Returns {"rewards": tensor (n,), "scores": tensor (n,), "extra_logs": {name: tensor (n,)}}. A sample
    that breaks the protocol (label without a known domain, ...) gets reward 0 and verify_error 1 instead of
    an exception, which OpenRLHF would swallow into a missing reward.
    """
    default_domain = _setting("domain", "CASCADE_REWARD_DOMAIN", None, str)
    results: list[RowResult | None] = [None] * len(queries)
    records: list[dict[str, Any]] = []
    positions: list[int] = []
    for index in range(len(queries)):
        try:
            (record,) = build_records(
                {
                    "query": [queries[index]],
                    "prompts": [prompts[index] if index < len(prompts) else None],
                    "labels": [labels[index] if index < len(labels) else None],
                },
                default_domain,
            )
        except ProtocolError as error:
            message = str(error).replace("labels[0]", f"labels[{index}]")
            results[index] = row_error(message)
            continue
        records.append(record)
        positions.append(index)
    if records:
        for position, result in zip(positions, _get_pool().score(records), strict=True):
            results[position] = result
    final = [result for result in results if result is not None]
    return _as_tensors(make_reply(final, scalar_when_single=False))


def module_path() -> Path:
    """This file: pass it to OpenRLHF as `--reward.remote_url` (cascade must be importable there)."""
    return Path(__file__).resolve()


SHIM = '''"""OpenRLHF reward_func file written by `cascade verify --export-reward-func`.

Use: --reward.remote_url {path}   (the cascade package must be installed where OpenRLHF runs)
"""

from cascade_cli.serve.reward_func import configure, reward_func  # noqa: F401

configure(domain={domain!r}, options={options!r}, workers={workers!r}, timeout_s={timeout_s!r})
'''


def export(
    path: str | Path,
    domain: str | None = None,
    options: Options | None = None,
    workers: int | None = None,
    timeout_s: float | None = None,
) -> Path:
    """Write a reward_func shim that imports this module with the given settings baked in."""
    path = Path(path)
    if path.suffix != ".py":
        from cascade_cli.errors import CascadeUsageError

        raise CascadeUsageError(
            f"--export-reward-func {path}: OpenRLHF loads a Python file; the name must end in .py"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        SHIM.format(
            path=path.resolve(), domain=domain, options=options or {}, workers=workers, timeout_s=timeout_s
        )
    )
    return path.resolve()
