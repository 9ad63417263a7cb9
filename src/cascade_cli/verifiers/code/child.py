"""The program's process, forked by the harness for each run (stdlib only; runs INSIDE the sandbox).

It starts with only the fds it is handed, no capabilities and the job's rlimits; runs a stdio or call test
itself, or serves an assert test's judge (judge.py); never returns: its exit code is what the harness reads.
"""

import builtins
import contextlib
import io
import json
import os
import resource
import signal
import sys

from isolation import drop_capabilities

EXIT_MEMORY = 86
EXIT_OUTPUT = 87
EXIT_WRONG = 88  # an assert of the test itself failed (judge.py)
EXIT_NOT_PLAIN = 89  # a test needed the value of something that is not a plain value
EXIT_PROGRAM_GONE = 90  # the program process died or closed its end before the judge had its answer
PLAIN_TYPES = frozenset(
    {int, float, complex, str, bytes, bool, type(None), list, tuple, dict, set, frozenset}
)


class NotPlainValue(BaseException):
    """A test needed the value of a program object (BaseException: a test's own `except Exception` does not
    swallow it; and the judge fails the test even if something does)."""


def apply_limits(limits: dict, cpu: bool = True) -> None:
    if cpu:
        seconds = int(limits["cpu_s"])
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))
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
    """A returned value as JSON for the host to compare; NotPlainValue for anything but plain values."""

    def check(obj: object) -> None:
        kind = type(obj)
        if kind not in PLAIN_TYPES:
            raise NotPlainValue(
                f"the program returned an object of type {kind.__qualname__}, not a plain value"
            )
        if kind in (list, tuple, set, frozenset):
            for item in obj:
                check(item)
        elif kind is dict:
            for key, item in dict.items(obj):
                check(key)
                check(item)

    def fallback(obj: object) -> object:
        if isinstance(obj, (set, frozenset)):
            try:
                return sorted(obj)
            except TypeError:
                return list(obj)
        return obj.decode("utf-8", "replace") if isinstance(obj, bytes) else repr(obj)

    check(value)
    return json.dumps(value, default=fallback, allow_nan=True)


def _resolve_callable(namespace: dict, fn_name: str):
    solution = namespace.get("Solution")
    if isinstance(solution, type) and hasattr(solution, fn_name):
        return getattr(solution(), fn_name)  # LeetCode style
    fn = namespace.get(fn_name)
    if callable(fn):
        return fn
    raise NameError(f"the program defines neither {fn_name}() nor Solution.{fn_name}()")


def std_streams() -> tuple[io.TextIOWrapper, io.TextIOWrapper, io.TextIOWrapper]:
    """sys.stdin, stdout and stderr over fds 0, 1 and 2 as a program expects them."""
    # newline="\n" is what CPython gives sys.std* on POSIX: lines split at \n, no \r or \r\n translation
    # (the default newline=None would turn "a\rb\r\nc" into "a\nb\nc" and change character counts).
    stdin = io.TextIOWrapper(
        io.BufferedReader(io.FileIO(0, "rb", closefd=False)), "utf-8", "replace", newline="\n"
    )
    stdout = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(1, "wb", closefd=False), 1 << 16), "utf-8", "replace", newline="\n"
    )
    stderr = io.TextIOWrapper(
        io.BufferedWriter(io.FileIO(2, "wb", closefd=False)), "utf-8", "backslashreplace", newline="\n",
        line_buffering=True,
    )  # fmt: skip
    return stdin, stdout, stderr


# Made once in the harness and inherited unused by every assert run's program process, which only serves
# calls (its stdin is empty, its output no part of the verdict): building them is a good part of a
# child's start. stdio and call runs build their own, whose seek and tell see the run's own files.
PREBUILT_STREAMS = std_streams()


def enter_child(job: dict, fds: tuple[int, ...]) -> None:
    """In a forked child, before any program code: fds 0.. as given and no others, no capabilities, the
    job's rlimits, and std streams that read and write those fds."""
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
            raise  # nothing runs
    os.chdir(job["workdir"])
    streams = PREBUILT_STREAMS if job["kind"] == "assert" else std_streams()
    sys.stdin, sys.stdout, sys.stderr = sys.__stdin__, sys.__stdout__, sys.__stderr__ = streams
    apply_limits(job["limits"])


def _flush_streams(exit_code: int) -> int:
    for stream in {sys.stdout, sys.stderr}:
        try:
            stream.flush()
        except MemoryError:
            exit_code = EXIT_MEMORY
        except OSError:
            exit_code = EXIT_OUTPUT
    return exit_code


def run_program(job: dict, test: object, fds: tuple[int, ...]) -> None:
    """The program's process (forked; never returns): stdio and call run their test here; for an assert
    test it serves the judge's requests on fds 3 and 4 (judge.py)."""
    exit_code = 1
    try:
        enter_child(job, fds)
        kind = job["kind"]
        namespace = {"__name__": "__main__" if kind == "stdio" else "solution", "__builtins__": builtins}
        try:
            exec(compile(job["program"], "<solution>", "exec"), namespace)
            if kind == "call":
                result = _resolve_callable(namespace, job["fn_name"])(*test)
                os.write(3, _serialise(result).encode())
            elif kind == "assert":
                import judge  # loaded by the harness before it forked this process

                judge.serve_program(namespace, job["entry_point"], 3, 4, int(job["limits"]["output_bytes"]))
            exit_code = 0
        except SystemExit as stop:
            exit_code = 0 if stop.code in (None, 0) else 1
        except NotPlainValue as error:
            sys.stderr.write(f"{error}\n")
            exit_code = EXIT_NOT_PLAIN
        except MemoryError:
            exit_code = EXIT_MEMORY
            sys.stderr.write("MemoryError\n")
        except BaseException:
            sys.__excepthook__(*sys.exc_info())  # the C printer: no traceback import
            exit_code = 1
        exit_code = _flush_streams(exit_code)
    except BaseException:
        exit_code = 1
    os._exit(exit_code)
