"""Load test of the reward service (`cascade verify --serve`) while its scoring workers are killed at random.

Requests of one sample each, as OpenRLHF 0.11.2 sends them, from C concurrent clients (default 256) on
loopback, against a token-protected service (the token in the URL path, as `--reward.remote_url` carries
it). Meanwhile a killer SIGKILLs a random serving worker (pids from /health) at random intervals, K times
(default 24, every 2.5 s on average). The load runs until the kills are done and at least N requests
(default 3,000) have been answered, or --max-seconds. Every request must end in the right reward or an
explicit error; none may hang past the client timeout (--client-timeout, default 90 s; the service's own
deadline is --timeout 30 s).

Prints: requests, errors by kind (`worker_died_twice`, `verify_timeout`: 200 replies with reward 0 and
the flag in extra_logs; `http_<status>`, `connection`, `hung`; `wrong_reward`: a 200 reward that differs from the
in-process verifier's, which must be 0), p50/p99/max latency, requests/s, kills, workers restarted (the
service's /health), the ratio to in-process scoring of the same records, and PASS / FAIL.

    PYTHONPATH=src python benchmarks/reward_service_load.py [--domain math|swe] [--requests 3000]
        [--concurrency 256] [--workers 2] [--kills 24] [--kill-every-s 2.5] [--max-seconds 100]

`--kills 0` is the plain load test. Domain `math` uses MATH-500 reference answers (half boxed correctly,
half wrong); when the math verifier is not installed the default falls back to `swe` (the 50 SWE-bench
Verified golden patches, exact and mutated).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import secrets
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "src"))

from cascade_cli.chat import render_prompt  # noqa: E402
from cascade_cli.serve.protocol import build_records  # noqa: E402
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


def start_service(
    workers: int, token: str, timeout_s: float, log_path: str | None
) -> tuple[subprocess.Popen, int, threading.Thread, list[str]]:
    """The service in a subprocess, its token from the environment; (process, port, log drain, log lines
    that held the token). `log_path`: keep the service's log there."""
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "CASCADE_REWARD_TOKEN": token,
    }
    argv = ["verify", "--serve", "--port", "0", "--workers", str(workers), "--timeout", str(timeout_s)]
    proc = subprocess.Popen([sys.executable, "-m", "cascade_cli", *argv], stderr=subprocess.PIPE, text=True, env=env)
    leaks: list[str] = []

    def drain() -> None:  # the per-request log lines: keep the pipe from filling, and look for the token
        with open(log_path or os.devnull, "w") as sink:
            for line in proc.stderr:
                sink.write(line)
                leaks.extend([line] if token in line else [])

    deadline = time.time() + 120
    while time.time() < deadline:
        line = proc.stderr.readline()
        leaks.extend([line] if token in line else [])
        match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        if match:
            thread = threading.Thread(target=drain, daemon=True)
            thread.start()
            return proc, int(match.group(1)), thread, leaks
    proc.kill()
    raise SystemExit("the service did not start")


def classify(status: int, reply: dict, expected: float) -> str:
    """"ok", or the kind of error a request ended in."""
    if status != 200:
        return f"http_{status}"
    if reply["extra_logs"]["verify_error"]:
        error = (reply.get("details") or [{}])[0].get("error") or ""
        return "worker_died_twice" if "died twice" in error else f"verify_error: {error[:60]}"
    if reply["extra_logs"]["verify_timeout"]:
        return "verify_timeout"
    return "ok" if reply["rewards"] == expected else "wrong_reward"


async def load(base: str, bodies: list[dict], expected: list[float], args: argparse.Namespace) -> dict:
    import random

    import aiohttp

    latencies: list[float] = []
    kinds: Counter[str] = Counter()
    kills = 0
    next_index = 0
    started = time.perf_counter()
    stop_at = started + args.max_seconds
    connector = aiohttp.TCPConnector(limit=args.concurrency)
    timeout = aiohttp.ClientTimeout(total=args.client_timeout)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        def finished() -> bool:
            return time.perf_counter() > stop_at or (kills >= args.kills and len(latencies) >= args.requests)

        async def client() -> None:
            nonlocal next_index
            while not finished():
                index = next_index % len(bodies)
                next_index += 1
                start = time.perf_counter()
                try:
                    async with session.post(f"{base}/get_reward", json=bodies[index]) as answer:
                        kind = classify(answer.status, await answer.json(content_type=None), expected[index])
                except asyncio.TimeoutError:
                    kind = "hung"
                except aiohttp.ClientError as error:
                    kind = f"connection: {type(error).__name__}"
                latencies.append(time.perf_counter() - start)
                kinds[kind] += 1

        async def killer() -> None:
            nonlocal kills
            rng = random.Random(args.seed)
            async with aiohttp.ClientSession(timeout=timeout) as own:  # not queued behind the clients
                while kills < args.kills and time.perf_counter() < stop_at:
                    await asyncio.sleep(rng.uniform(0.2, 2 * args.kill_every_s - 0.2))
                    async with own.get(f"{base}/health") as answer:
                        pids = (await answer.json())["worker_pids"]
                    if pids:  # none serving: every worker is restarting; try again later
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(rng.choice(pids), signal.SIGKILL)
                            kills += 1

        await asyncio.gather(killer(), *[client() for _ in range(args.concurrency)])
        wall = time.perf_counter() - started
        # The service keeps serving: health and one more right reward after the last kill.
        async with session.get(f"{base}/health") as answer:
            health = await answer.json()
        async with session.post(f"{base}/get_reward", json=bodies[0]) as answer:
            after = classify(answer.status, await answer.json(content_type=None), expected[0])
    return {"latencies": latencies, "kinds": kinds, "kills": kills, "wall": wall, "health": health, "after": after}


