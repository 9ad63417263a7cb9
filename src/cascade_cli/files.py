"""Files and folders the commands write: checked before any work, and every file-system failure as one line
that names the path and what was wrong.

A path mistake (a folder that cannot be created or written, `--out` naming a file, an unreadable input)
is a usage error, exit 2; a write that fails during a run (a full disk, a file-size limit) is a run
failure, exit 1. Written files are readable by the group and others as the umask allows (`share`).
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cascade_cli.errors import CascadeRunError, CascadeUsageError

# A path the user gave that cannot be used as asked: exit 2. Any other OSError happened during the work: exit 1.
USAGE_ERRNOS = frozenset(
    {errno.EACCES, errno.EPERM, errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.EROFS,
     errno.ENAMETOOLONG, errno.ELOOP}
)
FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
REASONS = {
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENOENT: "not found",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
    errno.EISDIR: "is a folder, expected a file",
    errno.EEXIST: "already exists",
    errno.EROFS: "read-only file system",
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EFBIG: "file too large (a file-size limit of this system)",
}


def reason(error: OSError) -> str:
    """What was wrong, in words (a full disk says what to do)."""
    words = REASONS.get(error.errno or 0) or (error.strerror or str(error)).lower()
    return words + ("; free some space or write elsewhere" if error.errno in FULL_ERRNOS else "")


def describe(error: OSError) -> str:
    """`PATH: what was wrong` for an OSError (both paths of a rename)."""
    reason_words = reason(error)
    paths = [str(path) for path in (error.filename, error.filename2) if path is not None]
    return f"{' -> '.join(paths)}: {reason_words}" if paths else reason_words


def exit_code(error: OSError) -> int:
    return 2 if error.errno in USAGE_ERRNOS else 1


def output_dir(path: str | Path, key: str = "--out") -> Path:
    """`path` as a folder this process can write in, checked before any work: it is a folder, or the nearest
    folder above it that exists takes new files. Nothing is created (a run refused later leaves no trace)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise CascadeUsageError(f"{key} {path}: names an existing file; expected a folder")
    existing = next(folder for folder in [path, *path.parents] if folder.exists())
    if not existing.is_dir():
        raise CascadeUsageError(f"{key} {path}: {existing} is a file, not a folder")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as error:
        raise CascadeUsageError(f"{key} {path}: cannot write in {existing} ({reason(error)})") from None
    return path


def output_file(path: str | Path, key: str = "--output") -> Path:
    """`path` as a file this process can write (its folder created if missing), checked before any work."""
    path = Path(path)
    if path.is_dir():
        raise CascadeUsageError(f"{key} {path}: is a folder; expected a file")
    if not path.exists():
        output_dir(path.parent, key=f"{key} folder")
        return path
    try:
        with open(path, "a"):  # opened for appending: nothing in it changes yet
            pass
    except OSError as error:
        raise CascadeUsageError(f"{key}: {describe(error)}") from None
    return path


@contextmanager
def naming(path: str | Path) -> Iterator[None]:
    """An OSError inside the block names `path` (one from write() or close() carries no file name)."""
    try:
        yield
    except OSError as error:
        if error.filename is None:
            error.filename = str(path)
        raise


def write_text(path: str | Path, text: str) -> None:
    """`Path.write_text` (UTF-8) whose failure names the path."""
    with naming(path):
        Path(path).write_text(text, encoding="utf-8")


@contextmanager
def writing(path: str | Path, what: str) -> Iterator[None]:
    """Turn a failed write inside the block into one line naming `path` (a library's own error, e.g. torch's
    or safetensors', carries neither the path nor the errno)."""
    try:
        with naming(path):
            yield
    except OSError as error:
        raise CascadeRunError(f"could not write the {what}: {describe(error)}") from None
    except Exception as error:
        if not isinstance(error, RuntimeError) and type(error).__name__ != "SafetensorError":
            raise
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise CascadeRunError(
            f"could not write the {what}: {path}: {first} (is the disk full, or a file-size limit reached?)"
        ) from None


def umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def share(path: str | Path) -> None:
    """Give `path` (and everything under a folder) the modes the umask allows: files 0666, folders 0777, less
    the umask. Files written through a temporary file (`tempfile`, safetensors) start at 0600, folders made
    with `mkdtemp` at 0700, so on a shared file system nobody else could read the weights."""
    mask = umask()
    root = Path(path)
    for item in [root, *(root.rglob("*") if root.is_dir() else [])]:
        if item.is_symlink():
            continue
        item.chmod((0o777 if item.is_dir() else 0o666) & ~mask)
