"""The reward service with a reward model (`cascade verify --serve --reward-model`), on loopback, with a tiny
Bradley-Terry RM trained in a fixture (the local engine's `cascade rlhf rm`): RLHF scores the text after
`</think>`, the code-switch floor, z-score + tanh shaping, the thinking models' IF-RL reward, forwarding to
an OpenRLHF `serve_rm` URL, and the whole path from cascade's agent file through OpenRLHF's own executor."""

from __future__ import annotations

import asyncio
import json
import math
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from aiohttp import web

from cascade_cli.chat import render_prompt
from cascade_cli.config.rm import RewardModelConfig
from cascade_cli.config.structure import structure
from cascade_cli.engines.local.train import reward_model as rm
from cascade_cli.jsonl import write_jsonl
from cascade_cli.serve.server import RewardService
from cascade_cli.verifiers import reward_model as scoring
from cascade_cli.verifiers.reward_model import zscore_tanh

sys.path.insert(0, str(Path(__file__).parent))
from service_thread import ServiceThread  # noqa: E402
from test_openrlhf_agent import export, rollout  # noqa: E402
from test_rlhf_rm import NAMES, polite_pairs  # noqa: E402

PROMPT = render_prompt("Greet Ann.", "think")
PROMPT_B = render_prompt("Greet Bo.", "think")
GENERAL = json.dumps({"domain": "general"})


@pytest.fixture(scope="module")
def tiny_rm(tmp_path_factory):
    root = tmp_path_factory.mktemp("rm")
    write_jsonl(root / "train.jsonl", polite_pairs(NAMES[:22] * 2))
    config = structure(
        RewardModelConfig,
        {"init": "tiny", "data": str(root / "train.jsonl"), "out": str(root / "rm"), "lr": 3e-3, "batch_size": 8,
         "micro_batch": 8, "epochs": 2.0, "bf16": False},
    )
    rm.run_reward_model(config)
    return root / "rm"


@pytest.fixture(scope="module")
def live(tiny_rm):
    service = ServiceThread(RewardService(workers=1, timeout_s=60.0, reward_model=str(tiny_rm)))
    yield service
    service.close()


@pytest.fixture(scope="module")
def scores(tiny_rm):
    """The RM's own value for (prompt, answer) texts, computed without the service."""
    model, tokenizer = scoring.load_reward_model(tiny_rm, device="cpu")

    def score(prompt: str, answers: list[str]) -> list[float]:
        return scoring.score_texts(model, tokenizer, [f"{prompt}{a}<|im_end|>" for a in answers])

    return score


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as reply:
        return json.loads(reply.read())


def rlhf_body(responses: list[str], prompt: str = PROMPT, **cascade) -> dict:
    body = {"query": [prompt + r for r in responses], "prompts": [prompt] * len(responses),
            "labels": [GENERAL] * len(responses)}
    if cascade:
        body["cascade"] = cascade
    return body


def test_rlhf_scores_the_answer_after_think_and_the_whole_unfinished_response(live, scores):
    responses = ["<think>\nBe nice.\n</think>\n\nHello Ann!<|im_end|>", "Go away Ann.<|im_end|>",
                 "<think>\nstill thinking about Ann"]
    reply = post(live.url, rlhf_body(responses))
    expected = scores(PROMPT, ["Hello Ann!", "Go away Ann.", "<think>\nstill thinking about Ann"])
    assert reply["rewards"] == pytest.approx(expected, abs=1e-5)
    assert reply["rewards"][0] > reply["rewards"][1]  # the trained RM prefers the greeting


def test_code_switching_response_gets_the_batch_minimum_minus_ten(live, scores):
    responses = ["Hello Ann!<|im_end|>", "你好，安。很高兴见到你。<|im_end|>", "Go away Ann.<|im_end|>"]
    reply = post(live.url, rlhf_body(responses))
    raw = scores(PROMPT, ["Hello Ann!", "你好，安。很高兴见到你。", "Go away Ann."])
    assert reply["rewards"][0] == pytest.approx(raw[0], abs=1e-5)
    assert reply["rewards"][1] == pytest.approx(min(raw) - 10.0, abs=1e-5)
    off = post(live.url, rlhf_body(responses, code_switch_penalty=False))
    assert off["rewards"] == pytest.approx(raw, abs=1e-5)


