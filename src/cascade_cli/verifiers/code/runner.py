"""The test harness that runs INSIDE the sandbox (stdlib only; never imports cascade_cli).

A harness process serves programs one after another: it reads a job (program, test inputs, limits) as one
frame on stdin, then for each test forks a child that runs the untrusted program under rlimits, and reports what the
child did as one line `<nonce> <json>` on stdout. The host compares outputs (the expected outputs never enter
the sandbox, so a program cannot read them from memory) and answers `next` or `stop`. Frames are a 10-digit
length and that many bytes, read exactly: what the harness has not read yet stays in the kernel's pipe.

An assert test's verdict is decided outside the program's process (judge.py): the harness forks the program
process first, only then reads the test's source (its own frame), and forks a judge process that runs it.

Why fork per test: a fresh interpreter state per test at the cost of a fork (about a millisecond), real file
descriptors 0/1/2 (`open(0).read()` works), and a child that can be killed with everything it started.
The modules imported below are preimported once, so children get them for free.

Each run (one program on one test) starts fresh although the harness stays warm: sandboxed, it gets an IPC
namespace, a network namespace with no socket in it and tmpfs directories of its own (isolation.py), and init
(the harness) kills whatever it started before the next run.
"""

# Preimported for the children (copy-on-write after fork): what solutions import most.
import bisect  # noqa: F401
import builtins
import collections  # noqa: F401
import contextlib
import functools  # noqa: F401
import gc
import heapq  # noqa: F401
import itertools  # noqa: F401
import json
import math  # noqa: F401
import os
import re  # noqa: F401
import select
import signal
import string  # noqa: F401
import sys
import time
import typing  # noqa: F401

# isolation.py lies beside this file in the sandbox; `python -P` keeps this directory off sys.path.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import child  # noqa: E402
from isolation import LIBC, FreshRuns  # noqa: E402

HERE = sys.path.pop(0)

EXIT_MEMORY, EXIT_OUTPUT = child.EXIT_MEMORY, child.EXIT_OUTPUT
FRAME_DIGITS = 10

PR_SET_DUMPABLE = 4


def _site_exit(code: object = None) -> None:
    raise SystemExit(code)


# `python -S` skips site, which is what defines exit() and quit(); solutions call them all the time.
builtins.exit = builtins.quit = _site_exit


def _make_non_dumpable() -> None:
    # A non-dumpable harness cannot be ptrace'd or have /proc/<pid>/mem, /proc/<pid>/fd opened by its children.
    LIBC.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)


def _read_frame() -> bytearray:
    """The next frame from the host, read exactly (into a bytearray the caller can wipe)."""
    size = int(_read_exactly(FRAME_DIGITS))
    return _read_exactly(size)


def _read_exactly(size: int) -> bytearray:
    data = bytearray(size)
    view, got = memoryview(data), 0
    while got < size:
        count = os.readv(0, [view[got:]])
        if not count:
            raise EOFError
        got += count
    return data


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


def _kill_leftovers(job: dict, pid: int, spare: int = 0) -> bool:
    """Kill the test's whole process tree, including daemons that left its process group; never the judge
    process `spare`. False when, sandboxed, some process of it may still be alive."""
    if job["sandboxed"] and os.getpid() == 1:
        # We are init of our own pid namespace: every other process in it but the judge is the program's.
        if not spare:
            with contextlib.suppress(ProcessLookupError):
                os.kill(-1, signal.SIGKILL)
            return _reap_orphans()
        return _kill_all_but(spare)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    return True


def _reap_orphans() -> bool:
    """As init, collect the zombies of killed orphans (SIGKILL lands asynchronously, so wait briefly); True
    once none is left."""
    deadline = time.monotonic() + 1.0
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True
        if pid == 0:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.001)


def _kill_all_but(spare: int) -> bool:
    """kill(-1) would take the judge too: kill our other children instead, and again, until the judge is the
    only one left (a process killed in the middle of a fork leaves no child behind).

    Our children are every process of the namespace but their descendants, which become ours when their
    parent dies (we are init). So when the judge, which never forks, is our only child, nothing else is left:
    a dead child stays listed until we reap it, and its orphans are ours before it is a zombie. The list is
    /proc/1/task/1/children (one small read; we are single-threaded), or /proc's pids where the kernel has no
    such file."""
    deadline = time.monotonic() + 1.0
    while True:
        others = [pid for pid in _our_children() if pid != spare]
        if not others or time.monotonic() > deadline:
            return not others
        for pid in others:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        time.sleep(0.0002)


def _our_children() -> list[int]:
    try:
        fd = os.open("/proc/1/task/1/children", os.O_RDONLY)
    except OSError:
        return [pid for pid in map(int, filter(str.isdigit, os.listdir("/proc"))) if pid != 1]
    try:
        data = b""
        while chunk := os.read(fd, 1 << 16):
            data += chunk
    finally:
        os.close(fd)
    return [int(pid) for pid in data.split()]


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


