"""The test harness that runs INSIDE the sandbox (stdlib only; never imports cascade_cli).

A harness process serves programs one after another: it reads a job (program, test inputs, limits) as one
JSON line on stdin, then for each test forks a child that runs the untrusted program under rlimits, and reports what the
child did as one line `<nonce> <json>` on stdout. The host compares outputs (the expected outputs never enter
the sandbox, so a program cannot read them from memory) and answers `next` or `stop`.

Why fork per test: a fresh interpreter state per test at the cost of a fork (about a millisecond), real file
descriptors 0/1/2 (`open(0).read()` works), and a child that can be killed with everything it started.
The modules imported below are preimported once, so children get them for free.

Each run (one program on one test) starts fresh although the harness stays warm: sandboxed, it gets network
and IPC namespaces and tmpfs directories of its own (isolation.py), and init (the harness) kills whatever it
started before the next run.
"""

# Preimported for the children (copy-on-write after fork): what solutions import most.
import bisect  # noqa: F401
import builtins
import collections  # noqa: F401
import contextlib
import functools  # noqa: F401
import heapq  # noqa: F401
import io
import itertools  # noqa: F401
import json
import math  # noqa: F401
import os
import re  # noqa: F401
import resource
import select
import signal
import string  # noqa: F401
import sys
import time
import typing  # noqa: F401

# isolation.py lies beside this file in the sandbox; `python -P` keeps this directory off sys.path.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from isolation import LIBC, FreshRuns, drop_capabilities  # noqa: E402

del sys.path[0]

EXIT_MEMORY = 86
EXIT_OUTPUT = 87
EXIT_WRONG = 88  # an assert-format check failed its own assertion
RESULT_OK_MARK = b"\x00cascade-ok\x00"

PR_SET_DUMPABLE = 4


def _site_exit(code: object = None) -> None:
    raise SystemExit(code)


# `python -S` skips site, which is what defines exit() and quit(); solutions call them all the time.
builtins.exit = builtins.quit = _site_exit


def _make_non_dumpable() -> None:
    # A non-dumpable harness cannot be ptrace'd or have /proc/<pid>/mem, /proc/<pid>/fd opened by its children.
    LIBC.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def _read_line(buffer: bytearray) -> bytes:
    while b"\n" not in buffer:
        chunk = os.read(0, 1 << 20)
        if not chunk:
            raise EOFError
        buffer.extend(chunk)
    index = buffer.index(b"\n")
    line = bytes(buffer[:index])
    del buffer[: index + 1]
    return line


def _send(nonce: str, message: dict) -> None:
    data = (nonce + " " + json.dumps(message) + "\n").encode()
    view = memoryview(data)
    while view:
        written = os.write(1, view)
        view = view[written:]


def _memfd(name: str, data: bytes = b"") -> int:
    fd = os.memfd_create(name, 0)
    if data:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _read_capped(fd: int, cap: int) -> tuple[bytes, int]:
    size = os.fstat(fd).st_size
    return os.pread(fd, min(size, cap), 0), size