def test_reward_shaping_z_scores_each_prompt_group_then_tanh(live, scores):
    a = ["Hello Ann!<|im_end|>", "Go away Ann.<|im_end|>", "Hi<|im_end|>"]
    b = ["Hello Bo!<|im_end|>", "Go away Bo.<|im_end|>"]
    body = rlhf_body(a, shaping="zscore_tanh")
    more = rlhf_body(b, PROMPT_B)
    for key in ("query", "prompts", "labels"):
        body[key] += more[key]
    reply = post(live.url, body)
    expected = zscore_tanh(scores(PROMPT, ["Hello Ann!", "Go away Ann.", "Hi"])) + zscore_tanh(
        scores(PROMPT_B, ["Hello Bo!", "Go away Bo."]))
    assert reply["rewards"] == pytest.approx(expected, abs=1e-5)
    assert all(-1 < r < 1 for r in reply["rewards"])


def test_if_rl_reward_adds_sigmoid_of_the_group_z_scored_rm_score_when_the_verifier_passes(live, scores):
    label = json.dumps({"domain": "if", "instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]})
    answers = ["Hello Ann!", "Hello Ann nice day", "Hello, Ann!"]  # the last has a comma: R_IF = 0
    body = {"query": [PROMPT + a + "<|im_end|>" for a in answers], "prompts": [PROMPT] * 3, "labels": [label] * 3,
            "cascade": {"if_rm": True}}
    reply = post(live.url, body)
    raw = scores(PROMPT, answers)
    mean = sum(raw) / 3
    std = math.sqrt(sum((v - mean) ** 2 for v in raw) / 2)
    sigmoid = [1 / (1 + math.exp(-(v - mean) / (std + 1e-6))) for v in raw]
    assert reply["rewards"] == pytest.approx([1 + sigmoid[0], 1 + sigmoid[1], 0.0], abs=1e-5)
    assert reply["scores"] == [1.0, 1.0, 0.0]  # R_IF: what OpenRLHF's dynamic filtering reads
    plain = post(live.url, {**body, "cascade": {}})
    assert plain["rewards"] == [1.0, 1.0, 0.0]  # without if_rm: the verifier alone


def test_without_a_reward_model_general_rows_are_refused_with_the_fix(tmp_path):
    service = ServiceThread(RewardService(workers=1, timeout_s=30.0))
    try:
        with pytest.raises(urllib.error.HTTPError) as error:
            post(service.url, rlhf_body(["Hello Ann!<|im_end|>"]))
        assert error.value.code == 400 and "--reward-model CKPT" in error.value.read().decode()
    finally:
        service.close()


def test_forwarding_to_an_openrlhf_serve_rm_url_gives_the_same_rewards(tiny_rm, live, scores):
    """A stand-in for OpenRLHF's `serve_rm` (its protocol: POST {"query": [text]} -> {"rewards": [...]}; the
    real one needs deepspeed and a GPU), scoring with the same tiny RM."""
    model, tokenizer = scoring.load_reward_model(tiny_rm, device="cpu")
    seen: list[list[str]] = []

    async def get_reward(request: web.Request) -> web.Response:
        queries = (await request.json())["query"]
        seen.append(queries)
        rewards = scoring.score_texts(model, tokenizer, queries)
        return web.json_response({"rewards": rewards, "scores": rewards, "extra_logs": {"dummy_scores": rewards}})

    loop = asyncio.new_event_loop()
    app = web.Application()
    app.router.add_post("/get_reward", get_reward)
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    forwarding = ServiceThread(RewardService(workers=1, timeout_s=60.0, reward_model=f"http://127.0.0.1:{port}/get_reward"))
    try:
        responses = ["<think>\nx\n</think>\n\nHello Ann!<|im_end|>", "Go away Ann.<|im_end|>"]
        assert post(forwarding.url, rlhf_body(responses))["rewards"] == pytest.approx(
            post(live.url, rlhf_body(responses))["rewards"], abs=1e-5)
        assert seen == [[f"{PROMPT}Hello Ann!<|im_end|>", f"{PROMPT}Go away Ann.<|im_end|>"]]
    finally:
        forwarding.close()
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)


def test_rlhf_stage_agent_gets_shaped_group_rewards_through_openrlhf_executor(tmp_path, live, scores):
    """An RLHF stage's agent settings (jobs.reward_options) through OpenRLHF's generate_responses: the group of
    one prompt is scored together, so the shaping sees all of it."""
    options = {"code_switch_penalty": True, "code_switch_margin": 10.0, "shaping": "zscore_tanh"}
    path = export(tmp_path, live.url, reward_options=options, top_k=-1, overlong_filter=False, outcomes_dir=None)
    answers = ["Hello Ann!<|im_end|>", "Go away Ann.<|im_end|>", "Hi Ann<|im_end|>"]
    (group,), _ = rollout(path, [(PROMPT, GENERAL, answers)], max_new_tokens=64)
    expected = zscore_tanh(scores(PROMPT, ["Hello Ann!", "Go away Ann.", "Hi Ann"]))
    assert [r["reward"] for r in group] == pytest.approx(expected, abs=1e-5)
