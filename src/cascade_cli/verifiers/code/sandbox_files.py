"""The files a sandbox binds read-only: a copy of the harness, a mirror of the interpreter's runtime (when
the sandbox's uid cannot read the real one) and generated /etc files, kept in a cache directory of ours.

Each is written once, under a name derived from its contents, and published by a rename, so concurrent
verifiers never see a half-written file.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import py_compile
import secrets
import shutil
import stat
import sys
import sysconfig
import tempfile
from pathlib import Path

# The harness and the modules it imports, as they are named in the sandbox's /cascade.
HARNESS_FILES = {
    "harness.py": Path(__file__).with_name("runner.py"),
    "child.py": Path(__file__).with_name("child.py"),
    "judge.py": Path(__file__).with_name("judge.py"),
    "judge_process.py": Path(__file__).with_name("judge_process.py"),
    "isolation.py": Path(__file__).with_name("isolation.py"),
}


class SandboxUnavailable(RuntimeError):
    """bwrap is missing or cannot create namespaces on this machine."""


def world_traversable(path: Path) -> bool:
    for part in [path, *path.parents]:
        if part == Path("/"):
            break
        mode = part.stat().st_mode
        if not mode & stat.S_IXOTH or not mode & stat.S_IROTH:
            return False
    return True


def _cache_root() -> Path:
    """Where the harness copy and runtime mirror live: ours alone (another user could plant a fake runtime)."""
    root = Path(tempfile.gettempdir()) / f"cascade-sandbox-{os.geteuid()}"
    root.mkdir(mode=0o755, exist_ok=True)
    info = os.lstat(root)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        raise SandboxUnavailable(
            f"{root} is not a directory owned by uid {os.geteuid()} and writable only by it"
        )
    return root


def _write_once(path: Path, data: bytes) -> Path:
    if path.exists():
        return path
    partial = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    partial.write_bytes(data)
    os.chmod(partial, 0o644)
    os.replace(partial, path)
    return path


def _publish(staging: Path, target: Path) -> Path:
    """Move a finished directory into place in one step (readers never see it half written)."""
    try:
        os.rename(staging, target)
    except OSError:  # another process finished first
        shutil.rmtree(staging, ignore_errors=True)
    return target


def harness_dir() -> Path:
    """A world-readable copy of the harness files in the cache, named by their contents."""
    sources = {name: path.read_bytes() for name, path in HARNESS_FILES.items()}
    digest = hashlib.sha256((sys.implementation.cache_tag or "").encode())  # the bytecode beside them is ours
    for name, data in sources.items():
        digest.update(name.encode() + data)
    key = digest.hexdigest()[:16]
    target = _cache_root() / f"harness-{key}"
    if target.is_dir():
        return target
    staging = Path(tempfile.mkdtemp(prefix=".harness-", dir=_cache_root()))
    for name, data in sources.items():
        _write_once(staging / name, data)
    _compile_modules(staging)
    os.chmod(staging, 0o755)
    return _publish(staging, target)


def _compile_modules(staging: Path) -> None:
    """Bytecode for the modules the harness imports (`python -B` reads it, never writes it). Compiling them
    in every sandbox instead costs its start time and leaves the compiler's garbage in the harness's memory:
    more pages for every per-test fork to copy the page tables of. Checked against the source's hash, so a
    stale or foreign file is ignored (and an interpreter of another version looks for its own name)."""
    cache = staging / "__pycache__"
    cache.mkdir(mode=0o755)
    for source in staging.glob("*.py"):
        if source.name != "harness.py":  # run as __main__, never imported: Python ignores its bytecode
            py_compile.compile(
                str(source),
                cfile=importlib.util.cache_from_source(str(source)),
                doraise=True,
                invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
            )
    for path in cache.iterdir():
        os.chmod(path, 0o644)
    os.chmod(cache, 0o755)


def etc_file(name: str, text: str) -> Path:
    """A generated /etc file in the cache (world-readable, so the unprivileged sandbox uid can read it too)."""
    data = text.encode()
    return _write_once(_cache_root() / f"etc-{hashlib.sha256(data).hexdigest()[:16]}-{name}", data)


def mirror_runtime(prefix: Path, version: str) -> Path:
    """A world-readable copy (hard links where possible) of the interpreter runtime under `prefix`."""
    key = hashlib.sha256(f"{prefix}:{version}:{prefix.stat().st_mtime_ns}".encode()).hexdigest()[:16]
    target = _cache_root() / f"runtime-{key}"
    if (target / ".complete").exists():
        return target
    staging = Path(tempfile.mkdtemp(prefix=".runtime-", dir=_cache_root()))
    skip = {"site-packages", "test", "tests", "idlelib", "tkinter", "turtledemo", "ensurepip"}

    def copy(src: str, dst: str) -> None:
        if os.path.lexists(dst):
            return  # never write through an existing hard link into the real runtime
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    stdlib = Path(sysconfig.get_path("stdlib"))
    dynload = Path(sysconfig.get_path("platstdlib")) / "lib-dynload"
    for sub in ("bin", "lib"):
        (staging / sub).mkdir(mode=0o755)
    exe = Path(os.path.realpath(sys.executable))
    copy(str(exe), str(staging / "bin" / exe.name))
    for lib in (prefix / "lib").glob("libpython*.so*"):
        copy(str(lib), str(staging / "lib" / lib.name))
    for tree in (stdlib, dynload):
        if (
            not tree.is_dir()
            or not tree.is_relative_to(prefix)
            or (tree != stdlib and tree.is_relative_to(stdlib))
        ):
            continue
        shutil.copytree(
            tree,
            staging / tree.relative_to(prefix),
            ignore=lambda _dir, names: [n for n in names if n in skip and _dir.startswith(str(stdlib))],
            copy_function=copy,
            dirs_exist_ok=True,
        )
    for dirpath, _dirs, _files in os.walk(staging):
        os.chmod(dirpath, 0o755)
    (staging / ".complete").write_text(str(prefix))
    return _publish(staging, target)
