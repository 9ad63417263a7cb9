"""Load test of the reward service (`cascade verify --serve`) against calling the verifier in-process.

N requests (default 10,000) of one sample each, as OpenRLHF 0.11.2 sends them, from C concurrent clients
(default 256) on loopback. Prints requests/s, p50/p99 latency, errors (non-200, or a reward different from
the in-process verifier's) and the ratio to in-process scoring of the same records in this process.

    PYTHONPATH=src python benchmarks/reward_service_load.py [--domain math|swe] [--requests 10000]
        [--concurrency 256] [--workers 2] [--max-seconds 600]

Domain `math` uses MATH-500 reference answers (half boxed correctly, half wrong); when the math verifier is
not installed the default falls back to `swe` (the 50 SWE-bench Verified golden patches, exact and
mutated). Bounded: the run stops after --max-seconds and reports what it finished.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "src"))

from cascade_cli.chat import render_prompt  # noqa: E402
from cascade_cli.reward_protocol import build_records  # noqa: E402
from cascade_cli.verifiers.batch import score_records, verifier_problem  # noqa: E402


def shared_data() -> Path:
    for candidate in (
        os.environ.get("CASCADE_SHARED_DATA"),
        REPO_ROOT.parent / "shared" / "data",
        Path("/work/shared/data"),
    ):
        if candidate and Path(candidate).is_dir():
            return Path(candidate)
    raise SystemExit("shared/data not found; set CASCADE_SHARED_DATA")


def math_samples() -> list[tuple[str, str, str]]:
    rows = [json.loads(line) for line in (shared_data() / "math500" / "test.jsonl").open()]
    samples = []
    for index, row in enumerate(rows):
        prompt = render_prompt(row["problem"] + "\nPut the final answer in \\boxed{}.", mode="think")
        answer = row["answer"] if index % 2 == 0 else rows[(index + 7) % len(rows)]["answer"] + "1"
        response = f"<think>\nworking...\n</think>\n\nThe answer is $\\boxed{{{answer}}}$.<|im_end|>"
        samples.append((prompt, json.dumps({"domain": "math", "answer": row["answer"]}), response))
    return samples


def swe_samples() -> list[tuple[str, str, str]]:
    from cascade_cli.verifiers.swe import preimage_from_patch

    rows = [json.loads(line) for line in (shared_data() / "swe" / "instances.jsonl").open()]
    samples = []
    for index, row in enumerate(rows):
        label = {
            "domain": "swe",
            "golden_patch": row["patch"],
            "original_files": preimage_from_patch(row["patch"]),
        }
        prompt = render_prompt(row["problem_statement"][:2000], mode="think")
        patch = (
            row["patch"]
            if index % 2 == 0
            else re.sub(r"(?m)^\+(?!\+\+)(.*)$", r"+\1  # changed", row["patch"], count=1)
        )
        samples.append((prompt, json.dumps(label), f"<think>\nfix\n</think>\n```diff\n{patch}```<|im_end|>"))
    return samples


def start_service(workers: int) -> tuple[subprocess.Popen, int]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "cascade_cli", "verify", "--serve", "--port", "0", "--workers", str(workers)],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    deadline = time.time() + 120
    while time.time() < deadline:
        match = re.search(r"http://127\.0\.0\.1:(\d+)", proc.stderr.readline())
        if match:
            # Drain the per-request log lines so the pipe never fills.
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
            return proc, int(match.group(1))
    proc.kill()
    raise SystemExit("the service did not start")


async def load(port: int, bodies: list[dict], expected: list[float], concurrency: int, max_seconds: float):
    import aiohttp

    latencies: list[float] = []
    errors = 0
    next_index = 0
    stop_at = time.perf_counter() + max_seconds
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=180)
    ) as session:

        async def client() -> None:
            nonlocal next_index, errors
            while next_index < len(bodies) and time.perf_counter() < stop_at:
                index = next_index
                next_index += 1
                start = time.perf_counter()
                try:
                    async with session.post(
                        f"http://127.0.0.1:{port}/get_reward", json=bodies[index]
                    ) as answer:
                        reply = await answer.json()
                        ok = answer.status == 200 and reply["rewards"] == expected[index]
                except Exception:
                    ok = False
                latencies.append(time.perf_counter() - start)
                errors += not ok

        start = time.perf_counter()
        await asyncio.gather(*[client() for _ in range(concurrency)])
        wall = time.perf_counter() - start
    return latencies, errors, wall


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--domain", choices=["math", "swe"], default=None)
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max-seconds", type=float, default=600)
    parser.add_argument("--in-process-seconds", type=float, default=10)
    args = parser.parse_args()

    domain = args.domain or ("math" if verifier_problem("math", {}) is None else "swe")
    if verifier_problem(domain, {}):
        raise SystemExit(f"domain {domain}: {verifier_problem(domain, {})}")
    samples = math_samples() if domain == "math" else swe_samples()
    bodies = []
    for index in range(args.requests):
        prompt, label, response = samples[index % len(samples)]
        bodies.append({"query": [prompt + response], "prompts": [prompt], "labels": [label]})

    # In-process: the same records through the same scoring code, one after another, in this process. One
    # untimed pass first (the math verifier caches parsed gold answers; the service's workers warm up too).
    unique = [build_records(body)[0] for body in bodies[: len(samples)]]
    rewards = [result.reward for result in score_records(unique)]
    expected = [rewards[index % len(samples)] for index in range(args.requests)]
    start = time.perf_counter()
    scored = 0
    while time.perf_counter() - start < args.in_process_seconds:
        score_records(unique[scored % len(unique) : scored % len(unique) + 50])
        scored += len(unique[scored % len(unique) : scored % len(unique) + 50])
    in_process_rps = scored / (time.perf_counter() - start)

    proc, port = start_service(args.workers)
    try:
        latencies, errors, wall = asyncio.run(
            load(port, bodies, expected, args.concurrency, args.max_seconds)
        )
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    done = len(latencies)
    quantiles = statistics.quantiles(latencies, n=100, method="inclusive")
    service_rps = done / wall
    print(
        f"domain={domain} requests={done}/{args.requests} concurrency={args.concurrency} "
        f"service_workers={args.workers} cpus={os.cpu_count()} mean_reward={sum(rewards) / len(rewards):.3f}"
    )
    print(
        f"service:    {service_rps:9.1f} requests/s  p50 {quantiles[49] * 1000:8.1f} ms  "
        f"p99 {quantiles[98] * 1000:8.1f} ms  errors {errors}"
    )
    print(f"in-process: {in_process_rps:9.1f} records/s (one thread, this process)")
    print(f"ratio service / in-process: {service_rps / in_process_rps:.2f}")


if __name__ == "__main__":
    main()