def _signal_verdict(status: int, cpu_s: float, limits: dict, stderr_tail: bytes) -> str:
    signum = os.WTERMSIG(status)
    if signum == signal.SIGXCPU or (signum == signal.SIGKILL and cpu_s >= limits["cpu_s"]):
        return "timeout"
    if signum == signal.SIGXFSZ:
        return "output_limit"
    if b"MemoryError" in stderr_tail or b"Cannot allocate memory" in stderr_tail:
        return "memory"
    return "runtime_error"


def _exit_verdict(code: int, stderr_tail: bytes) -> str | None:
    """The verdict an exit code names by itself, or None."""
    if code == EXIT_MEMORY or (code != 0 and b"MemoryError" in stderr_tail):
        return "memory"
    if code == EXIT_OUTPUT:
        return "output_limit"
    if code == child.EXIT_NOT_PLAIN:
        return "not_plain"
    return None


def _status(job: dict, status: int, cpu_s: float, timed_out: bool, over_limit: bool, stderr_tail: bytes,
            result: bytes) -> str:  # fmt: skip
    if over_limit:
        return "output_limit"
    if timed_out:
        return "timeout"
    if os.WIFSIGNALED(status):
        return _signal_verdict(status, cpu_s, job["limits"], stderr_tail)
    code = os.WEXITSTATUS(status)
    if code != 0:
        return _exit_verdict(code, stderr_tail) or "runtime_error"
    if job["kind"] == "call" and not result:
        return "runtime_error"  # left without returning (os._exit, sys.exit before the call)
    return "ok"


def _assert_status(job: dict, judge_code: int | None, program_status: int, cpu_s: float, timed_out: bool,
                   over_limit: bool, stderr_tail: bytes) -> str:  # fmt: skip
    """An assert test passes only on the judge's code 0; else the program's end explains it first."""
    if over_limit:
        return "output_limit"
    if timed_out:
        return "timeout"
    if judge_code == 0:
        return "ok"
    if os.WIFSIGNALED(program_status) and os.WTERMSIG(program_status) != signal.SIGKILL:
        return _signal_verdict(program_status, cpu_s, job["limits"], stderr_tail)
    if os.WIFEXITED(program_status) and _exit_verdict(os.WEXITSTATUS(program_status), b""):
        return _exit_verdict(os.WEXITSTATUS(program_status), b"")
    if judge_code == child.EXIT_WRONG:
        return "wrong_answer"
    return _exit_verdict(judge_code or 1, stderr_tail) or "runtime_error"


def _read_outputs(fds: tuple[int, ...], cap: int) -> tuple[bytes, bytes, bool]:
    """(stdout, stderr tail, whether an output went over the cap) of a run's memfds (stdout, stderr, ...)."""
    stdout, out_size = _read_capped(fds[0], cap)
    _, err_size = _read_capped(fds[1], 0)
    stderr_tail = os.pread(fds[1], 2048, max(0, min(err_size, cap) - 2048))
    sizes = [out_size, err_size] + [_read_capped(fd, 0)[1] for fd in fds[2:]]
    return stdout, stderr_tail, any(size > cap for size in sizes)


def _message(index: int, verdict: str, started: float, cpu_s: float, stderr: bytes, status: int) -> dict:
    message = {
        "i": index,
        "status": verdict,
        "wall_s": round(time.monotonic() - started, 4),
        "cpu_s": round(cpu_s, 4),
        "stderr": stderr.decode("utf-8", "replace"),
    }
    if os.WIFSIGNALED(status):
        message["signal"] = os.WTERMSIG(status)
    else:
        message["exit_code"] = os.WEXITSTATUS(status)
    return message


def _run_test(job: dict, index: int, test: object, fresh: FreshRuns | None, judge_process) -> dict:
    """A stdio or call test: one process runs the program and the test; the host compares the output."""
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
        child.run_program(job, test, fds)
    if fresh is not None:
        fresh.renew_namespaces()  # for the next run, while this one runs in the namespace it was forked in
    status, rusage, timed_out = _wait(pid, float(limits["wall_s"]))
    if not _kill_leftovers(job, pid, spare=judge_process.pid if judge_process else 0) and fresh is not None:
        fresh.leave_network()  # a process still alive could open a socket in it later
    if judge_process:
        judge_process.revive()
    cap = int(limits["output_bytes"])
    stdout, stderr_tail, over_limit = _read_outputs(fds[1:], cap)
    result, _ = _read_capped(fds[3], cap)
    for fd in fds:
        os.close(fd)
    cpu_s = rusage.ru_utime + rusage.ru_stime
    verdict = _status(job, status, cpu_s, timed_out, over_limit, stderr_tail, result)
    message = _message(index, verdict, started, cpu_s, stderr_tail, status)
    if verdict == "ok":
        message["output"] = (stdout if job["kind"] == "stdio" else result).decode("utf-8", "replace")
    return message