def _apply_limits(limits: dict) -> None:
    cpu = int(limits["cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    memory = int(limits["memory_bytes"])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    nproc = int(limits["nproc"])
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    # +1 so that "the file reached the cap" and "the write was cut" are told apart by the size alone
    fsize = int(limits["output_bytes"]) + 1
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    nofile = int(limits["nofile"])
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    # Deep recursion (sys.setrecursionlimit + lru_cache) needs more than the usual 8 MiB of C stack.
    _, stack_hard = resource.getrlimit(resource.RLIMIT_STACK)
    stack = min(memory // 2, 512 << 20)
    if stack_hard != resource.RLIM_INFINITY:
        stack = min(stack, stack_hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_STACK, (stack, stack_hard))


def _serialise(value: object) -> str:
    def fallback(obj: object) -> object:
        if isinstance(obj, (set, frozenset)):
            try:
                return sorted(obj)
            except TypeError:
                return list(obj)
        if isinstance(obj, (bytes, bytearray)):
            return obj.decode("utf-8", "replace")
        return repr(obj)

    return json.dumps(value, default=fallback, allow_nan=True)


def _resolve_callable(namespace: dict, fn_name: str):
    solution = namespace.get("Solution")
    if isinstance(solution, type) and hasattr(solution, fn_name):
        return getattr(solution(), fn_name)  # LeetCode style
    fn = namespace.get(fn_name)
    if callable(fn):
        return fn
    raise NameError(f"the program defines neither {fn_name}() nor Solution.{fn_name}()")


def _raised_in_test(error: BaseException) -> bool:
    """Whether the failing assert is the test's own (a wrong answer), not one inside the program."""
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is not None and tb.tb_frame.f_code.co_filename == "<test>"


def _child(job: dict, test: object, fds: tuple[int, int, int, int]) -> None:
    """Runs in the forked child: never returns."""
    exit_code = 1
    try:
        os.setpgid(0, 0)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(len(fds), 1 << 16)
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        if job["sandboxed"]:
            try:
                drop_capabilities()
            except OSError as error:
                os.write(2, f"sandbox: {error}\n".encode())
                raise  # the program never runs
        os.chdir(job["workdir"])
        # newline="\n" is what CPython gives sys.std* on POSIX: lines split at \n, no \r or \r\n translation
        # (the default newline=None would turn "a\rb\r\nc" into "a\nb\nc" and change character counts).
        sys.stdin = sys.__stdin__ = io.TextIOWrapper(
            io.BufferedReader(io.FileIO(0, "rb", closefd=False)), "utf-8", "replace", newline="\n"
        )
        sys.stdout = sys.__stdout__ = io.TextIOWrapper(
            io.BufferedWriter(io.FileIO(1, "wb", closefd=False), 1 << 16), "utf-8", "replace", newline="\n"
        )
        sys.stderr = sys.__stderr__ = io.TextIOWrapper(
            io.BufferedWriter(io.FileIO(2, "wb", closefd=False)),
            "utf-8",
            "backslashreplace",
            newline="\n",
            line_buffering=True,
        )
        _apply_limits(job["limits"])
        kind = job["kind"]
        namespace = {"__name__": "__main__" if kind == "stdio" else "solution", "__builtins__": builtins}
        try:
            exec(compile(job["program"], "<solution>", "exec"), namespace)
            if kind == "call":
                result = _resolve_callable(namespace, job["fn_name"])(*test)
                os.write(3, _serialise(result).encode())
            elif kind == "assert":
                exec(compile(test, "<test>", "exec"), namespace)
                namespace["check"](namespace[job["entry_point"]])
                os.write(3, RESULT_OK_MARK)
            exit_code = 0
        except SystemExit as stop:
            exit_code = 0 if stop.code in (None, 0) else 1
        except MemoryError:
            exit_code = EXIT_MEMORY
            sys.stderr.write("MemoryError\n")
        except AssertionError as error:
            sys.__excepthook__(*sys.exc_info())  # the C printer: no traceback import
            exit_code = EXIT_WRONG if kind == "assert" and _raised_in_test(error) else 1
        except BaseException:
            sys.__excepthook__(*sys.exc_info())  # the C printer: no traceback import
            exit_code = 1
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except MemoryError:
                exit_code = EXIT_MEMORY
            except OSError:
                exit_code = EXIT_OUTPUT
    except BaseException:
        exit_code = 1
    os._exit(exit_code)


def _kill_leftovers(job: dict, pid: int) -> None:
    """Kill the test's whole process tree, including daemons that left its process group."""
    if job["sandboxed"] and os.getpid() == 1:
        # We are init of our own pid namespace: every other process in it is the program's.
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)
        _reap_orphans()
    else:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def _reap_orphans() -> None:
    """As init, collect the zombies of killed orphans (SIGKILL lands asynchronously, so wait briefly)."""
    deadline = time.monotonic() + 1.0
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if time.monotonic() > deadline:
                return
            time.sleep(0.001)


def _wait(pid: int, wall_s: float) -> tuple[int, object, bool]:
    """(wait status, rusage, timed out)."""
    timed_out = False
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        pidfd = -1
    if pidfd >= 0:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        if not poller.poll(wall_s * 1000):
            timed_out = True
        os.close(pidfd)
    else:  # no pidfd (old kernel): poll waitpid
        deadline = time.monotonic() + wall_s
        while time.monotonic() < deadline:
            done, status, rusage = os.wait4(pid, os.WNOHANG)
            if done:
                return status, rusage, False
            time.sleep(0.002)
        timed_out = True
    if timed_out:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        os.kill(pid, signal.SIGKILL)
    _, status, rusage = os.wait4(pid, 0)
    return status, rusage, timed_out


def _clean_workdir(path: str) -> None:
    """Remove everything under `path` (shutil is not imported: it costs milliseconds per sandbox start)."""
    try:
        entries = list(os.scandir(path))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                os.chmod(entry.path, 0o700)  # a program may have made it unreadable
                _clean_workdir(entry.path)
                os.rmdir(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            pass


def _status(
    job: dict, status: int, rusage, timed_out: bool, sizes: dict, stderr_tail: bytes, result: bytes
) -> str:
    limits = job["limits"]
    cpu_s = rusage.ru_utime + rusage.ru_stime
    if any(size > limits["output_bytes"] for size in sizes.values()):
        return "output_limit"
    if timed_out:
        return "timeout"
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        if signum == signal.SIGXCPU or (signum == signal.SIGKILL and cpu_s >= limits["cpu_s"]):
            return "timeout"
        if signum == signal.SIGXFSZ:
            return "output_limit"
        if b"MemoryError" in stderr_tail or b"Cannot allocate memory" in stderr_tail:
            return "memory"
        return "runtime_error"
    code = os.WEXITSTATUS(status)
    if code == EXIT_MEMORY or (code != 0 and b"MemoryError" in stderr_tail):
        return "memory"
    if code == EXIT_OUTPUT:
        return "output_limit"
    if code == EXIT_WRONG:
        return "wrong_answer"
    if code != 0:
        return "runtime_error"
    if job["kind"] == "call" and not result:
        return "runtime_error"  # left without returning (os._exit, sys.exit before the call)
    if job["kind"] == "assert" and result != RESULT_OK_MARK:
        return "runtime_error"  # check() never returned
    return "ok"


def _run_test(job: dict, index: int, test: object, fresh: FreshRuns | None) -> dict:
    limits = job["limits"]
    # surrogateescape: a label can carry non-UTF-8 input bytes as lone surrogates (U+DC80..U+DCFF, Python's
    # convention for undecodable bytes), which arrive as the original bytes.
    stdin_data = test.encode("utf-8", "surrogateescape") if job["kind"] == "stdio" else b""
    fds = (_memfd("stdin", stdin_data), _memfd("stdout"), _memfd("stderr"), _memfd("result"))
    if fresh is not None:
        fresh.take()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(job, test, fds)
    if fresh is not None:
        fresh.renew_namespaces()  # for the next run, while this one runs in the namespaces it was forked in
    status, rusage, timed_out = _wait(pid, float(limits["wall_s"]))
    wall = time.monotonic() - started
    _kill_leftovers(job, pid)
    cap = int(limits["output_bytes"])
    stdout, out_size = _read_capped(fds[1], cap)
    _, err_size = _read_capped(fds[2], 0)
    stderr_tail = os.pread(fds[2], 2048, max(0, min(err_size, cap) - 2048))
    result, res_size = _read_capped(fds[3], cap)
    for fd in fds:
        os.close(fd)
    sizes = {"stdout": out_size, "stderr": err_size, "result": res_size}
    verdict = _status(job, status, rusage, timed_out, sizes, stderr_tail, result)
    message = {
        "i": index,
        "status": verdict,
        "wall_s": round(wall, 4),
        "cpu_s": round(rusage.ru_utime + rusage.ru_stime, 4),
        "stderr": stderr_tail.decode("utf-8", "replace"),
    }
    if verdict == "ok" and job["kind"] != "assert":
        payload = stdout if job["kind"] == "stdio" else result
        message["output"] = payload.decode("utf-8", "replace")
    if os.WIFSIGNALED(status):
        message["signal"] = os.WTERMSIG(status)
    else:
        message["exit_code"] = os.WEXITSTATUS(status)
    return message


def main() -> None:
    """Serve jobs until stdin closes. After each test the program's processes are killed; then, sandboxed,
    the next run's tmpfs directories are mounted while the host judges this one (unsandboxed: the working
    dir is wiped)."""
    _make_non_dumpable()
    fresh = FreshRuns(sys.argv[2], int(sys.argv[3])) if sys.argv[1:2] == ["--fresh-runs"] else None
    if fresh is not None:  # the first run's, before its job comes
        fresh.renew_namespaces()
        fresh.renew_mounts()
    buffer = bytearray()
    while True:
        try:
            job = json.loads(_read_line(buffer))
        except EOFError:
            return
        for index, test in enumerate(job["tests"]):
            message = _run_test(job, index, test, fresh)
            if fresh is None:
                _clean_workdir(job["workdir"])
            _send(job["nonce"], message)
            if fresh is not None:
                fresh.renew_mounts()
            try:
                if _read_line(buffer).strip() != b"next":
                    break
            except EOFError:
                return


if __name__ == "__main__":
    main()
