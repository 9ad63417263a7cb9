"""The judge's process, kept warm across a sandbox's assert tests (stdlib only; runs INSIDE the sandbox).

A process of its own per test would cost the judge a fork, a start and an exit each time: as much CPU as
the program's own run. So the harness starts one judge process and hands it each test over a socket: the
test's source and the ends of that test's pipes to the program process (judge.py says what it does with
them). It answers with the verdict's code, on the socket, which no program process holds.

What a program can do to it: it is not dumpable and the program has no capabilities, so no ptrace, no
/proc/PID/mem or fd; it ignores every signal it can. A program can still SIGKILL it (its own test then
fails and the harness starts another judge for the next) or SIGSTOP it (its own test times out, and once the
run's processes are dead the harness sends SIGCONT, so the next program finds it running).
"""

import contextlib
import json
import os
import select
import signal
import socket
import struct
import sys

import child
import judge
from isolation import drop_capabilities

_HEAD = struct.Struct(">II")  # header length, test length
_FDS = 3  # the judge's ends of the test's request and reply pipes, and its stderr for the test


class JudgeProcess:
    def __init__(self) -> None:
        self.pid = 0
        self.sock: socket.socket | None = None
        self._job: dict | None = None
        self._header = b""

    def prepare(self, job: dict) -> None:
        """Before the test's program process is forked: the judge started and the job's header made, so that
        little is left to do while that process runs (each page the harness writes then is copied)."""
        if not self.pid:
            self._start(job)
        if job is not self._job:
            self._job, self._header = job, json.dumps(
                {"entry_point": job["entry_point"], "prelude": job.get("prelude") or "",
                 "output_bytes": int(job["limits"]["output_bytes"])}
            ).encode()  # fmt: skip

    def judge(self, job: dict, test: bytearray, fds: tuple[int, int, int], wall_s: float) -> int | None:
        """The judge's exit code for one test (judge.EXIT_*), or None when it gave none in time or died
        (then it is gone, and the next test starts another). The test's pipes (fds[0] and fds[1]) are closed
        here once the judge has its own copies: the program process then sees end of file as soon as the
        judge closes its ends, and ends while the judge answers."""
        self.prepare(job)
        header = self._header
        try:
            _send_all(self.sock, [_HEAD.pack(len(header), len(test)) + header, test], fds)
        except OSError:
            self.stop()
            return None
        finally:
            for fd in fds[:2]:
                os.close(fd)
        try:
            ready, _, _ = select.select([self.sock], [], [], wall_s)
            answer = self.sock.recv(1) if ready else b""
        except OSError:
            answer = b""
        if not answer:
            self.stop()
            return None
        return answer[0]

    def revive(self) -> None:
        """After a run's processes are dead: undo a SIGSTOP they sent, and notice a judge they killed."""
        if not self.pid:
            return
        try:
            os.kill(self.pid, signal.SIGCONT)
            done, _ = os.waitpid(self.pid, os.WNOHANG)
        except (ProcessLookupError, ChildProcessError):
            done = self.pid
        if done:
            self._forget()

    def stop(self) -> None:
        if self.pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
        self._forget()

    def _forget(self) -> None:
        if self.sock is not None:
            self.sock.close()
        self.pid, self.sock = 0, None

    def _start(self, job: dict) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            ours.close()
            _serve(job, theirs.fileno())
        theirs.close()
        self.pid, self.sock = pid, ours


def _send_all(sock: socket.socket, buffers: list, fds: tuple[int, ...]) -> None:
    """sendmsg until every byte is out; the fds ride with the first bytes."""
    views = [memoryview(buffer).cast("B") for buffer in buffers]
    sent = socket.send_fds(sock, views, list(fds))
    for view in views:
        if sent >= len(view):
            sent -= len(view)
            continue
        sock.sendall(view[sent:])
        sent = 0


def receive_test(sock: socket.socket) -> tuple[dict, str, list[int]] | None:
    """In the judge: the next test (header, source, fds), or None when the harness has closed its end."""
    data, fds, _, _ = socket.recv_fds(sock, 1 << 16, _FDS)
    if not data:
        for fd in fds:
            os.close(fd)
        return None
    buffer = bytearray(data)
    while len(buffer) < _HEAD.size:
        buffer += _recv_some(sock)
    header_size, test_size = _HEAD.unpack_from(buffer)
    total = _HEAD.size + header_size + test_size
    while len(buffer) < total:
        buffer += _recv_some(sock)
    header = json.loads(buffer[_HEAD.size : _HEAD.size + header_size])
    source = bytes(buffer[_HEAD.size + header_size : total]).decode("utf-8", "surrogateescape")
    return header, source, fds


def _recv_some(sock: socket.socket) -> bytes:
    chunk = sock.recv(1 << 16)
    if not chunk:
        raise EOFError
    return chunk


def _serve(job: dict, sock_fd: int) -> None:
    """The judge process's life (never returns): tests one after another until the harness closes."""
    try:
        devnull = os.open("/dev/null", os.O_RDWR)
        for target in (0, 1, 2):
            os.dup2(devnull, target)
        os.dup2(sock_fd, 3)
        os.closerange(4, 1 << 16)
        for number in signal.valid_signals():
            with contextlib.suppress(OSError, ValueError, RuntimeError):
                signal.signal(number, signal.SIG_IGN)
        if job["sandboxed"]:
            drop_capabilities()
        child.apply_limits(job["limits"], cpu=False)  # the harness bounds each test's wall time instead
        sock = socket.socket(fileno=3)
        while True:
            received = receive_test(sock)
            if received is None:
                break
            header, source, (requests, replies, stderr) = received
            os.dup2(stderr, 2)
            os.close(stderr)
            code = judge.judge(
                source,
                header["prelude"],
                header["entry_point"],
                judge.Program(requests, replies, header["output_bytes"]),
            )
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            for fd in (requests, replies):
                os.close(fd)
            os.dup2(0, 2)
            sock.sendall(bytes([code & 0xFF]))
    except BaseException:
        pass
    os._exit(0)
