"""Every run of a program in the code sandbox starts fresh: its own network namespace (loopback only), its own
/tmp, /dev/shm and IPC objects, no process, file or environment change left by the run before it in the same
warm worker. Real bubblewrap sandboxes, real programs; each test checks the verdicts the verifier gives.

A run is one execution of a program on one test input, so the tests of one program are runs of their own too.
"""

from __future__ import annotations

import secrets
import textwrap
import time
from pathlib import Path

import pytest

from cascade_cli.verifiers import get_verifier
from cascade_cli.verifiers.base import Score
from cascade_cli.verifiers.batch import score_with
from cascade_cli.verifiers.code.sandbox import host_cannot_sandbox

CANNOT_SANDBOX = host_cannot_sandbox()
pytestmark = pytest.mark.skipif(CANNOT_SANDBOX is not None, reason=f"no sandbox here: {CANNOT_SANDBOX}")

# The shape of a reference solution that broke the verifier: an HTTP server on a fixed port in a thread,
# fetched over loopback by both names. Its closed connections sit in TIME_WAIT on the port after it exits,
# so the next bind of that port fails in any network namespace the run shares with the one before.
HTTP_SERVER_PROGRAM = """
import http.server, socketserver, threading, time, urllib.request

PORT, SLEEP_S = 8000, 1.0

class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

def serve():
    with socketserver.TCPServer(("", PORT), Hello) as server:
        server.serve_forever()

threading.Thread(target=serve, daemon=True).start()
time.sleep(SLEEP_S)
replies = [urllib.request.urlopen(f"http://{host}:{PORT}/", timeout=5).read() for host in ("127.0.0.1", "localhost")]
print("Test Passed" if replies == [b"hello", b"hello"] else replies)
"""


def http_server_record(sleep_s: float = 1.0, tests: int = 1) -> dict:
    program = HTTP_SERVER_PROGRAM.replace("SLEEP_S = 8000, 1.0", f"SLEEP_S = 8000, {sleep_s}")
    assert f"SLEEP_S = 8000, {sleep_s}" in program
    return record(program, ["Test Passed"] * tests)


def record(program: str, outputs: list[str], inputs: list[str] | None = None) -> dict:
    inputs = inputs if inputs is not None else [""] * len(outputs)
    return {
        "response": "```python\n" + textwrap.dedent(program).strip() + "\n```",
        "label": {"kind": "stdio", "inputs": inputs, "outputs": outputs},
    }


def verdicts(scores: list[Score]) -> list[str]:
    return [score.details["verdict"] for score in scores]


def failures(scores: list[Score]) -> list[dict]:
    return [score.details for score in scores if not score.passed]


# -- network ------------------------------------------------------------------------------------------------


def test_one_port_bound_by_three_programs_in_a_row_in_one_worker():
    with get_verifier("code", workers=1, time_limit_s=3.0) as verifier:
        scores = score_with(verifier, [http_server_record()] * 3)
    assert verdicts(scores) == ["pass"] * 3, failures(scores)


def test_one_port_bound_by_four_programs_at_once_in_four_workers():
    with get_verifier("code", workers=4, time_limit_s=3.0) as verifier:
        started = time.monotonic()
        scores = score_with(verifier, [http_server_record(sleep_s=2.0)] * 4)
        elapsed = time.monotonic() - started
    assert verdicts(scores) == ["pass"] * 4, failures(scores)
    # Each program holds the port for 2 s: one after another they would take 8 s, so they overlapped.
    assert elapsed < 8.0, elapsed


def test_one_port_bound_by_every_test_of_one_program():
    with get_verifier("code", workers=1, time_limit_s=3.0) as verifier:
        score = verifier.score(http_server_record(tests=3))
    assert score.details["tests"] == ["pass"] * 3, score.details


# A TCP connection to itself, closed: the port stays in TIME_WAIT after the run's processes are gone.
TIME_WAIT_SNIPPET = textwrap.dedent("""
    import socket
    listener = socket.create_server(("127.0.0.1", 8001))
    client = socket.create_connection(("127.0.0.1", 8001))
    accepted, _ = listener.accept()
    accepted.close()  # the closing side holds the port in TIME_WAIT
    client.close()
    listener.close()
    """)


def test_each_run_starts_with_only_an_empty_loopback():
    """No socket of any kind (TCP in TIME_WAIT, UDP, unix, abstract) from the run before; one interface, lo."""
    program = textwrap.dedent("""
        import os, socket
        def entries(table):  # a table the kernel lacks (no IPv6) is empty too
            if not os.path.exists(f"/proc/net/{table}"):
                return 0
            with open(f"/proc/net/{table}") as rows:
                return len(rows.readlines()) - 1
        seen = {table: entries(table) for table in ("tcp", "tcp6", "udp", "udp6", "unix")}
        seen["interfaces"] = [name for _, name in socket.if_nameindex()]
        """) + TIME_WAIT_SNIPPET + textwrap.dedent("""
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM).bind(("127.0.0.1", 8002))
        socket.socket(socket.AF_UNIX).bind("\\0cascade-left-behind")
        print(seen)
        """)
    fresh = "{'tcp': 0, 'tcp6': 0, 'udp': 0, 'udp6': 0, 'unix': 0, 'interfaces': ['lo']}"
    with get_verifier("code", workers=1, time_limit_s=2.0) as verifier:
        scores = score_with(verifier, [record(program, [fresh, fresh])] * 2)
    assert verdicts(scores) == ["pass"] * 2, failures(scores)


