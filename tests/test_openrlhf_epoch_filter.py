"""Epoch-level prompt filtering on OpenRLHF: one job per epoch, the prompt file rewritten between them from the
outcomes cascade's agent recorded, resumed mid-stage after a failed job.

There is no GPU here, so a STAND-IN plays each job's trainer in-process (as tests/test_openrlhf_ray.py's
stand-in plays it on a Ray head): it writes the job's agent file as the runner does, loads it with OpenRLHF's
own `_load_agent_executor`, and rolls out every prompt of the job's `--data.prompt_dataset` through
OpenRLHF's `generate_responses` with a stand-in vLLM engine (fixed answers: "easy" prompts always right,
"hard" always wrong, "mixed" half right); the rewards come from a live reward service with the real math
verifier on loopback. It then writes config.json into `--ckpt.output_dir` like a finished OpenRLHF job.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from cascade_cli.chat import render_prompt
from cascade_cli.config.common import ClusterConfig
from cascade_cli.config.grpo import RLVRConfig
from cascade_cli.data.epoch_filter import epoch_pool
from cascade_cli.engines.openrlhf import agent_file
from cascade_cli.engines.openrlhf.data import convert_stage_data
from cascade_cli.engines.openrlhf.epoch_jobs import run_epoch_jobs, state_path
from cascade_cli.engines.openrlhf.jobs import converted_data_path
from cascade_cli.engines.openrlhf.runner import plan_commands
from cascade_cli.jsonl import write_jsonl
from cascade_cli.serve.server import RewardService
from cascade_cli.stage_kinds import openrlhf_builder

sys.path.insert(0, str(Path(__file__).parent))
from openrlhf_peers import byte_tokenizer, openrlhf_method  # noqa: E402
from service_thread import ServiceThread  # noqa: E402
from test_openrlhf_agent import Sampling, load_agent_executor  # noqa: E402

KINDS = ["easy"] * 4 + ["hard"] * 4 + ["mixed"] * 4


@pytest.fixture(scope="module")
def live():
    service = ServiceThread(RewardService(workers=1, timeout_s=60.0))
    yield service
    service.close()


class Policy:
    """Stands in for vLLM: the answer depends on the prompt's kind (and alternates for "mixed")."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer, self.calls = tokenizer, {}

    async def generate(self, prompt_token_ids, sampling_params, multi_modal_data=None):
        prompt = self.tokenizer.decode(prompt_token_ids, skip_special_tokens=False)
        count = self.calls[prompt] = self.calls.get(prompt, 0) + 1
        right = "easy" in prompt or ("mixed" in prompt and count % 2 == 1)
        text = f"<think>\nok\n</think>\n\nThe answer is \\boxed{{{2 if right else 3}}}.<|im_end|>"
        ids = self.tokenizer(text=text, add_special_tokens=False)["input_ids"]
        return SimpleNamespace(outputs=[SimpleNamespace(token_ids=ids, text=text, finish_reason="stop", logprobs=None)])


def flag(args: list[str], name: str) -> str:
    return args[args.index(name) + 1]


