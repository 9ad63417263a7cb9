"""cascade's OpenRLHF agent file (`--train.agent_func_path`), run by OpenRLHF 0.11.2's own code: the file is
loaded by `_load_agent_executor` and driven by `RolloutRayActor.generate_responses` (both compiled from the
installed source; their modules import ray/vLLM at the top), our executor subclasses OpenRLHF's
`MultiTurnAgentExecutor`, and the outputs become `Experience`s through `_process_response_into_experience`.
The reward service is real, on loopback. A STAND-IN plays vLLM: `StandInEngine.generate` returns fixed tokens
per prompt (cut at max_tokens with finish_reason "length"), and records the sampling params it was given.
"""

from __future__ import annotations

import ast
import asyncio
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from cascade_cli import verifiers
from cascade_cli.engines.openrlhf import agent_file
from cascade_cli.serve.server import RewardService

sys.path.insert(0, str(Path(__file__).parent))
import echo_verifier  # noqa: E402
from openrlhf_peers import _openrlhf_file, byte_tokenizer, openrlhf_method, process_response_into_experience  # noqa: E402
from service_thread import ServiceThread  # noqa: E402

PROMPT_A = "<|im_start|>user\nSay yes /no_think<|im_end|>\n<|im_start|>assistant\n"
PROMPT_B = "<|im_start|>user\nSay a long no /no_think<|im_end|>\n<|im_start|>assistant\n"


@dataclass
class Sampling:
    """The fields of vLLM's SamplingParams that OpenRLHF's executors and ours read or set."""

    max_tokens: int | None = None
    logprobs: int | None = None
    top_k: int = -1
    top_p: float = 1.0
    temperature: float = 1.0


class StandInEngine:
    """Stands in for the vLLM actor (`RolloutRayActor`): `generate` returns fixed tokens per prompt."""

    def __init__(self, tokenizer, responses: dict[str, list[str]], executor) -> None:
        self.tokenizer, self.responses, self.executor = tokenizer, responses, executor
        self.seen: list[Sampling] = []
        self.turn: dict[str, int] = {}

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        self.seen.append(sampling_params)
        prompt = self.tokenizer.decode(prompt_token_ids, skip_special_tokens=False)
        index = self.turn.get(prompt, 0)
        self.turn[prompt] = index + 1
        full = self.tokenizer(text=self.responses[prompt][index], add_special_tokens=False)["input_ids"]
        ids = full[: sampling_params.max_tokens]
        await asyncio.sleep(0.01 * index)  # samples finish at different times
        output = SimpleNamespace(
            token_ids=ids,
            text=self.tokenizer.decode(ids, skip_special_tokens=False),
            finish_reason="stop" if len(ids) == len(full) else "length",
            logprobs=None,
        )
        return SimpleNamespace(outputs=[output])


