"""GRPO step time: cascade's local trainer vs TRL's `GRPOTrainer`, side by side on CPU.

Same random-init tiny Qwen3 (`tiny:0`), same ChatML prompts, group size 8, 64 completions per step (8 prompts),
at most 64 new tokens, temperature 1, top-p 1, token-level loss (TRL `loss_type="dapo"`), beta 0 (no KL,
no reference model), one optimizer step per rollout batch, the same pure-Python reward. Each side runs in its
own subprocess of this script, one after the other, with the same torch thread count; the first step of
each is warm-up and is not counted. Prints the median seconds per step of each and the ratio.

    python benchmarks/grpo_vs_trl.py [--steps 5] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GROUP = 8
PROMPTS_PER_STEP = 8
MAX_NEW_TOKENS = 64
LR = 1e-5


def digit_share(text: str) -> float:
    """The shared reward: the share of digits in the completion (graded, so groups are not uniform)."""
    return sum(ch.isdigit() for ch in text) / max(len(text), 1)


def prompts(n: int) -> list[str]:
    from cascade_cli.data import tiny_tasks

    return [row["prompt"] for row in tiny_tasks.generate("math", n, seed=0)]


def run_trl(model_dir: str, steps: int) -> list[float]:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from cascade_cli.chat import render_prompt

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype="float32")
    data = Dataset.from_dict(
        {"prompt": [render_prompt(p, "no_think") for p in prompts(PROMPTS_PER_STEP * (steps + 1))]}
    )

    def reward(completions, **_):
        return [digit_share(c) for c in completions]

    stamps: list[float] = []

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            stamps.append(time.perf_counter())

        def on_step_end(self, args, state, control, **kwargs):
            stamps.append(time.perf_counter())

    config = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="trl-grpo-"),
        per_device_train_batch_size=GROUP * PROMPTS_PER_STEP,
        gradient_accumulation_steps=1,
        num_generations=GROUP,
        max_completion_length=MAX_NEW_TOKENS,
        temperature=1.0,
        top_p=1.0,
        loss_type="dapo",
        beta=0.0,
        num_iterations=1,
        learning_rate=LR,
        adam_beta1=0.9,
        adam_beta2=0.95,
        max_grad_norm=1.0,
        max_steps=steps,
        use_cpu=True,
        bf16=False,
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        seed=0,
        shuffle_dataset=False,
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward,
        args=config,
        train_dataset=data,
        processing_class=tokenizer,
        callbacks=[StepTimer()],
    )
    # The step's own work happens between the "begin" of one step and its "end"; TRL generates inside it.
    trainer.train()
    return [stamps[i + 1] - stamps[i] for i in range(0, len(stamps) - 1, 2)]


def run_cascade(model_dir: str, steps: int) -> list[float]:
    from cascade_cli.config.grpo import RLVRConfig, RolloutConfig
    from cascade_cli.engines.local.generation import Generator
    from cascade_cli.engines.local.grpo import build_run, train_step
    from cascade_cli.engines.local.rl_rewards import RewardHook
    from cascade_cli.verifiers.base import Score

    class DigitShare(RewardHook):
        def score(self, records):
            return [Score(reward=digit_share(r["response"]), passed=False) for r in records]

    rows = [
        {"id": str(i), "prompt": p, "label": None}
        for i, p in enumerate(prompts(PROMPTS_PER_STEP * (steps + 1)))
    ]
    config = RLVRConfig(
        domain="math",
        init=model_dir,
        data="-",
        out=tempfile.mkdtemp(prefix="cascade-grpo-"),
        steps=steps,
        prompts_per_step=PROMPTS_PER_STEP,
        group_size=GROUP,
        max_response_len=MAX_NEW_TOKENS,
        temperature=1.0,
        top_p=1.0,
        lr=LR,
        truncated_reward=None,
        dtype="float32",
        train_micro_batch=64,
        resume=False,
        rollout=RolloutConfig(backend="hf"),
    )
    run = build_run(config, rows, DigitShare(), domain="math", mode="no_think", eval_rows=None)
    run.generator = Generator.for_policy(
        run.policy, run.tokenizer, run.init, backend="hf", seed=config.seed,
        max_batch_size=config.rollout.max_batch_size,
    )
    times = []
    for step in range(steps):
        began = time.perf_counter()
        train_step(run, step)
        times.append(time.perf_counter() - began)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--worker", choices=["trl", "cascade"])
    parser.add_argument("--model")
    args = parser.parse_args()

    if args.worker:
        import torch

        torch.set_num_threads(args.threads)
        times = (run_trl if args.worker == "trl" else run_cascade)(args.model, args.steps)
        print("RESULT " + json.dumps(times))
        return

    from cascade_cli.tiny import build_tiny

    model_dir = str(build_tiny("tiny:0", Path(tempfile.mkdtemp(prefix="grpo-bench-")) / "tiny"))
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "CASCADE_THREADS": str(args.threads)}
    results = {}
    for worker in ("cascade", "trl"):
        proc = subprocess.run(
            [
                sys.executable,
                __file__,
                "--worker",
                worker,
                "--model",
                model_dir,
                "--steps",
                str(args.steps),
                "--threads",
                str(args.threads),
            ],
            capture_output=True,
            text=True,
            env=env,
        )
        lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        if proc.returncode != 0 or not lines:
            sys.exit(f"{worker} failed:\n{proc.stderr[-4000:]}")
        times = json.loads(lines[-1][len("RESULT ") :])
        results[worker] = statistics.median(times[1:]) if len(times) > 1 else times[0]
        print(
            f"{worker:8s} steps {len(times)}  s/step (median after warm-up) {results[worker]:.3f}  all: "
            + " ".join(f"{t:.2f}" for t in times)
        )
    print(f"ratio cascade / trl = {results['cascade'] / results['trl']:.3f}  (goal <= 0.5)")


if __name__ == "__main__":
    main()
