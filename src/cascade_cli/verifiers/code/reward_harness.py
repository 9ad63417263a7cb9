"""A user's reward function, served INSIDE the code verifier's sandbox (stdlib only; never imports cascade_cli).

reward_sandbox.py starts it in bubblewrap. It reads a setup frame (the reward file's path in the sandbox, the
function's name, the site-packages directories, the limits), applies the limits, imports the file once and
answers `<nonce> {"ready": ...}`; then for each frame (one batch: queries, prompts, labels) it calls the
function and answers with the rewards as plain JSON values (numbers, or the name of what came instead). The
host validates them; nothing but JSON leaves the sandbox. Frames are a 10-digit length and that many bytes.

The protocol keeps its own copies of fds 0 and 1: the function reads /dev/null as stdin, and what it prints
goes to stderr (the host keeps its tail for error messages), so no print can break or fake an answer line.
"""

import builtins
import contextlib
import importlib.util
import json
import os
import resource
import sys

FRAME_DIGITS = 10
MODULE_NAME = "cascade_user_reward"

PROTOCOL_IN, PROTOCOL_OUT = os.dup(0), os.dup(1)
_null = os.open(os.devnull, os.O_RDONLY)
os.dup2(_null, 0)
os.dup2(2, 1)
os.close(_null)


def _site_exit(code: object = None) -> None:
    raise SystemExit(code)


# `python -S` skips site, which is what defines exit() and quit().
builtins.exit = builtins.quit = _site_exit


def read_frame() -> bytes:
    return _read_exactly(int(_read_exactly(FRAME_DIGITS)))


def _read_exactly(size: int) -> bytes:
    chunks, got = [], 0
    while got < size:
        chunk = os.read(PROTOCOL_IN, min(size - got, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def send(nonce: str, message: dict) -> None:
    view = memoryview((nonce + " " + json.dumps(message) + "\n").encode())
    while view:
        view = view[os.write(PROTOCOL_OUT, view) :]


def apply_limits(limits: dict) -> None:
    memory = int(limits["memory_bytes"])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    for limit, key in ((resource.RLIMIT_NPROC, "nproc"), (resource.RLIMIT_NOFILE, "nofile")):
        value = int(limits[key])
        resource.setrlimit(limit, (value, value))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}".rstrip(": ")


def load(path: str, name: str):
    """The function, or a message saying why not (the host turns it into one line)."""
    spec = importlib.util.spec_from_file_location(MODULE_NAME, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE_NAME] = module  # dataclasses and pickle look the module up by name
    spec.loader.exec_module(module)
    function = getattr(module, name, None)
    if callable(function):
        return function, None
    found = [n for n, v in vars(module).items() if callable(v) and not n.startswith("_")]
    return None, found


def plain(value: object) -> object:
    """One reward or verdict as a JSON value: a number, bool, string or None as itself (a 0-d tensor or a
    numpy scalar by its item()); anything else by its type's name, in angle brackets."""
    if not isinstance(value, (int, float)) and hasattr(value, "item"):
        with contextlib.suppress(Exception):
            value = value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return f"<{type(value).__name__}>"


def plain_list(values: object) -> tuple[object, str]:
    """(the values as a JSON list, or None; the type's name when they are not a list)"""
    if hasattr(values, "tolist"):  # a tensor or an array
        values = values.tolist()
    if isinstance(values, (list, tuple)):
        return [plain(value) for value in values], ""
    return None, type(values).__name__


def call(function, batch: dict, memory_mb: int) -> dict:
    try:
        result = function(batch["queries"], batch["prompts"], batch["labels"])
        rewards = result.get("rewards") if isinstance(result, dict) else result
        logs = result.get("extra_logs") if isinstance(result, dict) else None
        values, found = plain_list(rewards)
        passed = plain_list(logs["passed"])[0] if isinstance(logs, dict) and "passed" in logs else None
        return {"rewards": values, "found": found, "passed": passed}
    except MemoryError:
        return {"error": f"MemoryError: over the sandbox's memory limit ({memory_mb} MiB)"}
    except BaseException as error:  # the user's code: any failure is its batch's error, the sandbox goes on
        import traceback

        traceback.print_exc()
        return {"error": describe(error)}


def main() -> None:
    setup = json.loads(read_frame())
    nonce = setup["nonce"]
    memory_mb = int(setup["limits"]["memory_bytes"]) >> 20
    sys.path[:0] = setup["paths"]
    try:
        apply_limits(setup["limits"])
        function, found = load(setup["file"], setup["name"])
    except BaseException as error:
        send(nonce, {"ready": False, "error": describe(error)})
        return
    if function is None:
        send(nonce, {"ready": False, "functions": found})
        return
    send(nonce, {"ready": True})
    while True:
        try:
            batch = json.loads(read_frame())
        except EOFError:
            return
        send(nonce, call(function, batch, memory_mb))


if __name__ == "__main__":
    main()
