"""Attacks on the code sandbox: each must be contained, leave the host unchanged and get the right verdict.

Most attack programs print "contained" only when every attempt failed, and the label expects "contained",
so verdict "pass" means the attack was stopped; where a program cannot tell, the host state is checked.
Limits are tight (1 s per test, 0.5 s where a timeout is the expected verdict, 256 MiB, 16 processes, 1 MiB output, 8 MiB tmpfs) to keep this file fast.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cascade_cli.verifiers import get_verifier
from cascade_cli.verifiers.code.sandbox import host_cannot_sandbox

REPO = Path(__file__).resolve().parents[1]
SECRET_ENV = "CASCADE_TEST_SECRET_TOKEN"
SECRET_VALUE = "s3cr3t-" + secrets.token_hex(8)

CANNOT_SANDBOX = host_cannot_sandbox()
OTHER_HARNESSES: set[int] = set()
pytestmark = pytest.mark.skipif(CANNOT_SANDBOX is not None, reason=f"no sandbox here: {CANNOT_SANDBOX}")


@pytest.fixture(scope="module")
def verifier():
    os.environ[SECRET_ENV] = SECRET_VALUE  # in the verifier's environment before any sandbox starts
    # Warm sandboxes of other verifiers (earlier tests, other suites) are not this verifier's leftovers.
    OTHER_HARNESSES.update(harness_processes())
    v = get_verifier(
        "code",
        workers=2,
        time_limit_s=1.0,  # a generous limit for attacks expected to finish; timeout attacks set 0.5 s
        memory_mb=256,
        output_limit_mb=1,
        max_processes=16,
        tmpfs_mb=8,
    )
    yield v
    v.close()
    os.environ.pop(SECRET_ENV, None)


def run(verifier, program: str, expected: str = "contained", **label) -> dict:
    record = {
        "response": "```python\n" + textwrap.dedent(program) + "\n```",
        "label": {"kind": "stdio", "inputs": [""], "outputs": [expected], **label},
    }
    score = verifier.verify_one(record)
    assert score.reward == (1.0 if score.passed else 0.0)
    return score.details


def harness_processes() -> list[int]:
    """Host pids of sandboxed harnesses and their children (cmdline names the harness)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            argv = cmdline.split(b"\0")
            if b"/cascade/harness.py" in argv and not argv[0].endswith(b"bwrap"):
                found.append(int(entry))
    return found


