"""A user's reward function in the code verifier's bubblewrap sandbox (`reward_func_isolation: sandbox`,
issue 51 item 5): the same rewards as in the trainer's process; no host file, environment or network
reaches it; a hang is timed out and the sandbox replaced; bad values are one clear error; imported once in
a warm sandbox; the local engine trains on it and the reward service serves it. Real bwrap (skipped where
bubblewrap cannot run)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
import torch

from cascade_cli.engines.local.train.grpo import run_rlvr
from cascade_cli.errors import CascadeRunError, CascadeUsageError
from cascade_cli.manifest import read_metrics
from cascade_cli.serve.server import RewardService
from cascade_cli.serve.user_reward import RewardFunction
from cascade_cli.verifiers.code.reward_sandbox import SandboxedFunction
from cascade_cli.verifiers.code.sandbox import host_cannot_sandbox

sys.path.insert(0, str(Path(__file__).parent))
from service_thread import post_once  # noqa: E402
from test_grpo import toy_config  # noqa: E402
from test_user_reward import LETTER_REWARD  # noqa: E402

CANNOT_SANDBOX = host_cannot_sandbox()
pytestmark = pytest.mark.skipif(CANNOT_SANDBOX is not None, reason=f"no sandbox here: {CANNOT_SANDBOX}")

# What a reward (or model-written code it runs) might try against the host; each probe's reward is 1 where
# it got through. queries[i] names the probe, labels[i] its target (a path, a port, a variable).
SNOOPING_REWARD = """
import os, socket

def probe(queries, prompts, labels):
    rewards = []
    for what, target in zip(queries, labels):
        try:
            if what == "file":
                print("read:", open(target).read())
            elif what == "listdir":
                print("list:", os.listdir(target))
            elif what == "env":
                print("env:", os.environ[target])
            elif what == "socket":
                with socket.create_connection(("127.0.0.1", int(target)), timeout=2) as sock:
                    sock.sendall(b"leak")
            elif what == "dns":
                socket.getaddrinfo(target, 443)
            rewards.append(1.0)
        except Exception as error:
            print("blocked:", what, type(error).__name__, error)
            rewards.append(0.0)
    return rewards
"""

EDGE_REWARD = """
import json

CALLS = 0

def count(queries, prompts, labels):
    global CALLS
    CALLS += 1
    return [float(CALLS)] * len(queries)

def hang(queries, prompts, labels):
    import time
    if queries[0] == "hang":
        time.sleep(600)
    return [1.0] * len(queries)

def short(queries, prompts, labels):
    return [1.0]

def nan(queries, prompts, labels):
    return [float("nan")] * len(queries)

def words(queries, prompts, labels):
    return ["high"] * len(queries)

def thing(queries, prompts, labels):
    return object()

def tensor(queries, prompts, labels):
    import torch
    return {"rewards": torch.tensor([0.5] * len(queries)), "extra_logs": {"passed": torch.tensor([1.0] * len(queries))}}

def greedy(queries, prompts, labels):
    blob = bytearray(int(queries[0]) << 20)
    return [float(len(blob) > 0)] * len(queries)