def stand_in_job(args: list[str]) -> None:
    """One job's trainer, stood in: roll out every prompt of --data.prompt_dataset through the agent file
    (--train.agent_func_path) as OpenRLHF's vLLM actor does, then write config.json to --ckpt.output_dir."""
    executor = load_agent_executor(Path(flag(args, "--train.agent_func_path")))
    tokenizer = byte_tokenizer()
    engine = Policy(tokenizer)
    engine.executor = executor
    generate = openrlhf_method("openrlhf.trainer.ray.vllm_engine", "RolloutRayActor", "generate_responses",
                               {"asyncio": asyncio})
    rows = [json.loads(line) for line in Path(flag(args, "--data.prompt_dataset")).read_text().splitlines()]
    n = int(flag(args, "--rollout.n_samples_per_prompt"))

    async def main():
        return await asyncio.gather(*[
            generate(engine, render_prompt(row["prompt"]), row["label"], Sampling(max_tokens=64), 4096,
                     tokenizer, num_samples=n)
            for row in rows
        ])

    asyncio.run(main())
    out = Path(flag(args, "--ckpt.output_dir"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps({"stand_in": True, "argv": args}))


def main(args: list[str]) -> None:
    """The Ray job's entrypoint (test_openrlhf_epoch_filter_ray.py): fail once where CASCADE_FAIL_ONCE says."""
    marker = os.environ.get("CASCADE_FAIL_ONCE")
    if marker and os.environ.get("CASCADE_JOB", "").endswith("/epoch2") and not Path(marker).exists():
        Path(marker).write_text("failed once")
        print("CUDA error: out of memory (stand-in)", flush=True)
        raise SystemExit(3)
    stand_in_job(args)
    print("stand-in trainer (CPU) finished", flush=True)


def stand_in_trainer(fail_on: set[str]):
    ran: list[dict] = []

    def run_job(job) -> None:
        ran.append({"name": job.name, "init": job.init, "out": job.output_dir})
        agent_file.export(*job.agent)  # what the runner does before submitting
        if job.name in fail_on:
            fail_on.discard(job.name)
            raise RuntimeError(f"stand-in: {job.name} ended FAILED")
        stand_in_job(job.args)

    return run_job, ran


def stage(tmp_path: Path, url: str) -> RLVRConfig:
    data = tmp_path / "math.jsonl"
    write_jsonl(data, [
        {"id": f"r{i}", "source": "t", "domain": "math", "mode": "think", "prompt": f"({kind} {i}) What is 1+1?",
         "label": {"answer": "2"}}
        for i, kind in enumerate(KINDS)
    ])
    return RLVRConfig(
        name="math_rl", engine="openrlhf", domain="math", data=str(data), init="Qwen/Qwen3-8B-Base",
        out=str(tmp_path / "math_rl"), steps=6, prompts_per_step=4, group_size=2, epoch_filter=True,
        epoch_filter_hard_p=0.5, epoch_filter_easy_p=0.5, seed=3,
        cluster=ClusterConfig(nodes=1, gpus_per_node=8, vllm_engines=8, reward_urls=[url]),
    )


def prompt_ids(path: Path) -> list[int]:
    return [json.loads(json.loads(line)["label"])["prompt_id"] for line in path.read_text().splitlines()]


def test_epochs_drop_solved_and_unsolved_prompts_and_resume_after_a_failure(tmp_path, live):
    config = stage(tmp_path, live.url)
    convert_stage_data(config, converted_data_path(config))
    run_job, ran = stand_in_trainer(fail_on={"math_rl/epoch2"})
    with pytest.raises(RuntimeError, match="epoch2 ended FAILED"):
        run_epoch_jobs(config, run_job)
    state = json.loads(state_path(config).read_text())
    assert state["epoch"] == 2 and state["init"] == str(tmp_path / "math_rl" / "epochs" / "1")

    data = tmp_path / "math_rl" / "openrlhf_data"
    assert sorted(prompt_ids(data / "epoch0.jsonl")) == list(range(12))  # epoch 0: every prompt, 3 steps
    # after epoch 0: the 100% (easy) and 0% (hard) prompts are dropped; the mixed ones stay
    first_drops = {str(i): "easy" for i in range(4)} | {str(i): "hard" for i in range(4, 8)}
    pool = epoch_pool(12, first_drops, 3, 1, 0.5, 0.5)
    assert set(range(8, 12)) <= set(pool) and len(pool) < 12
    assert prompt_ids(data / "epoch1.jsonl") == pool[: (len(pool) // 4) * 4]

    resumed, ran_again = stand_in_trainer(fail_on=set())
    final = run_epoch_jobs(config, resumed)
    assert ran_again[0]["name"] == "math_rl/epoch2" and ran_again[0]["init"] == str(tmp_path / "math_rl" / "epochs" / "1")
    assert [job["name"] for job in final["jobs"]][:2] == ["math_rl/epoch0", "math_rl/epoch1"]
    assert sum(job["steps"] for job in final["jobs"]) == 6 and final["phase"] == 1
    assert ran_again[-1]["out"] == str(tmp_path / "math_rl")  # the last epoch writes the stage's output
    assert (tmp_path / "math_rl" / "config.json").is_file()
    # a finished stage runs nothing more
    again, ran_third = stand_in_trainer(fail_on=set())
    run_epoch_jobs(config, again)
    assert ran_third == []


def test_plan_describes_the_epoch_jobs_without_a_note(tmp_path):
    config = stage(tmp_path, "http://10.0.0.5:5000/get_reward")
    lines = plan_commands(config, openrlhf_builder(config))
    assert not [line for line in lines if line.startswith("# note:")]
    assert any(line.startswith("# epoch_filter: `recipe run` runs each phase below as one job per epoch") for line in lines)
    assert any("cascade_cli.engines.openrlhf.agent_file" in line and "epoch_outcomes" in line for line in lines)
