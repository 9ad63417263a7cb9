"""`cascade` as a real process of its own, without paying for its imports every time (no tests here).

The resume tests kill the CLI with SIGKILL and run it again, dozens of times; a fresh interpreter spends most
of a tiny stage's run importing torch and transformers (~4 s of CPU each). `run(argv, env)` instead asks a
zygote, a Python process that imported the CLI and the trainers once, to fork a child for the command: the
child takes the command's environment, writes its stdout and stderr to files and runs the real `cascade` (or
`test_grpo_support.cli_main`); a kill is a real kill of that child. The zygote only ever imports, so the fork
is safe (torch starts no threads until it computes). It serves one pytest process and ends with it.

What the zygote imported was set up by its own environment: tests that change import-time settings
(PYTHONPATH, CASCADE_CACHE, OMP_* ...) or check what a command imports start a fresh interpreter instead.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ZYGOTE = r"""
import json, os, sys, traceback
import torch, transformers  # noqa: F401  (the imports every training command pays for)
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationMixin  # noqa: F401
import cascade_cli.cli, test_grpo_support  # noqa: E401
for line in sys.stdin:
    job = json.loads(line)
    pid = os.fork()
    if pid == 0:  # the command: its own environment, folder and output files, then the real CLI
        code = 1
        try:
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            for fd, path in ((1, job["stdout"]), (2, job["stderr"])):
                os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
            os.environ.clear()
            os.environ.update(job["env"])
            os.chdir(job["cwd"])
            sys.argv = ["cascade", *job["argv"]]
            try:
                (test_grpo_support.cli_main if job["entry"] == "cli_main" else cascade_cli.cli.main)()
                code = 0
            except SystemExit as done:
                code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    sys.stdout.write(json.dumps({"returncode": returncode}) + "\n")
    sys.stdout.flush()
"""

_zygote: subprocess.Popen | None = None


def _start() -> subprocess.Popen:
    global _zygote
    if _zygote is None or _zygote.poll() is not None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "COLUMNS": "200"}
        _zygote = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True,
            cwd=str(Path(__file__).parent), start_new_session=True,  # its own group: the commands go with it
        )  # fmt: skip
        atexit.register(_stop, _zygote)
    return _zygote


def _stop(zygote: subprocess.Popen) -> None:
    """End the zygote with its input; it has no command running once the last `run` returned."""
    zygote.stdin.close()
    try:
        zygote.wait(timeout=30)
    except subprocess.TimeoutExpired:
        zygote.kill()
        zygote.wait()


def run(argv: list[str], env: dict[str, str], *, entry: str = "cascade", cwd: str | Path | None = None,
        ) -> subprocess.CompletedProcess:  # fmt: skip
    """`cascade ARGV` (entry "cascade") or `test_grpo_support.cli_main()` (entry "cli_main") in a forked child
    with environment `env`: its returncode (-9 when SIGKILLed), stdout and stderr."""
    zygote = _start()
    with tempfile.TemporaryDirectory(prefix="cascade-fork-") as folder:
        out, err = Path(folder) / "stdout", Path(folder) / "stderr"
        job = {"argv": [str(a) for a in argv], "env": env, "entry": entry, "stdout": str(out), "stderr": str(err),
               "cwd": str(cwd or os.getcwd())}  # fmt: skip
        try:
            zygote.stdin.write(json.dumps(job) + "\n")
            zygote.stdin.flush()
            reply = zygote.stdout.readline()
            if not reply:
                raise RuntimeError("the cascade zygote ended")
        except BaseException:  # a timeout in the middle of a command: it ends, the next one gets a fresh zygote
            os.killpg(zygote.pid, signal.SIGKILL)
            zygote.wait()
            raise
        returncode = json.loads(reply)["returncode"]
        return subprocess.CompletedProcess(argv, returncode, out.read_text(), err.read_text())