"""


@pytest.fixture(autouse=True)
def one_thread(monkeypatch):
    monkeypatch.setenv("CASCADE_THREADS", "1")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def files(tmp_path) -> Path:
    for name, text in (
        ("letters.py", LETTER_REWARD),
        ("snoop.py", SNOOPING_REWARD),
        ("edge.py", EDGE_REWARD),
    ):
        (tmp_path / name).write_text(text)
    return tmp_path


def sandboxed(spec: str, **kwargs) -> RewardFunction:
    return RewardFunction(spec, isolation="sandbox", **kwargs)


QUERIES = ["<p>abc12", "<p>9999", "<p>", "<p>x7"]
PROMPTS = ["<p>"] * 4
LABELS = [json.dumps({"answer": "0123456789", "domain": "math"})] * 4


def test_the_sandbox_gives_the_same_rewards_as_the_trainers_process(files):
    for name in ("score", "verdicts"):
        inline = RewardFunction(f"{files / 'letters.py'}:{name}")(QUERIES, PROMPTS, LABELS)
        function = sandboxed(f"{files / 'letters.py'}:{name}")
        try:
            assert function(QUERIES, PROMPTS, LABELS) == inline
        finally:
            function.close()
    assert inline[2] is None


def test_the_function_sees_no_host_file_environment_or_network(files, tmp_path, monkeypatch, loopback_server):
    secret = tmp_path / "secret.txt"
    secret.write_text("the host's secret")
    monkeypatch.setenv("CASCADE_TEST_SECRET", "the host's secret too")
    port, connections = loopback_server
    probes = [
        ("file", str(secret)),
        ("file", str(files / "letters.py")),  # the reward file's neighbour: only the file itself is bound
        ("file", "/etc/passwd"),
        ("file", __file__),  # the project's own files
        ("listdir", str(tmp_path)),
        ("env", "CASCADE_TEST_SECRET"),
        ("socket", str(port)),
        ("dns", "example.com"),
    ]
    queries, labels = [what for what, _ in probes], [target for _, target in probes]
    spec = f"{files / 'snoop.py'}:probe"
    # In the trainer's process every probe but DNS (no network needed here) gets through: the probes work.
    host_rewards, _, _ = RewardFunction(spec)(queries, [""] * len(probes), labels)
    assert host_rewards[:7] == [1.0] * 7
    deadline = time.monotonic() + 10
    while not connections and time.monotonic() < deadline:  # the listener thread takes it in its own time
        time.sleep(0.05)
    assert len(connections) == 1 and connections[0].recv(16) == b"leak"
    function = sandboxed(spec)
    try:
        rewards, passed, error = function(queries, [""] * len(probes), labels)
    finally:
        function.close()
    assert error is None
    assert rewards == [0.0] * len(probes) and passed == [False] * len(probes)
    assert len(connections) == 1  # nothing more arrived from the sandbox


def test_a_hang_is_timed_out_and_the_next_batch_gets_a_new_sandbox(files):
    function = sandboxed(f"{files / 'edge.py'}:hang", timeout_s=2.0)
    try:
        rewards, passed, error = function(["hang", "b"], ["", ""], [None, None])
        assert rewards == [0.0, 0.0] and passed == [False, False]
        assert error == (
            f"{files / 'edge.py'}:hang took over 2s in the sandbox (reward_func_timeout_s; the sandbox was replaced)"
        )
        assert function(["a", "b"], ["", ""], [None, None]) == ([1.0, 1.0], [True, True], None)
    finally:
        function.close()


def test_the_file_is_imported_once_and_keeps_its_state_across_batches(files):
    function = sandboxed(f"{files / 'edge.py'}:count")
    try:
        assert [function(["a"], [""], [None])[0] for _ in range(3)] == [[1.0], [2.0], [3.0]]
    finally:
        function.close()


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("short", "edge.py:short returned 1 values for 2 queries; expected 2 numbers"),
        ("nan", "edge.py:nan returned a reward that is not finite: nan"),
        ("words", "edge.py:words returned a reward that is not a number: ['high', 'high']"),
        ("thing", "edge.py:thing returned object for 2 queries; expected 2 numbers"),
    ],
)
def test_bad_values_are_a_clear_error_naming_the_file_and_function(files, name, message):
    function = sandboxed(f"{files / 'edge.py'}:{name}")
    try:
        rewards, passed, error = function(["a", "b"], ["", ""], [None, None])
    finally:
        function.close()
    assert rewards == [0.0, 0.0] and passed == [False, False]
    assert str(files) in error and message in error


def test_tensors_come_back_as_plain_numbers_and_memory_is_limited(files):
    function = sandboxed(f"{files / 'edge.py'}:tensor")
    try:
        assert function(["a", "b"], ["", ""], [None, None]) == ([0.5, 0.5], [True, True], None)
    finally:
        function.close()
    function = sandboxed(f"{files / 'edge.py'}:greedy", memory_mb=512)
    try:
        assert function(["16"], [""], [None]) == ([1.0], [True], None)
        rewards, _, error = function(["1024"], [""], [None])
        assert rewards == [0.0] and "MemoryError: over the sandbox's memory limit (512 MiB)" in error
        assert function(["16"], [""], [None])[0] == [1.0]  # the sandbox goes on
    finally:
        function.close()


def test_an_import_error_or_a_missing_function_is_one_line(files, tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("import not_a_module_anywhere\n")
    with pytest.raises(CascadeUsageError, match=r"failed to import in the sandbox \(ModuleNotFoundError"):
        sandboxed(f"{broken}:score")
    with pytest.raises(CascadeUsageError, match=r"no function 'scor' \(functions there: score, verdicts"):
        sandboxed(f"{files / 'letters.py'}:scor")


def test_without_bwrap_the_sandbox_is_refused_not_skipped(files):
    for bwrap in ("/nonexistent/bwrap", "/bin/false"):
        with pytest.raises(CascadeRunError, match="reward_func_isolation=process"):
            SandboxedFunction(files / "letters.py", "score", bwrap=bwrap)


def test_the_cli_shows_the_choice_and_a_bad_one_is_one_line(cli, files, tmp_path):
    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps({"prompt": "Write digits.", "label": {"answer": "0123456789"}}) + "\n")
    base = ["rlvr", "--domain", "math", "--init", "tiny", "--data", data, "--out", tmp_path / "out"]
    help_text = " ".join(cli(["rlvr", "--help"]).output.split())
    assert "sandbox: in the code verifier's bubblewrap sandbox" in help_text
    assert "reward_func_isolation=sandbox" in help_text
    result = cli([*base, "--reward-func", f"{files / 'letters.py'}:scor", "reward_func_isolation=sandbox"])
    assert result.exit_code == 2, result.output
    assert "no function 'scor'" in " ".join(result.output.split()) and "Traceback" not in result.output
    result = cli([*base, "--reward-func", f"{files / 'letters.py'}:score", "reward_func_isolation=jail"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "reward_func_isolation: expected one of none, process, sandbox; found 'jail'" in result.output


def test_the_reward_service_serves_the_sandboxed_function(files):
    service = RewardService(reward_func=f"{files / 'letters.py'}:score", reward_func_isolation="sandbox")
    reply = post_once(service, {"query": QUERIES[:2], "prompts": PROMPTS[:2], "labels": LABELS[:2]})
    assert reply["rewards"] == pytest.approx([0.4, 1.0])
    assert reply["extra_logs"]["verify_error"] == [0.0, 0.0]


def test_tiny_learns_from_a_sandboxed_reward(tmp_path, tiny_dir, files):
    """test_user_reward's 8 toy steps, the function in the sandbox: the same run as in-process, reward rising."""
    common = dict(steps=8, prompts_per_step=4, group_size=8, max_response_len=8, lr=1e-2, report_to=[])
    spec = f"{files / 'letters.py'}:score"
    inline = toy_config(tmp_path / "a", tiny_dir, reward_func=spec, **common)
    isolated = toy_config(
        tmp_path / "b", tiny_dir, reward_func=spec, reward_func_isolation="sandbox", **common
    )
    run_rlvr(inline), run_rlvr(isolated)
    same = ["reward_mean", "reward_std", "pass_rate", "grad_norm"]
    a, b = read_metrics(inline.out), read_metrics(isolated.out)
    assert [[m[k] for k in same] for m in a] == [[m[k] for k in same] for m in b]
    rewards = [m["reward_mean"] for m in b]
    assert sum(rewards[-2:]) / 2 > sum(rewards[:2]) / 2 + 0.15, rewards
    assert all(m["verify_errors"] == 0 for m in b)


