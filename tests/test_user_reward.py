"""A user's own reward function (issue 51): `cascade rlvr --reward-func FILE.py:NAME`, OpenRLHF's reward_func
signature, batched. The local engine trains `tiny` on it and the reward rises; under isolation=process a hang
scores 0 and the run goes on; the reward service serves the same function over real HTTP on loopback."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from cascade_cli.engines.local.train.grpo import run_rlvr
from cascade_cli.manifest import read_metrics
from cascade_cli.serve.server import RewardService

sys.path.insert(0, str(Path(__file__).parent))
from service_thread import post_once  # noqa: E402
from test_grpo import toy_config  # noqa: E402

# The toy task's dense reward, written as a user would: the share of the response's characters in the
# label's character set (labels arrive as JSON text, as OpenRLHF's data carries them).
LETTER_REWARD = """
import json

def score(queries, prompts, labels):
    rewards = []
    for query, prompt, label in zip(queries, prompts, labels):
        response = query[len(prompt):]
        allowed = json.loads(label)["answer"]
        rewards.append(sum(ch in allowed for ch in response) / max(len(response), 1))
    return {"rewards": rewards, "scores": rewards, "extra_logs": {}}

def verdicts(queries, prompts, labels):
    rewards = [float(len(query) % 3) for query in queries]
    return {"rewards": rewards, "extra_logs": {"passed": [reward == 2.0 for reward in rewards]}}

def hang(queries, prompts, labels):
    import time
    time.sleep(600)

def crash(queries, prompts, labels):
    raise RuntimeError("my reward broke")
"""


pytestmark = pytest.mark.usefixtures("single_thread")  # conftest.py; `tiny_dir` comes from there too


@pytest.fixture
def reward_file(tmp_path) -> Path:
    path = tmp_path / "my_reward.py"
    path.write_text(LETTER_REWARD)
    return path


def test_tiny_learns_from_a_user_reward_function(tmp_path, tiny_dir, reward_file):
    """The same 8 steps as test_grpo's toy task, the reward now the user's function: it rises clearly."""
    config = toy_config(
        tmp_path, tiny_dir, steps=8, prompts_per_step=4, group_size=8, max_response_len=8, lr=1e-2,
        reward_func=f"{reward_file}:score", report_to=[],
    )  # fmt: skip
    run_rlvr(config)
    rewards = [m["reward_mean"] for m in read_metrics(config.out)]
    assert sum(rewards[-2:]) / 2 > sum(rewards[:2]) / 2 + 0.15, rewards
    assert all(m["verify_errors"] == 0 for m in read_metrics(config.out))


def test_isolation_process_gives_the_same_run_and_survives_a_hang(tmp_path, tiny_dir, reward_file):
    common = dict(steps=2, report_to=[], log_rollouts=0)
    inline = toy_config(tmp_path / "a", tiny_dir, reward_func=f"{reward_file}:score", **common)
    isolated = toy_config(
        tmp_path / "b",
        tiny_dir,
        reward_func=f"{reward_file}:score",
        reward_func_isolation="process",
        **common,
    )
    run_rlvr(inline), run_rlvr(isolated)
    same = ["reward_mean", "reward_std", "pass_rate", "grad_norm"]
    a, b = read_metrics(inline.out), read_metrics(isolated.out)
    assert [[m[k] for k in same] for m in a] == [[m[k] for k in same] for m in b]

    hanging = toy_config(
        tmp_path / "c", tiny_dir, reward_func=f"{reward_file}:hang", reward_func_isolation="process",
        reward_func_timeout_s=2.0, **common,
    )  # fmt: skip
    run_rlvr(hanging)
    metrics = read_metrics(hanging.out)
    assert [m["reward_mean"] for m in metrics] == [0.0, 0.0]
    assert all(m["verify_errors"] == 4 * 4 for m in metrics)  # every rollout of the step, named in a warning


def test_a_failing_function_scores_zero_and_says_why(tmp_path, tiny_dir, reward_file, capsys):
    config = toy_config(
        tmp_path, tiny_dir, steps=1, reward_func=f"{reward_file}:crash", report_to=[], log_rollouts=0
    )
    run_rlvr(config)
    assert read_metrics(config.out)[0]["reward_mean"] == 0.0
    assert "RuntimeError: my reward broke" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nowhere.py:score", "reward_func: nowhere.py: file not found"),
        ("{file}:scor", "no function 'scor' (functions there: score, verdicts, hang, crash)"),
        ("{file}x:score", "expected FILE.py or FILE.py:FUNCTION"),
    ],
)
def test_a_bad_reward_func_is_one_line(cli, tmp_path, reward_file, spec, message):
    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps({"prompt": "Write digits.", "label": {"answer": "0123456789"}}) + "\n")
    result = cli([
        "rlvr", "--domain", "math", "--init", "tiny", "--data", data, "--out", tmp_path / "out",
        "--reward-func", spec.format(file=reward_file), "steps=1",
    ])  # fmt: skip
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())


def test_the_reward_service_serves_the_function_over_http(reward_file):
    body = {
        "query": ["<prompt>abc12", "<prompt>9999"],
        "prompts": ["<prompt>", "<prompt>"],
        "labels": [json.dumps({"answer": "0123456789", "domain": "math"})] * 2,
    }
    reply = post_once(RewardService(reward_func=f"{reward_file}:score"), body)
    assert reply["rewards"] == pytest.approx([0.4, 1.0])
    assert reply["extra_logs"]["passed"] == [1.0, 1.0] and reply["extra_logs"]["verify_error"] == [0.0, 0.0]


def test_the_openrlhf_engine_scores_through_the_service_that_serves_it(cli, tmp_path, reward_file):
    from cascade_cli.config.grpo import RLVRConfig
    from cascade_cli.engines.openrlhf.jobs import rlvr_jobs

    spec = f"{reward_file}:score"
    values = dict(domain="math", init="tiny", data="d.jsonl", out=str(tmp_path / "rl"), engine="openrlhf",
                  prompts_per_step=8, group_size=2, reward_func=spec)  # fmt: skip
    result = cli(["rlvr", "--domain", "math", "--init", "tiny", "--data", "d.jsonl", "--out", tmp_path / "rl",
                  "--engine", "openrlhf", "--reward-func", spec])  # fmt: skip
    assert result.exit_code == 2
    assert f"cascade verify --serve --reward-func {spec}" in " ".join(result.output.split())
    config = RLVRConfig(**values)
    config.cluster.reward_urls = ["http://127.0.0.1:5000/get_reward"]
    (job,) = rlvr_jobs(config)
    assert job.args[job.args.index("--reward.remote_url") + 1] == "http://127.0.0.1:5000/get_reward"
    assert any(f"--reward-func {spec}" in note for note in job.notes)


def test_verdicts_come_from_extra_logs_passed_else_a_positive_reward(reward_file):
    from cascade_cli.serve.user_reward import RewardFunction

    queries, prompts, labels = ["ab", "abc", "abcd"], ["", "", ""], ['{"answer": "a"}'] * 3
    rewards, passed, error = RewardFunction(f"{reward_file}:verdicts")(queries, prompts, labels)
    assert (rewards, passed, error) == ([2.0, 0.0, 1.0], [True, False, False], None)
    isolated = RewardFunction(f"{reward_file}:score", isolation="process")
    try:
        rewards, passed, _ = isolated(["xa1", "x"], ["x", "x"], labels[:2])
    finally:
        isolated.close()
    assert rewards == [0.5, 0.0] and passed == [True, False]