# The run's network namespace, as the program sees it (the output of a wrong answer comes back in details).
NAMESPACE_PROGRAM = "import os\nprint(os.readlink('/proc/self/ns/net'))\n"
TIME_WAIT_PROGRAM = NAMESPACE_PROGRAM + TIME_WAIT_SNIPPET


def test_a_network_namespace_is_kept_only_while_no_run_left_a_socket_in_it():
    """Making a network namespace per run is the dearest part of a fresh run: one a run left empty is kept."""
    runs = [NAMESPACE_PROGRAM, NAMESPACE_PROGRAM, TIME_WAIT_PROGRAM, NAMESPACE_PROGRAM, NAMESPACE_PROGRAM]
    with get_verifier("code", workers=1, time_limit_s=3.0) as verifier:
        scores = score_with(verifier, [record(program, ["not this"]) for program in runs])
    namespaces = [score.details["output_head"].strip() for score in scores]
    assert all(name.startswith("net:[") for name in namespaces), namespaces
    assert namespaces[0] == namespaces[1] == namespaces[2], namespaces
    assert namespaces[3] != namespaces[2], "the run after a TIME_WAIT shared its namespace"
    assert namespaces[3] == namespaces[4], namespaces


def test_assert_runs_see_no_socket_of_the_harness():
    """The judge's socket to the harness lives in a network namespace no run is forked into."""
    program = """
        def unix_sockets():
            with open("/proc/net/unix") as rows:
                return len(rows.readlines()) - 1
        """
    label = {"kind": "assert", "entry_point": "unix_sockets",
             "test": "def check(candidate):\n    assert candidate() == 0\n"}  # fmt: skip
    response = "```python\n" + textwrap.dedent(program).strip() + "\n```"
    with get_verifier("code", workers=1, time_limit_s=3.0) as verifier:
        scores = score_with(verifier, [{"response": response, "label": label}] * 3)
    assert verdicts(scores) == ["pass"] * 3, failures(scores)


# -- files, IPC, processes, environment -------------------------------------------------------------------------


def test_files_left_in_tmp_shm_and_the_work_dir_are_gone_in_the_next_run():
    program = """
        import glob, os
        leftovers = sorted(glob.glob("/tmp/*") + glob.glob("/dev/shm/*") + glob.glob("*") + glob.glob(".*"))
        for directory in ("/tmp", "/dev/shm", "."):
            with open(os.path.join(directory, "left-behind"), "w") as file:
                file.write("from an earlier run")
        os.makedirs("nested/deeper")
        os.chmod("nested", 0)
        print(leftovers or "clean")
        """
    with get_verifier("code", workers=1, time_limit_s=2.0, tmpfs_mb=8) as verifier:
        scores = score_with(verifier, [record(program, ["clean", "clean"])] * 3)
    assert verdicts(scores) == ["pass"] * 3, failures(scores)


def test_ipc_objects_left_by_one_run_are_gone_in_the_next():
    """System V shared memory, semaphores and message queues outlive their process: not their run."""
    program = """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        KEY, IPC_CREAT, IPC_EXCL = 0x5EED, 0o1000, 0o2000
        getters = {"shm": lambda flags: libc.shmget(KEY, 4096, flags),
                   "sem": lambda flags: libc.semget(KEY, 1, flags),
                   "msg": lambda flags: libc.msgget(KEY, flags)}
        found = [name for name, get in getters.items() if get(0o600) >= 0]
        made = [name for name, get in getters.items() if get(IPC_CREAT | IPC_EXCL | 0o600) >= 0]
        print(found or "clean", made)
        """
    expected = "clean ['shm', 'sem', 'msg']"
    with get_verifier("code", workers=1, time_limit_s=2.0) as verifier:
        scores = score_with(verifier, [record(program, [expected, expected])] * 2)
    assert verdicts(scores) == ["pass"] * 2, failures(scores)


def test_a_background_process_does_not_outlive_its_run():
    marker = f"{secrets.randbelow(10**6)}.{secrets.randbelow(10**6)}"
    program = f"""
        import os, sys
        others = [pid for pid in os.listdir("/proc") if pid.isdigit() and int(pid) not in (1, os.getpid())]
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:  # a daemon: out of the run's process group, reparented to init
                os.execv("/bin/sleep", ["sleep", "{marker}"])
            os._exit(0)
        os.wait()
        print(others or "alone")
        """
    with get_verifier("code", workers=1, time_limit_s=2.0) as verifier:
        scores = score_with(verifier, [record(program, ["alone", "alone"])] * 2)
        daemons = [pid for pid in Path("/proc").iterdir() if pid.name.isdigit() and marker in _cmdline(pid)]
    assert verdicts(scores) == ["pass"] * 2, failures(scores)
    assert daemons == []


def _cmdline(pid: Path) -> str:
    try:
        return (pid / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def test_environment_changes_do_not_carry_over():
    program = """
        import os
        changed = [name for name in ("LEFT_BEHIND", "PATH", "HOME") if os.environ.get(name, "") == "/nowhere"]
        changed += [name for name in ("LEFT_BEHIND",) if name in os.environ]
        os.environ["LEFT_BEHIND"] = "/nowhere"
        os.environ["HOME"] = "/nowhere"
        os.putenv("PATH", "/nowhere")
        print(changed or "clean")
        """
    with get_verifier("code", workers=1, time_limit_s=2.0) as verifier:
        scores = score_with(verifier, [record(program, ["clean", "clean"])] * 2)
    assert verdicts(scores) == ["pass"] * 2, failures(scores)