def processes_with(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                continue
    return found


def eventually(condition: Callable[[], bool], timeout_s: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def only_warm_harnesses_left(verifier) -> bool:
    # one harness process per warm sandbox; anything more is a program's leftover
    return eventually(lambda: len(set(harness_processes()) - OTHER_HARNESSES) <= verifier.workers)


# -- resource exhaustion --------------------------------------------------------------------------------


def test_fork_bomb_is_capped_and_cleaned_up(verifier):
    before = len(os.listdir("/proc"))
    details = run(
        verifier,
        """
        import os, time
        n = 0
        try:
            while True:
                if os.fork() == 0:
                    time.sleep(30)
                    os._exit(0)
                n += 1
        except OSError:
            pass
        print("contained" if n < 16 else f"forked {n}")
        """,
    )
    assert details["verdict"] == "pass", details
    assert only_warm_harnesses_left(verifier)
    assert len(os.listdir("/proc")) < before + 10


def test_endless_fork_bomb_times_out_and_leaves_nothing(verifier):
    details = run(
        verifier,
        """
        import os
        while True:
            try:
                os.fork()
            except OSError:
                pass
        """,
        time_limit_s=0.5,
    )
    assert details["verdict"] == "timeout", details
    assert only_warm_harnesses_left(verifier)


def test_infinite_loop_times_out_quickly(verifier):
    started = time.monotonic()
    details = run(verifier, "while True:\n    pass", time_limit_s=0.5)
    assert details["verdict"] == "timeout"
    assert time.monotonic() - started < 5


def test_sleeping_past_the_limit_times_out(verifier):
    started = time.monotonic()
    details = run(verifier, "import time\ntime.sleep(60)\nprint('contained')", time_limit_s=0.5)
    assert details["verdict"] == "timeout"
    assert time.monotonic() - started < 5


def test_memory_bomb_gets_memory_verdict(verifier):
    assert run(verifier, "x = bytearray(10**10)")["verdict"] == "memory"
    details = run(verifier, "chunks = []\nwhile True:\n    chunks.append(' ' * 10**7)", time_limit_s=3)
    assert details["verdict"] == "memory", details


def test_huge_stdout_is_capped(verifier):
    details = run(verifier, "while True:\n    print('x' * 10000)")
    assert details["verdict"] == "output_limit", details


def test_huge_stderr_is_capped(verifier):
    details = run(verifier, "import sys\nwhile True:\n    sys.stderr.write('e' * 10000)")
    assert details["verdict"] == "output_limit", details
    assert len(details.get("stderr", "")) <= 1000


def test_filling_the_disk_stops_at_the_tmpfs_size(verifier):
    free_before = shutil.disk_usage("/tmp").free
    details = run(
        verifier,
        """
        import os
        written = {}
        for directory in ["/tmp", "/dev/shm", "/dev", "/"]:
            written[directory] = 0
            try:
                for i in range(1000):
                    with open(os.path.join(directory, f"fill{i}"), "wb") as f:
                        for _ in range(64):
                            f.write(b"x" * 65536)
                            written[directory] += 65536
            except OSError:
                pass
        # 8 MiB tmpfs for /tmp and /dev/shm, read-only elsewhere
        print("contained" if sum(written.values()) <= 16 * 2**20 and not written["/dev"] else written)
        """,
    )
    assert details["verdict"] == "pass", details
    assert shutil.disk_usage("/tmp").free > free_before - 32 * 2**20


# -- file system ------------------------------------------------------------------------------------------


def test_writing_outside_the_work_dir_fails(verifier, tmp_path):
    target = tmp_path / "escaped.txt"
    details = run(
        verifier,
        f"""
        escaped = []
        for path in ["/usr/bin/evil", "/cascade/harness.py", "/evil", "/root/evil", "/proc/evil", {str(target)!r}]:
            try:
                with open(path, "w") as f:
                    f.write("pwned")
                escaped.append(path)
            except OSError:
                pass
        print("contained" if not escaped else escaped)
        """,
    )
    assert details["verdict"] == "pass", details
    assert not target.exists()
    assert not Path("/evil").exists()


def test_sandbox_tmp_is_not_the_host_tmp(verifier):
    name = f"cascade-sandbox-probe-{secrets.token_hex(6)}"
    details = run(verifier, f"open('/tmp/{name}', 'w').write('x')\nprint('contained')")
    assert details["verdict"] == "pass"
    assert not Path("/tmp", name).exists()


def test_reading_root_home_fails(verifier):
    secret_file = Path.home() / f".cascade-test-secret-{secrets.token_hex(6)}"
    secret_file.write_text(SECRET_VALUE)
    try:
        details = run(
            verifier,
            f"""
            import os
            leaked = []
            for path in [{str(secret_file)!r}, "/root/.bashrc", "/etc/shadow", "/etc/passwd"]:
                try:
                    leaked.append(open(path).read()[:20])
                except OSError:
                    pass
            listing = os.listdir("/root") if os.path.isdir("/root") else []
            print("contained" if not leaked and {secret_file.name!r} not in listing else leaked)
            """,
        )
    finally:
        secret_file.unlink()
    assert details["verdict"] == "pass", details


def test_reading_the_project_files_fails(verifier):
    details = run(
        verifier,
        f"""
        import os
        seen = []
        for path in [{str(REPO / "pyproject.toml")!r}, {str(Path(__file__).resolve())!r}, {sys.prefix!r}]:
            if os.path.exists(path):
                seen.append(path)
        print("contained" if not seen else seen)
        """,
    )
    assert details["verdict"] == "pass", details


# -- environment, processes, network ----------------------------------------------------------------------


def test_parent_environment_secret_is_invisible(verifier):
    details = run(
        verifier,
        f"""
        import os
        found = any({SECRET_VALUE!r} in value for value in os.environ.values())
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    found = found or {SECRET_VALUE!r}.encode() in open(f"/proc/{{pid}}/environ", "rb").read()
                except OSError:
                    pass
        allowed = {{"PATH", "HOME", "LANG", "LC_ALL", "PYTHONHASHSEED", "PYTHONIOENCODING", "PYTHONDONTWRITEBYTECODE", "PWD"}}
        print("contained" if not found and set(os.environ) <= allowed else sorted(os.environ))
        """,
    )
    assert details["verdict"] == "pass", details


def test_host_processes_are_invisible_in_proc(verifier):
    details = run(
        verifier,
        f"""
        import os
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
        host_visible = os.path.exists("/proc/{os.getpid()}/cmdline") and {os.getpid()} > 10
        cmdlines = b" ".join(open(f"/proc/{{p}}/cmdline", "rb").read() for p in pids)
        print("contained" if not host_visible and b"pytest" not in cmdlines and max(pids) < 100 else pids)
        """,
    )
    assert details["verdict"] == "pass", details


def test_signalling_host_processes_fails(verifier):
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        details = run(
            verifier,
            f"""
            import os, signal
            hit = []
            for pid in ({os.getpid()}, {helper.pid}, {os.getppid()}):
                try:
                    os.kill(pid, signal.SIGKILL)
                    hit.append(pid)
                except OSError:
                    pass
            print("contained" if not hit else hit)
            """,
        )
        assert details["verdict"] == "pass", details
        assert helper.poll() is None  # still alive
    finally:
        helper.kill()
        helper.wait()


def test_killing_the_harness_fails_and_the_verifier_recovers(verifier):
    # The harness is init of the sandbox's pid namespace: signals from inside cannot kill or stop it.
    for signum in ("SIGKILL", "SIGSTOP"):
        details = run(
            verifier, f"import os, signal\nos.kill(os.getppid(), signal.{signum})\nprint('contained')"
        )
        assert details["verdict"] == "pass", details
    # kill(-1) reaches every process but init: only the program itself dies.
    details = run(verifier, "import os, signal\nos.kill(-1, signal.SIGKILL)\nprint('contained')")
    assert details["verdict"] == "runtime_error", details
    assert run(verifier, "print('contained')")["verdict"] == "pass"


def test_detached_daemon_does_not_outlive_the_test(verifier):
    marker = f"{secrets.randbelow(10**6)}.{secrets.randbelow(10**6)}"
    details = run(
        verifier,
        f"""
        import os
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv("/bin/sleep", ["sleep", "{marker}"])
            os._exit(0)
        os.wait()
        print("contained")
        """,
    )
    assert details["verdict"] == "pass", details
    assert eventually(lambda: not processes_with(marker))
    assert only_warm_harnesses_left(verifier)


def test_network_is_unreachable(verifier, loopback_server):
    port, connections = loopback_server
    details = run(
        verifier,
        f"""
        import socket
        reached = []
        for address in [("127.0.0.1", {port}), ("1.1.1.1", 53), ("8.8.8.8", 443)]:
            try:
                socket.create_connection(address, timeout=0.2).close()
                reached.append(address)
            except OSError:
                pass
        try:
            socket.getaddrinfo("pypi.org", 443)
            reached.append("dns")
        except OSError:
            pass
        print("contained" if not reached else reached)
        """,
    )
    assert details["verdict"] == "pass", details
    assert connections == []


def test_shell_and_curl_cannot_reach_the_host(verifier, loopback_server):
    port, connections = loopback_server
    details = run(
        verifier,
        f"""
        import subprocess
        result = subprocess.run(["/bin/sh", "-c", "curl -s -m 1 http://127.0.0.1:{port}/ && echo REACHED"],
                                capture_output=True, text=True, timeout=5)
        print("contained" if "REACHED" not in result.stdout else "escaped")
        """,
    )
    assert details["verdict"] == "pass", details
    assert connections == []


def test_localhost_resolves_to_the_sandbox_own_loopback(verifier, loopback_server):
    """A program may serve and connect to itself on `localhost`; the name never leads out of the sandbox."""
    port, connections = loopback_server
    details = run(
        verifier,
        f"""
        import socket, threading
        server = socket.create_server(("localhost", 0))
        def echo():
            connection, _ = server.accept()
            connection.sendall(connection.recv(16).upper())
            connection.close()
        threading.Thread(target=echo).start()
        client = socket.create_connection(("localhost", server.getsockname()[1]), timeout=1)
        client.sendall(b"ping")
        answer = client.recv(16)
        leaked = []
        for host in ("localhost", "127.0.0.1", socket.gethostname()):
            try:  # the host's listener on the same port number is in another network namespace
                socket.create_connection((host, {port}), timeout=0.2).close()
                leaked.append(host)
            except OSError:
                pass
        for name in ("pypi.org", "host.docker.internal"):
            try:
                socket.getaddrinfo(name, 443)
                leaked.append(name)
            except OSError:
                pass
        print("contained" if answer == b"PING" and not leaked else (answer, leaked))
        """,
    )
    assert details["verdict"] == "pass", details
    assert connections == []


def test_ptrace_of_the_harness_and_init_is_denied(verifier):
    details = run(
        verifier,
        """
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        attached = []
        for pid in {os.getppid(), 1}:
            if libc.ptrace(16, pid, 0, 0) == 0:  # PTRACE_ATTACH
                attached.append(pid)
        for path in (f"/proc/{os.getppid()}/mem", f"/proc/{os.getppid()}/fd/1"):
            try:
                open(path, "rb").close()
                attached.append(path)
            except OSError:
                pass
        print("contained" if not attached else attached)
        """,
    )
    assert details["verdict"] == "pass", details


def test_mounting_and_privilege_changes_fail(verifier):
    details = run(
        verifier,
        """
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        gained = []
        if libc.mount(b"none", b"/tmp", b"tmpfs", 0, None) == 0:
            gained.append("mount")
        try:
            os.setuid(0)
            gained.append("setuid")
        except OSError:
            pass
        for name, flag in {"user": 0x10000000, "net": 0x40000000, "mount": 0x20000, "ipc": 0x08000000}.items():
            if libc.unshare(flag) == 0:
                gained.append(f"unshare {name}")
        for name in ("net", "mnt"):  # the harness's namespaces, shared with no run
            try:
                fd = os.open(f"/proc/1/ns/{name}", os.O_RDONLY)
            except OSError:
                continue
            if libc.setns(fd, 0) == 0:
                gained.append(f"setns {name}")
        # The harness keeps two capabilities to set up each run; the program has none left.
        capabilities = [line for line in open("/proc/self/status") if line.startswith("Cap")]
        gained += [line.strip() for line in capabilities if not line.startswith("CapBnd") and int(line.split()[1], 16)]
        print("contained" if not gained else gained)
        """,
    )
    assert details["verdict"] == "pass", details


def test_limits_cannot_be_lifted(verifier):
    details = run(
        verifier,
        """
        import resource
        lifted = []
        for name in ("RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_NPROC", "RLIMIT_FSIZE", "RLIMIT_NOFILE"):
            limit = getattr(resource, name)
            try:
                resource.setrlimit(limit, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
                lifted.append(name)
            except (ValueError, OSError):
                pass
        print("contained" if not lifted else lifted)
        """,
    )
    assert details["verdict"] == "pass", details


def test_a_program_that_stops_itself_times_out(verifier):
    started = time.monotonic()
    details = run(
        verifier,
        "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)\nprint('contained')",
        time_limit_s=0.5,
    )
    assert details["verdict"] == "timeout", details
    assert time.monotonic() - started < 5
    assert only_warm_harnesses_left(verifier)


# -- reward hacking ---------------------------------------------------------------------------------------


def test_expected_outputs_are_not_in_the_sandbox(verifier):
    token = "expected-" + secrets.token_hex(8)
    details = run(
        verifier,
        """
        import gc
        prefix = "expected-"
        found = [o for o in gc.get_objects() if isinstance(o, str) and o.startswith(prefix) and o != prefix]
        for obj in gc.get_objects():
            if isinstance(obj, dict):
                found += [v for v in obj.values() if isinstance(v, str) and v.startswith(prefix) and v != prefix]
        print(found[0] if found else "not found")
        """,
        expected=token,
    )
    assert details["verdict"] == "wrong_answer", details


def test_forged_protocol_lines_do_not_pass(verifier):
    details = run(
        verifier,
        """
        import json, os
        fake = json.dumps({"i": 0, "status": "ok", "output": "contained"})
        print("0" * 32, fake)
        for fd in range(3, 20):
            try:
                os.write(fd, ("0" * 32 + " " + fake + "\\n").encode())
            except OSError:
                pass
        """,
    )
    assert details["verdict"] == "wrong_answer", details


def test_a_program_cannot_leave_state_for_the_next_one():
    with get_verifier("code", workers=1, time_limit_s=0.5, memory_mb=256, tmpfs_mb=8) as single:
        marker = f"{secrets.randbelow(10**6)}.{secrets.randbelow(10**6)}"
        run(
            single,
            f"""
            import os
            open("/tmp/left-behind", "w").write("x")
            if os.fork() == 0:
                os.setsid()
                os.execv("/bin/sleep", ["sleep", "{marker}"])
            print("contained")
            """,
        )
        details = run(
            single,
            """
            import os
            others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid(), os.getppid())]
            print("contained" if not os.path.exists("/tmp/left-behind") and not others else others)
            """,
        )
        assert details["verdict"] == "pass", details
        assert eventually(lambda: not processes_with(marker))