def load_agent_executor(path: Path):
    """OpenRLHF's `_load_agent_executor(agent_func_path)` (trainer/ray/vllm_engine.py), compiled from source."""
    source = _openrlhf_file("openrlhf.trainer.ray.vllm_engine")
    tree = ast.parse(source.read_text())
    (node,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_load_agent_executor"]
    from openrlhf.utils.agent import AgentExecutorBase

    scope = {"AgentExecutorBase": AgentExecutorBase}
    exec(compile(ast.Module(body=[node], type_ignores=[]), str(source), "exec"), scope)
    return scope["_load_agent_executor"](str(path))


@pytest.fixture(scope="module")
def live():
    verifiers.register("echo", echo_verifier.TARGET)
    service = ServiceThread(RewardService(workers=1, timeout_s=60.0, registrations={"echo": echo_verifier.TARGET}))
    yield service
    service.close()
    verifiers._REGISTRY.pop("echo", None)


def label(expected: str, prompt_id: int) -> str:
    return json.dumps({"domain": "echo", "expected": expected, "prompt_id": prompt_id})


def rollout(path: Path, cases: list[tuple[str, str, list[str]]], max_new_tokens: int):
    """Each (prompt, label, responses) as OpenRLHF's actor runs it: generate_responses with n samples."""
    tokenizer = byte_tokenizer()
    executor = load_agent_executor(path)
    engine = StandInEngine(tokenizer, {prompt: responses for prompt, _, responses in cases}, executor)
    generate_responses = openrlhf_method(
        "openrlhf.trainer.ray.vllm_engine", "RolloutRayActor", "generate_responses", {"asyncio": asyncio}
    )

    async def main():
        return await asyncio.gather(
            *[
                generate_responses(
                    engine, prompt, lab, Sampling(max_tokens=max_new_tokens, top_p=0.95), 4096, tokenizer,
                    num_samples=len(responses),
                )
                for prompt, lab, responses in cases
            ]
        )

    return asyncio.run(main()), engine


def export(tmp_path: Path, url: str, **settings) -> Path:
    base = {"reward_urls": [url], "top_k": 20, "top_p": 0.9, "overlong_filter": True, "reward_options": {},
            "outcomes_dir": str(tmp_path / "outcomes")}
    return agent_file.export(tmp_path / "agent.py", {**base, **settings})


def test_agent_samples_with_top_k_masks_truncated_and_scores_each_group_once(tmp_path, live):
    path = export(tmp_path, live.url)
    requests_before = live.service.requests
    cases = [
        (PROMPT_A, label("yes", 0), ["yes<|im_end|>", "no<|im_end|>", "yes<|im_end|>"]),
        (PROMPT_B, label("no", 1), ["no<|im_end|>", "n" + "o" * 40 + "<|im_end|>", "no<|im_end|>"]),
    ]
    (group_a, group_b), engine = rollout(path, cases, max_new_tokens=12)

    assert {(s.top_k, s.top_p) for s in engine.seen} == {(20, 0.9)}
    assert all(s.max_tokens <= 12 for s in engine.seen)
    assert live.service.requests - requests_before == 2  # one request per prompt's group of 3
    assert [r["reward"] for r in group_a] == [1.0, 0.0, 1.0]
    assert [r["truncated"] for r in group_b] == [False, True, False]
    assert [r["reward"] for r in group_b] == [1.0, 0.0, 1.0]
    # the truncated response keeps no action range: OpenRLHF's loss mask for it is all zero
    assert group_b[1]["action_ranges"] == [] and all(len(r["action_ranges"]) == 1 for r in group_a)
    to_experience = process_response_into_experience()
    masks = [to_experience(r, max_len=4096).action_mask.sum().item() for r in group_b]
    assert masks[1] == 0 and masks[0] > 0 and masks[2] > 0

    outcomes = [json.loads(line) for f in (tmp_path / "outcomes").glob("*.jsonl") for line in f.read_text().splitlines()]
    by_prompt = {pid: sorted(o["passed"] for o in outcomes if o["prompt_id"] == pid) for pid in (0, 1)}
    assert by_prompt == {0: [False, True, True], 1: [False, True, True]}


def test_without_overlong_filter_a_truncated_response_stays_in_the_loss(tmp_path, live):
    path = export(tmp_path, live.url, overlong_filter=False, top_k=-1, outcomes_dir=None)
    cases = [(PROMPT_B, label("no", 1), ["no<|im_end|>", "n" + "o" * 40 + "<|im_end|>"])]
    ((group,), engine) = rollout(path, cases, max_new_tokens=12)
    assert {s.top_k for s in engine.seen} == {-1}  # -1: the stage sets no top-k; vLLM's default stays
    assert [r["truncated"] for r in group] == [False, True]
    assert group[1]["action_ranges"] == [(group[1]["action_ranges"][0][0], len(group[1]["observation_tokens"]))]
    assert not (tmp_path / "outcomes").exists()


def test_a_protocol_error_fails_the_rollout_instead_of_a_silent_reward(tmp_path, live):
    path = export(tmp_path, live.url)
    cases = [(PROMPT_A, json.dumps({"domain": "nosuch", "prompt_id": 0}), ["yes<|im_end|>", "no<|im_end|>"])]
    with pytest.raises(ValueError, match="unknown domain 'nosuch'"):
        rollout(path, cases, max_new_tokens=12)


def test_exported_file_is_what_openrlhf_loads(tmp_path):
    path = agent_file.export(tmp_path / "a.py", {"reward_urls": ["http://h:1/get_reward"], "top_k": 5})
    text = path.read_text()
    assert "--train.agent_func_path" in text and "AgentExecutor" in text
    from openrlhf.utils.agent import MultiTurnAgentExecutor

    assert isinstance(load_agent_executor(path), MultiTurnAgentExecutor)
    with pytest.raises(Exception, match="must end in .py"):
        agent_file.export(tmp_path / "a.txt", {})


def test_cli_exports_the_agent_file(tmp_path, cli):
    path = tmp_path / "agent.py"
    result = cli(["verify", "--export-agent", path, "--reward-url", "http://10.0.0.5:5000/get_reward", "--top-k", "20",
                  "--overlong-filter"])
    assert result.exit_code == 0 and "--train.agent_func_path" in result.output
    load_agent_executor(path)
    from cascade_cli.engines.openrlhf import agent

    assert (agent._settings.top_k, agent._settings.overlong_filter, agent._settings.top_p) == (20, True, None)
    assert agent._settings.reward_urls == ["http://10.0.0.5:5000/get_reward"]
    missing = cli(["verify", "--export-agent", path])
    assert missing.exit_code == 2 and "--reward-url" in missing.output


def test_a_reward_func_file_serves_the_agent_too(tmp_path, live):
    """cluster.reward_urls may name a reward_func .py file (`cascade verify --export-reward-func`): the agent
    calls it in a thread with the whole group, as OpenRLHF's own executor would one sample at a time."""
    from cascade_cli.serve import reward_func

    shim = reward_func.export(tmp_path / "reward.py", workers=1, timeout_s=60.0)
    path = export(tmp_path, str(shim), outcomes_dir=None)
    cases = [(PROMPT_A, label("yes", 0), ["yes<|im_end|>", "no<|im_end|>"])]
    try:
        ((group,), _) = rollout(path, cases, max_new_tokens=12)
    finally:
        reward_func.configure()  # stop its worker pool
    assert [r["reward"] for r in group] == [1.0, 0.0]


def test_the_agent_reaches_a_token_protected_service_with_the_token_from_its_environment(tmp_path, monkeypatch):
    from cascade_cli.serve.auth import TOKEN_REF, url_with_token_ref
    from cascade_cli.serve.server import Guard

    token = "agent-test-token-0123456789"
    service = ServiceThread(
        RewardService(workers=1, timeout_s=60.0, registrations={"echo": echo_verifier.TARGET}), Guard(token)
    )
    try:
        url = url_with_token_ref(service.url, token)
        assert TOKEN_REF in url and token not in url
        path = export(tmp_path, url, top_k=-1, outcomes_dir=None)
        assert token not in path.read_text()  # the file names the variable, never the token
        cases = [(PROMPT_A, label("yes", 0), ["yes<|im_end|>", "no<|im_end|>"])]
        monkeypatch.delenv("CASCADE_REWARD_TOKEN", raising=False)
        with pytest.raises(RuntimeError, match="CASCADE_REWARD_TOKEN is not set"):
            rollout(path, cases, max_new_tokens=12)
        monkeypatch.setenv("CASCADE_REWARD_TOKEN", token)
        ((group,), _) = rollout(path, cases, max_new_tokens=12)
        assert [r["reward"] for r in group] == [1.0, 0.0]
    finally:
        service.close()


def test_ray_submission_carries_the_token_in_the_job_environment(monkeypatch):
    from cascade_cli.serve.auth import with_token_env

    args = ["job", "submit", "--address", "http://head:8265", "--runtime-env-json", '{"env_vars": {"A": "1"}}']
    monkeypatch.delenv("CASCADE_REWARD_TOKEN", raising=False)
    assert with_token_env(args) == args
    monkeypatch.setenv("CASCADE_REWARD_TOKEN", "t" * 20)
    env = json.loads(with_token_env(args)[-1])
    assert env == {"env_vars": {"A": "1", "CASCADE_REWARD_TOKEN": "t" * 20}}