def in_process_rate(unique: list[dict], seconds: float) -> float:
    """Records/s through the same scoring code, one after another, in this process."""
    start = time.perf_counter()
    scored = 0
    while time.perf_counter() - start < seconds:
        chunk = unique[scored % len(unique) : scored % len(unique) + 50]
        score_records(chunk)
        scored += len(chunk)
    return scored / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--domain", choices=["math", "swe"], default=None)
    parser.add_argument("--requests", type=int, default=3_000, help="at least this many answered requests")
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--kills", type=int, default=24, help="SIGKILLs of serving workers during the load")
    parser.add_argument("--kill-every-s", type=float, default=2.5, help="mean seconds between kills")
    parser.add_argument("--timeout", type=float, default=30, help="the service's per-request deadline")
    parser.add_argument("--client-timeout", type=float, default=90, help="a request past this has hung")
    parser.add_argument("--max-seconds", type=float, default=100)
    parser.add_argument("--in-process-seconds", type=float, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--service-log", default=None, help="write the service's log to this file")
    args = parser.parse_args()

    domain = args.domain or ("math" if verifier_problem("math", {}) is None else "swe")
    if verifier_problem(domain, {}):
        raise SystemExit(f"domain {domain}: {verifier_problem(domain, {})}")
    samples = math_samples() if domain == "math" else swe_samples()
    bodies = [
        {"query": [prompt + response], "prompts": [prompt], "labels": [label], "return_details": True}
        for prompt, label, response in samples
    ]
    # One untimed pass first (the math verifier caches parsed gold answers; the service's workers warm up too).
    unique = [build_records(body)[0] for body in bodies]
    expected = [result.reward for result in score_records(unique)]
    in_process_rps = in_process_rate(unique, args.in_process_seconds)

    token = secrets.token_urlsafe(24)
    proc, port, drain, leaks = start_service(args.workers, token, args.timeout, args.service_log)
    try:
        result = asyncio.run(load(f"http://127.0.0.1:{port}/{token}", bodies, expected, args))
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        drain.join(30)
    latencies, kinds, health = result["latencies"], result["kinds"], result["health"]
    done = len(latencies)
    quantiles = statistics.quantiles(latencies, n=100, method="inclusive")
    service_rps = done / result["wall"]
    errors = {kind: count for kind, count in sorted(kinds.items()) if kind != "ok"}
    print(
        f"domain={domain} requests={done} concurrency={args.concurrency} service_workers={args.workers} "
        f"cpus={os.cpu_count()} mean_reward={sum(expected) / len(expected):.3f} wall={result['wall']:.1f} s"
    )
    print(
        f"service:    {service_rps:9.1f} requests/s  p50 {quantiles[49] * 1000:8.1f} ms  "
        f"p99 {quantiles[98] * 1000:8.1f} ms  max {max(latencies) * 1000:8.1f} ms"
    )
    print(f"ok {kinds['ok']}  errors {sum(errors.values())}: {errors or '{}'}")
    print(
        f"kills {result['kills']}/{args.kills}  workers_restarted {health['workers_restarted']}  "
        f"deaths_in_flight {health['worker_deaths_in_flight']}  retried_requests {health['retried_requests']}  "
        f"timed_out {health['timed_out_requests']}  serving after: {result['after']} ({len(health['worker_pids'])} "
        f"workers up)"
    )
    print(f"in-process: {in_process_rps:9.1f} records/s (one thread, this process)")
    print(f"ratio service / in-process: {service_rps / in_process_rps:.2f}")
    silent = kinds["wrong_reward"] + kinds["hung"] + sum(v for k, v in kinds.items() if k.startswith("connection"))
    failures = [
        f"{silent} request(s) hung, lost their connection or got a wrong reward" if silent else "",
        f"only {result['kills']} kills" if result["kills"] < args.kills else "",
        f"the service stopped serving ({result['after']})" if result["after"] != "ok" else "",
        "the token reached the service's log" if leaks else "",
    ]
    failures = [failure for failure in failures if failure]
    print("PASS: every request got a reward or an explicit error" if not failures else "FAIL: " + "; ".join(failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
