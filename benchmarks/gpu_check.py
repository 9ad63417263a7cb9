"""One command that checks and times cascade on one GPU, offline, in under 8 minutes (it also runs on CPU).

Prints the versions and, for each part, the device it really ran on: read from the model's parameters for
the in-process parts, from nvidia-smi's per-process GPU memory for the `cascade` commands it runs. Then:
1. a tiny RL stage (`cascade rlvr --domain math --init tiny`, a few steps);
2. the base IFEval pass of MODEL (541 prompts, greedy, <= 512 tokens), its time and score;
3. N IF-RL steps of recipes/smol-if.yaml (its data stages first), each step's split into generate / train /
   verify from metrics.jsonl, and the GPU's busy % while the stage ran (nvidia-smi, sampled in a thread);
4. generated tokens/s side by side on one batch: the hf loop, transformers `generate`, and vLLM where it
   is installed (benchmarks/eval_generation.py's sides, each in its own process);
5. torch.profiler's top operators over one hf decode call, and the host syncs per decode step (CUDA's sync
   debug mode).
Rollouts and evaluation use `--backend` (default hf: the loop this project owns). The goal it checks: with the
hf loop, an IF-RL step's median <= 8 s and the GPU >= 50% busy while generating. --quick shrinks every part
for a CPU smoke run (`--quick --if-steps 1`).

    python benchmarks/gpu_check.py [--model smollm2-135m | --model gguf:PATH] [--if-steps 6] [--quick]
        [--backend hf|auto|vllm] [--out runs/gpu_check]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = 480
STEP_GOAL_S, BUSY_GOAL = 8.0, 50.0


class GpuSampler:
    """nvidia-smi every `period` s in a thread: the GPU's busy % and memory used (MiB)."""

    def __init__(self, period: float = 0.5) -> None:
        self.period = period
        self.samples: list[tuple[float, float, float]] = []  # (time, busy %, memory MiB)
        self.available = shutil.which("nvidia-smi") is not None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> GpuSampler:
        if self.available:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self.available:
            self._thread.join()

    def _run(self) -> None:
        query = ["nvidia-smi", "--query-gpu=utilization.gpu,memory.used", "--format=csv,noheader,nounits"]
        while not self._stop.wait(self.period):
            done = subprocess.run(query, capture_output=True, text=True)
            if done.returncode == 0 and done.stdout.strip():
                busy, memory = (float(v) for v in done.stdout.splitlines()[0].split(","))
                self.samples.append((time.time(), busy, memory))

    def busy_values(self, since: float, until: float) -> list[float]:
        return sorted(b for t, b, _ in self.samples if since <= t <= until)

    def busy(self, since: float, until: float) -> str:
        values = self.busy_values(since, until)
        if not values:
            return "GPU busy n/a (no nvidia-smi)" if not self.available else "GPU busy: no samples"
        p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
        return f"GPU busy median {statistics.median(values):.0f}%, p90 {p90:.0f}% ({len(values)} samples)"

    def where(self, since: float, until: float) -> str:
        """Where a child process ran, from the GPU memory it took (its parameters are not in this process)."""
        if not self.available:
            return "cpu (no GPU)"
        before = [m for t, _, m in self.samples if t < since][-1:] or [0.0]
        during = [m for t, _, m in self.samples if since <= t <= until]
        rise = max(during, default=before[0]) - before[0]
        return f"cuda (GPU memory +{rise:.0f} MiB)" if rise > 100 else f"cpu? (GPU memory +{rise:.0f} MiB)"


def versions() -> None:
    import torch
    import transformers

    from cascade_cli.engines.local.rollout.rollout_backend import vllm_available

    line = f"python {platform.python_version()}, torch {torch.__version__}, transformers {transformers.__version__}"
    if vllm_available():
        import vllm

        line += f", vllm {vllm.__version__}"
    else:
        line += ", vllm not installed"
    print(line)
    if torch.cuda.is_available():
        print(f"GPU {torch.cuda.get_device_name(0)}, CUDA {torch.version.cuda}, "
              f"{torch.cuda.get_device_properties(0).total_memory / 2**30:.0f} GiB")  # fmt: skip
    else:
        print("no GPU: every part runs on the CPU")


