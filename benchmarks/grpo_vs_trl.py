"""GRPO step time: cascade's local trainer vs TRL's `GRPOTrainer`, side by side on CPU.

Same model (`--model`: the random-init tiny Qwen3 `tiny:0` by default, or a real one such as SmolLM2), same
ChatML prompts, group size 8, 64 completions per step (8 prompts), at most `--max-new-tokens` new tokens,
temperature 1, top-p 1, token-level loss (TRL `loss_type="dapo"`), beta 0 (no KL, no reference model), one
optimizer step per rollout batch, the same pure-Python reward. Precision: cascade with its default
`dtype: auto` (bf16 autocast of the training pass on a bf16 CPU for 50M+ models; fp32 rollouts) and TRL both with `bf16=False` and `bf16=True`
(the choice it offers; TRL's GRPO checkpoints gradients by default, cascade's `gradient_checkpointing: auto`
splits the 64 rows into micro-batches that fit instead). Each side runs in its own subprocess of this script, all started together, and
they take turns step by step (a baton file), so a busy shared machine slows them alike; the first step of
each is warm-up and is not counted. Prints the median seconds per step, cascade's split of its step
(generation / training pass), the training pass's share of the CPU's matmul ceiling, and the ratios.

This is one synthetic step, not a recipe's: one batch of 8 fixed prompts x 8, a toy reward, top-p 1 and no
dynamic filtering. A recipe's step (recipes/smol-if.yaml) generates as many rounds as dynamic filtering needs
to find 8 groups whose rewards differ (at a weak model's pass rate, 13-54 groups drawn), longer prompts with
constraints attached, and scores them with the real verifier: `experiments/recipe_step.py` times that step.

    python benchmarks/grpo_vs_trl.py [--model smollm2-135m] [--steps 3] [--threads 2] [--max-new-tokens 64]
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
WORKERS = ("cascade", "trl", "trl-bf16", "cascade-vllm")  # cascade-vllm: opt-in (a ~60 s engine start)


class Baton:
    """Turn-taking between the worker processes: a file holds the name of the worker whose step runs."""

    def __init__(self, path: str | None, me: str, order: list[str]) -> None:
        self.path, self.me, self.order = path, me, order

    def acquire(self) -> None:
        while self.path and Path(self.path).read_text() != self.me:
            time.sleep(0.05)

    def release(self, **progress: object) -> None:
        """Pass the turn on; `progress` (the step just done) goes to progress.jsonl beside the baton file."""
        if self.path:
            with open(Path(self.path).with_name("progress.jsonl"), "a") as log:
                log.write(json.dumps({"worker": self.me, **progress}) + "\n")
            following = self.order[(self.order.index(self.me) + 1) % len(self.order)]
            Path(self.path).write_text(following)


def digit_share(text: str) -> float:
    """The shared reward: the share of digits in the completion (graded, so groups are not uniform)."""
    return sum(ch.isdigit() for ch in text) / max(len(text), 1)


def prompts(n: int) -> list[str]:
    from cascade_cli.data import tiny_tasks

    return [row["prompt"] for row in tiny_tasks.generate("math", n, seed=0)]


def run_trl(model_dir: str, steps: int, max_new: int, bf16: bool, baton: Baton) -> dict:
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from cascade_cli.chat import render_prompt

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype="float32")  # bf16: autocast (accelerate)
    data = Dataset.from_dict(
        {"prompt": [render_prompt(p, "no_think") for p in prompts(PROMPTS_PER_STEP * (steps + 1))]}
    )

    def reward(completions, **_):
        return [digit_share(c) for c in completions]

    stamps: list[float] = []

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            baton.acquire()
            stamps.append(time.perf_counter())

        def on_step_end(self, args, state, control, **kwargs):
            stamps.append(time.perf_counter())
            baton.release(seconds=stamps[-1] - stamps[-2])

    config = GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="trl-grpo-"),
        per_device_train_batch_size=GROUP * PROMPTS_PER_STEP,
        gradient_accumulation_steps=1,
        num_generations=GROUP,
        max_completion_length=max_new,
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
        bf16=bf16,
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
    return {"times": [stamps[i + 1] - stamps[i] for i in range(0, len(stamps) - 1, 2)]}


def run_cascade(model_dir: str, steps: int, max_new: int, baton: Baton, backend: str = "hf") -> dict:
    from bench_stage import bare_stage

    from cascade_cli.config.grpo import RLVRConfig, RolloutConfig
    from cascade_cli.engines.local.rollout.generation import Generator
    from cascade_cli.engines.local.train.grpo import build_run, train_step
    from cascade_cli.engines.local.train.rl_rewards import RewardHook
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
        max_response_len=max_new,
        temperature=1.0,
        top_p=1.0,
        lr=LR,
        truncated_reward=None,
        train_micro_batch=64,
        resume=False,
        rollout=RolloutConfig(backend=backend),
    )
    stage = bare_stage(config)
    run, _ = build_run(stage, rows, DigitShare(), domain="math", mode="no_think")
    run.generator = Generator.for_policy(
        run.policy, run.tokenizer, str(stage.init), backend=backend, seed=config.seed,
        max_batch_size=config.rollout.max_batch_size,
    )
    times, split = [], []
    for step in range(steps):
        baton.acquire()
        began = time.perf_counter()
        metrics, _ = train_step(run, step)
        times.append(time.perf_counter() - began)
        split.append({key: metrics[f"time_{key}"] for key in ("generate", "train", "verify_wait", "sync")})
        split[-1]["loss_tokens"] = metrics["loss_tokens"]
        baton.release(seconds=times[-1], **split[-1])
    params = sum(p.numel() for p in run.policy.parameters())
    checkpointing = bool(getattr(run.policy, "is_gradient_checkpointing", False))
    return {
        "times": times, "split": split, "bf16": run.bf16, "params": params, "micro_batch": run.micro_batch,
        "checkpointing": checkpointing,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="tiny:0", help="a model spec or directory (default: tiny:0)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=MAX_NEW_TOKENS)
    parser.add_argument("--workers", default=",".join(WORKERS), help=f"a subset of {','.join(WORKERS)}")
    parser.add_argument("--worker", choices=WORKERS)
    parser.add_argument("--baton")
    args = parser.parse_args()
    order = args.workers.split(",")

    if args.worker:
        import torch

        torch.set_num_threads(args.threads)
        baton = Baton(args.baton, args.worker, order)
        if args.worker.startswith("cascade"):
            backend = "vllm" if args.worker == "cascade-vllm" else "hf"
            result = run_cascade(args.model, args.steps, args.max_new_tokens, baton, backend)
        else:
            result = run_trl(args.model, args.steps, args.max_new_tokens, args.worker == "trl-bf16", baton)
        print("RESULT " + json.dumps(result))
        return

    from cascade_cli.models.resolve import resolve_model

    model_dir = str(resolve_model(args.model))
    work = Path(tempfile.mkdtemp(prefix="grpo-bench-"))
    baton = work / "baton"
    baton.write_text(order[0])
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "CASCADE_THREADS": str(args.threads)}
    procs = {}
    for worker in order:
        command = [
            sys.executable, __file__, "--worker", worker, "--model", model_dir, "--steps", str(args.steps),
            "--threads", str(args.threads), "--max-new-tokens", str(args.max_new_tokens),
            "--workers", args.workers, "--baton", str(baton),
        ]  # fmt: skip
        procs[worker] = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
    print(
        f"{model_dir}: {len(order)} workers taking turns, {args.steps} steps each, {args.threads} threads, "
        f"{GROUP * PROMPTS_PER_STEP} completions/step, <= {args.max_new_tokens} new tokens; "
        f"load average {os.getloadavg()[0]:.1f}; each step as it ends: {baton.with_name('progress.jsonl')}"
    )
    results, outputs = {}, {}
    for worker, proc in procs.items():
        stdout, stderr = proc.communicate()
        lines = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
        if proc.returncode != 0 or not lines:
            for other in procs.values():
                other.kill()
            sys.exit(f"{worker} failed:\n{stderr[-4000:]}")
        outputs[worker] = json.loads(lines[-1][len("RESULT ") :])
        times = outputs[worker]["times"]
        results[worker] = statistics.median(times[1:]) if len(times) > 1 else times[0]
        print(
            f"{worker:9s} steps {len(times)}  s/step (median after warm-up) {results[worker]:.3f}  all: "
            + " ".join(f"{t:.2f}" for t in times)
        )
    for ours in (w for w in order if w.startswith("cascade")):
        report_cascade(outputs[ours], args.threads)
        for other in (w for w in order if w.startswith("trl")):
            print(f"ratio {ours} / {other} = {results[ours] / results[other]:.3f}  (goal <= 0.5)")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


def report_cascade(output: dict, threads: int) -> None:
    """Where cascade's step goes, and its training pass against the CPU's matmul ceiling."""
    sys.path.insert(0, str(Path(__file__).parent))
    import torch
    from cpu_ceiling import ceiling_line, format_ceiling, measure_ceiling

    split = output["split"][1:] or output["split"]
    mean = {key: statistics.mean(s[key] for s in split) for key in split[0]}
    print(
        f"cascade split (mean after warm-up, bf16 autocast {output['bf16']}, micro-batches of "
        f"{output['micro_batch']} rows, gradient checkpointing {output['checkpointing']}): generate "
        f"{mean['generate']:.2f} s, train pass {mean['train']:.2f} s, verify wait {mean['verify_wait']:.2f} s, "
        f"sync {mean['sync']:.2f} s"
    )
    torch.set_num_threads(threads)
    ceiling = measure_ceiling()
    print(format_ceiling(ceiling, threads))
    dtype = "bfloat16" if output["bf16"] else "float32"
    tokens = int(mean["loss_tokens"])
    print(ceiling_line(ceiling, "GRPO train pass (response tokens)", output["params"], tokens, mean["train"], dtype))


if __name__ == "__main__":
    main()