def _run_assert_test(job: dict, index: int, fresh: FreshRuns | None, judge_process) -> dict:
    """An assert test: the program process is forked first, then the test is read and handed to the judge."""
    limits = job["limits"]
    program_fds = (_memfd("stdin"), _memfd("stdout"), _memfd("stderr"))
    judge_stderr = _memfd("judge-stderr")
    requests_read, requests_write = os.pipe()
    replies_read, replies_write = os.pipe()
    starts_judge = not judge_process.pid
    judge_process.prepare(job)
    if fresh is not None:
        if starts_judge:  # its socket to the harness is in this network namespace: not the run's
            fresh.leave_network()
        fresh.take()
    started = time.monotonic()
    program_pid = os.fork()
    if program_pid == 0:
        child.run_program(job, None, (*program_fds, requests_read, replies_write))
    if fresh is not None:
        fresh.renew_namespaces()
    for fd in (requests_read, replies_write):
        os.close(fd)
    test = _read_frame()  # only now: the program's process never held the test or its expected values
    judge_fds = (requests_write, replies_read, judge_stderr)
    judge_code = judge_process.judge(job, test, judge_fds, float(limits["wall_s"]))  # closes the pipes
    test[:] = bytes(len(test))  # wiped: later program processes are forked from this memory
    timed_out = judge_code is None and time.monotonic() - started >= float(limits["wall_s"])
    # The program process ends at the judge's end of file; one still busy is killed.
    program_status, program_rusage, _ = _wait(program_pid, 0.0 if timed_out else 0.5)
    if not _kill_leftovers(job, program_pid, spare=judge_process.pid) and fresh is not None:
        fresh.leave_network()  # a process still alive could open a socket in it later
    judge_process.revive()
    cap = int(limits["output_bytes"])
    _, program_stderr, program_over = _read_outputs(program_fds[1:], cap)
    _, judge_tail, judge_over = _read_outputs((judge_stderr, judge_stderr), cap)
    for fd in (*program_fds, judge_stderr):
        os.close(fd)
    cpu_s = program_rusage.ru_utime + program_rusage.ru_stime
    stderr_tail = (program_stderr + judge_tail)[-2048:]
    verdict = _assert_status(
        job, judge_code, program_status, cpu_s, timed_out, program_over or judge_over, stderr_tail
    )
    status = (judge_code if judge_code is not None else 1) << 8  # reported as the judge's exit code
    return _message(index, verdict, started, cpu_s, stderr_tail, status)


def _judge_process():
    """judge.py and judge_process.py, loaded from beside this file (kept off the programs' sys.path)."""
    sys.path.insert(0, HERE)
    try:
        from judge_process import JudgeProcess
    finally:
        del sys.path[0]
    gc.freeze()  # as main() did for the harness's own modules: the judge's are shared with every run too
    return JudgeProcess()


def main() -> None:
    """Serve jobs until stdin closes. After each test the program's processes are killed; then, sandboxed,
    the next run's tmpfs directories are mounted (and its network namespace renewed if this run left a
    socket) while the host judges this one (unsandboxed: the working dir is wiped)."""
    _make_non_dumpable()
    # A process's first compile() of a string sets up what every later one reuses (about a millisecond): done
    # here, every child's compile of its program finds it done (importing modules from source did it too,
    # but they come compiled, sandbox_files.py).
    compile("pass", "<warm-up>", "exec")
    # The harness's objects are shared copy-on-write with every run's processes: kept out of their garbage
    # collections, the pages that hold them are never written (and copied) by a child's collection.
    gc.freeze()
    fresh = FreshRuns(sys.argv[2], int(sys.argv[3])) if sys.argv[1:2] == ["--fresh-runs"] else None
    if fresh is not None:  # the first run's, before its job comes
        fresh.renew_namespaces()
        fresh.renew_network()
        fresh.renew_mounts()
    judge_process = None  # started at the first assert job: stdio and call sandboxes never load it
    while True:
        try:
            job = json.loads(_read_frame())
        except EOFError:
            return
        # An assert test comes in a frame of its own after the job, read once its program process exists.
        tests = [None] * int(job["n_tests"]) if job["kind"] == "assert" else job["tests"]
        for index, test in enumerate(tests):
            if job["kind"] == "assert":
                judge_process = judge_process or _judge_process()
                message = _run_assert_test(job, index, fresh, judge_process)
            else:
                message = _run_test(job, index, test, fresh, judge_process)
            if fresh is None:
                _clean_workdir(job["workdir"])
            _send(job["nonce"], message)
            if fresh is not None:
                fresh.renew_after_run()
            try:
                if _read_frame() != b"next":
                    break
            except EOFError:
                return


if __name__ == "__main__":
    main()