def cascade(args: list[str], sampler: GpuSampler, log: Path) -> tuple[float, str]:
    """Run `cascade ARGS`; (seconds, where it ran)."""
    began, started = time.perf_counter(), time.time()
    with open(log, "w") as out:
        code = subprocess.call([sys.executable, "-m", "cascade_cli", *args], stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    if code != 0:
        tail = "\n".join(log.read_text().splitlines()[-15:])
        raise SystemExit(f"cascade {' '.join(args[:2])} failed (exit {code}); {log}:\n{tail}")
    return time.perf_counter() - began, sampler.where(started, time.time())


def tiny_rl(out: Path, sampler: GpuSampler, quick: bool) -> None:
    data, stage = out / "tiny_math", out / "tiny_rl"
    cascade(["prepare-data", "--source", "tiny:math", "--out", str(data), "--n", "64"], sampler, out / "tiny_data.log")
    steps = 2 if quick else 4
    sizes = ["prompts_per_step=4", "group_size=4", "max_response_len=32"]
    seconds, where = cascade(
        ["rlvr", "--domain", "math", "--init", "tiny", "--data", str(data), "--out", str(stage), "--restart",
         f"steps={steps}", *sizes], sampler, out / "tiny_rl.log",
    )  # fmt: skip
    print(f"1. tiny RL stage: {steps} steps in {seconds:.1f} s, on {where}")


def ifeval_base(model: str, out: Path, sampler: GpuSampler, backend: str, quick: bool) -> None:
    limit = ["--limit", "16", "--max-tokens", "64"] if quick else ["--max-tokens", "512"]
    began = time.time()
    seconds, where = cascade(
        ["eval", "--model", model, "--benchmarks", "ifeval", "--k", "1", "--temperature", "0", "--backend", backend,
         *limit, "--out", str(out / "ifeval_base")], sampler, out / "ifeval.log",
    )  # fmt: skip
    result = json.loads((out / "ifeval_base" / "results.json").read_text())["benchmarks"]["ifeval"]
    metrics = result["metrics"]
    print(f"2. base IFEval ({result['problems']} prompts, <= {result['max_tokens']} tokens): {seconds:.0f} s in all, "
          f"{result['generation_seconds']:.0f} s generating; prompt strict {metrics['prompt_strict']:.2f}, "
          f"instruction strict {metrics['inst_strict']:.2f}; on {where}; "
          f"{sampler.busy(began, time.time())}")  # fmt: skip


def if_rl(model: str, out: Path, sampler: GpuSampler, backend: str, steps: int, quick: bool) -> list[float]:
    run_dir = out / "smol-if"
    overrides = [f"model={model}", f"run_dir={run_dir}", f"stages.if_rl.steps={steps}", "eval.after_each_stage=false",
                 f"stages.if_rl.rollout.backend={backend}"]  # fmt: skip
    if quick:
        overrides += ["stages.if_rl.prompts_per_step=2", "stages.if_rl.group_size=4", "stages.if_rl.max_response_len=24",
                      "stages.if_rl.dynamic_filter=false", "stages.if_rl.eval_limit=4"]  # fmt: skip
    shutil.rmtree(run_dir / "if_rl", ignore_errors=True)
    began = time.time()
    seconds, where = cascade(["recipe", "run", str(ROOT / "recipes" / "smol-if.yaml"), *overrides], sampler,
                             out / "smol_if.log")  # fmt: skip
    lines = [json.loads(line) for line in (run_dir / "if_rl" / "metrics.jsonl").read_text().splitlines() if line]
    lines = [line for line in lines if "time_step" in line]
    print(f"3. smol-if IF-RL: {len(lines)} steps ({seconds:.0f} s with the data stages), on {where}; "
          f"{sampler.busy(began, time.time())}")  # fmt: skip
    print(f"   {'step':>4} {'step s':>7} {'generate':>9} {'train':>6} {'verify':>7} {'groups':>7} {'resp len':>9}")
    for index, line in enumerate(lines, 1):
        print(f"   {index:4d} {line['time_step']:7.1f} {line['time_generate']:9.1f} {line['time_train']:6.1f} "
              f"{line['time_verify']:7.1f} {line['groups_sampled']:7d} {line['response_len_mean']:9.0f}")  # fmt: skip
    step_times = [line["time_step"] for line in lines]
    if step_times:
        share = sum(line["time_generate"] for line in lines) / sum(step_times)
        print(f"   median step {statistics.median(step_times):.1f} s ({min(step_times):.1f}-{max(step_times):.1f}); "
              f"generation {share:.0%} of the steps' time")  # fmt: skip
    return step_times


def generation_sides(model_dir: Path, sampler: GpuSampler, quick: bool) -> float | None:
    """Tokens/s of each generation side on one batch (eval_generation.py's child processes)."""
    import eval_generation

    from cascade_cli.engines.local.rollout.rollout_backend import vllm_available

    args = argparse.Namespace(prompts=2 if quick else 32, n=4 if quick else 8, max_new_tokens=16 if quick else 128,
                              seed=0, threads=max(1, (os.cpu_count() or 2) - 1), batches=1, timeout=600,
                              model=str(model_dir))  # fmt: skip
    print(f"4. generation, {args.prompts} prompts x n={args.n}, temperature 1, <= {args.max_new_tokens} tokens:")
    busy = None
    for side in ["hf_loop", "hf_generate"] + (["vllm"] if vllm_available() else []):
        began = time.time()
        result = eval_generation.child(side, model_dir, args)
        if result is None:
            print(f"   {side}: failed (its error is above)")
            continue
        print(f"   {eval_generation.LABELS[side]:34s} on {result['device']}: {result['gen_tok_s']:8.0f} tok/s "
              f"generating ({result['tokens']} tokens, {result['load_s']:.1f} s load); "
              f"{sampler.busy(began, time.time())}")  # fmt: skip
        if side == "hf_loop":
            values = sampler.busy_values(began, time.time())
            busy = statistics.median(values) if values else None
    if not vllm_available():
        print("   vLLM: not installed")
    return busy


def profile_decode(model_dir: Path, quick: bool) -> None:
    import torch
    from decode_loop import model_device, profile_table, prompts_for

    from cascade_cli.engines.local.rollout.generation import Generator

    generator = Generator(model_dir, backend="hf", seed=0)
    prompts = prompts_for(generator.tokenizer, 2 if quick else 32)
    steps = 8 if quick else 64
    generator.generate(prompts[:2], n=2, max_new_tokens=4)  # warm-up
    device = model_device(generator.model)
    print(f"5. one hf decode call on {device}: {len(prompts)} prompts x 8, {steps} tokens, top-p 0.95")
    call = lambda: generator.generate(prompts, n=8, max_new_tokens=steps, temperature=1.0, top_p=0.95, stop=[])  # noqa: E731
    if device.startswith("cuda"):
        import warnings

        torch.cuda.set_sync_debug_mode("warn")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        torch.cuda.set_sync_debug_mode(0)
        syncs = sum("synchroniz" in str(w.message) for w in caught)
        print(f"   host syncs: {syncs} in {steps} decode steps ({syncs / steps:.1f} a step, prefill included)")
    began = time.perf_counter()
    call()
    print(f"   {(time.perf_counter() - began) / steps * 1000:.1f} ms per step (prefill included)")
    print("\n".join("   " + line for line in profile_table(call, device).splitlines()))
    generator.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m", help="`smollm2-135m` or `gguf:PATH`")
    parser.add_argument("--if-steps", type=int, default=6)
    parser.add_argument("--backend", default="hf", choices=["hf", "auto", "vllm"])
    parser.add_argument("--quick", action="store_true", help="every part shrunk: a CPU smoke run")
    parser.add_argument("--out", default=str(ROOT / "runs" / "gpu_check"))
    parser.add_argument("--skip", default="", help="parts to skip, e.g. tiny,ifeval")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # progress shows in a log as it happens
    if not (args.model == "smollm2-135m" or args.model.startswith("gguf:")):
        parser.error(f"--model: expected `smollm2-135m` or `gguf:PATH`; found {args.model!r}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    versions()
    from cascade_cli.models.resolve import resolve_model

    converted = time.perf_counter()
    model_dir = resolve_model(args.model)
    print(f"model {args.model}: {model_dir} (ready in {time.perf_counter() - converted:.1f} s)\n")
    skip = set(args.skip.split(","))
    step_times: list[float] = []
    busy = None
    with GpuSampler() as sampler:
        parts = [
            ("tiny", lambda: tiny_rl(out, sampler, args.quick)),
            ("ifeval", lambda: ifeval_base(args.model, out, sampler, args.backend, args.quick)),
            ("if_rl", lambda: step_times.extend(if_rl(args.model, out, sampler, args.backend, args.if_steps, args.quick))),
            ("generation", lambda: generation_sides(model_dir, sampler, args.quick)),
            ("profile", lambda: profile_decode(model_dir, args.quick)),
        ]  # fmt: skip
        for name, part in parts:
            if name in skip:
                continue
            if not args.quick and time.perf_counter() - began > BUDGET_S:  # a CPU smoke run runs every part
                print(f"({name}: skipped, past the {BUDGET_S} s budget)")
                continue
            result = part()
            busy = result if name == "generation" else busy
    print(f"\nall parts in {time.perf_counter() - began:.0f} s")
    if step_times:
        median = statistics.median(step_times)
        verdict = "met" if median <= STEP_GOAL_S else f"missed by {median - STEP_GOAL_S:.1f} s"
        print(f"goal: IF-RL step median <= {STEP_GOAL_S:.0f} s with --backend {args.backend}: {median:.1f} s ({verdict})")
    if busy is not None:
        verdict = "met" if busy >= BUSY_GOAL else f"missed by {BUSY_GOAL - busy:.0f} points"
        print(f"goal: GPU busy >= {BUSY_GOAL:.0f}% while the hf loop generates: {busy:.0f}% ({verdict})")


if __name__ == "__main__":
    main()