def test_the_openrlhf_engine_says_to_serve_it_sandboxed(tmp_path, files):
    from cascade_cli.config.grpo import RLVRConfig
    from cascade_cli.engines.openrlhf.jobs import rlvr_jobs

    spec = f"{files / 'letters.py'}:score"
    values = dict(domain="math", init="tiny", data="d.jsonl", out=str(tmp_path / "rl"), engine="openrlhf",
                  prompts_per_step=8, group_size=2, reward_func=spec, reward_func_isolation="sandbox")  # fmt: skip
    config = RLVRConfig(**values)
    with pytest.raises(
        CascadeUsageError, match="--reward-func-isolation sandbox` and set cluster.reward_urls"
    ):
        config.check()
    config.cluster.reward_urls = ["http://127.0.0.1:5000/get_reward"]
    (job,) = rlvr_jobs(config)
    assert any(f"--reward-func {spec} --reward-func-isolation sandbox" in note for note in job.notes)


def test_site_packages_are_bound_after_the_tmpfs_that_could_hide_them(files):
    """A venv under /tmp (a CI clone, a scratch checkout) stays importable: bwrap mounts in argv order, so a
    site-packages bind must come after the tmpfs mounted at the sandbox's /tmp."""
    from cascade_cli.verifiers.code.reward_sandbox import RewardSandboxSpec, site_dirs
    from cascade_cli.verifiers.code.sandbox import SANDBOX_WORKDIR

    spec = RewardSandboxSpec(str(files / "letters.py"))
    argv, _ = spec.argv()
    tmpfs_at = next(i for i in range(len(argv) - 1) if argv[i] == "--tmpfs" and argv[i + 1] == SANDBOX_WORKDIR)
    binds = [i for i in range(len(argv) - 2) if argv[i] == "--ro-bind" and argv[i + 1] in site_dirs()]
    assert binds and min(binds) > tmpfs_at  # this venv lies outside the runtime: it is bound
    assert spec.bound_site_dirs() == [argv[i + 1] for i in binds]
