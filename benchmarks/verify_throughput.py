"""Verifier throughput, ours against the reference implementations, side by side in one process tree.

Sections (run all, or pick with --section NAME, repeatable):
  math   1,024 MATH-500 checks (correct and wrong responses) through `verifiers.verify_batch` with 1 and 2
         workers, against plain math-verify (`verify(parse(gold), parse(response))`, its signal timeouts,
         main thread). Prints rows/s, seconds per 1,024, the ratio, and where the two disagree.
         Reference point: AceReason reported 3.9 s per 1,024 math checks with 64 workers.

  math_checkset  precision, recall and fast-path share on the math check sets and MATH-500 reference
         solutions (benchmarks/math_fidelity.py).

  if     IFEval scoring of the 541 GPT-4 rows by ours and by lm_eval's reference implementation, same process
         tree: rows/s of each, the ratio, identical verdicts (benchmarks/ifeval_vs_reference.py).

A section is a function `(args) -> None` registered in SECTIONS.

Run: PYTHONPATH=src python benchmarks/verify_throughput.py [--section math] [--rows 1024] [--workers 1 2]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
ACEREASON_SECONDS_PER_1024 = 3.9  # AceReason-Nemotron, 64 workers (as reported; not measured here)


def shared_data_dir() -> Path:
    candidates = [Path(os.environ["CASCADE_SHARED_DATA"])] if os.environ.get("CASCADE_SHARED_DATA") else []
    candidates += [REPO.parent / "shared" / "data", REPO / "shared" / "data", Path("/work/shared/data")]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    sys.exit("shared benchmark data not found (set CASCADE_SHARED_DATA)")


# ---- math -------------------------------------------------------------------------------------------


def math_records(count: int) -> list[dict[str, Any]]:
    """`count` rollout records from MATH-500: a quarter each of full reference solutions, boxed correct
    answers after a think block, answers with one number perturbed, and another problem's answer."""
    rows = [
        json.loads(line) for line in (shared_data_dir() / "math500" / "test.jsonl").read_text().splitlines()
    ]
    records = []
    for index in range(count):
        row = rows[index % len(rows)]
        kind = index % 4
        answer = row["answer"]
        if kind == 0:
            response = row["solution"]
        elif kind == 1:
            response = f"<think>\nWorking it out.\n</think>\n\nThe final answer is $\\boxed{{{answer}}}$."
        elif kind == 2:
            digit = re.search(r"\d+", answer)
            wrong = (
                answer[: digit.start()] + str(int(digit.group(0)) + 1) + answer[digit.end() :]
                if digit
                else "0"
            )
            response = f"<think>\nWorking it out.\n</think>\n\nThe final answer is $\\boxed{{{wrong}}}$."
        else:
            offset = 13
            while rows[(index * 7 + offset) % len(rows)]["answer"].replace(" ", "") == answer.replace(
                " ", ""
            ):
                offset += 1
            other = rows[(index * 7 + offset) % len(rows)]["answer"]
            response = f"<think>\nWorking it out.\n</think>\n\nSo the answer is \\boxed{{{other}}}."
        records.append(
            {
                "id": f"{row['unique_id']}#{kind}",
                "prompt": row["problem"],
                "response": response,
                "label": {"answer": answer},
                "domain": "math",
                "mode": "think",
                "finish_reason": "stop",
            }
        )
    return records


def plain_math_verify(records: list[dict[str, Any]]) -> list[bool]:
    """The usual way to call math-verify: parse gold and the whole response, verify (main thread only)."""
    from math_verify import parse, verify

    return [bool(verify(parse(f"${r['label']['answer']}$"), parse(r["response"]))) for r in records]


def timed(function: Callable[[], Any]) -> tuple[float, float, Any]:
    """(wall seconds, CPU seconds of this process and its finished children, result)."""
    started, cpu_started = time.perf_counter(), _cpu_seconds()
    result = function()
    return time.perf_counter() - started, _cpu_seconds() - cpu_started, result


def _cpu_seconds() -> float:
    # On a shared machine wall time is noise; CPU time says what an idle core would take.
    usage = os.times()
    return usage.user + usage.system + usage.children_user + usage.children_system


def section_math(args: argparse.Namespace) -> None:
    from cascade_cli.verifiers import verify_batch
    from cascade_cli.verifiers.math_reference import parse_gold

    records = math_records(args.rows)
    options = {"math": {"code_switch_reward": None}}  # throughput of the answer check itself
    # Warm both sides on the same slice (imports, sympy's lazily loaded code paths); fork inherits it.
    verify_batch(records[: args.warmup], domain="math", options=options)
    plain_math_verify(records[: args.warmup])
    print(f"math: {len(records)} checks from MATH-500 (cpu cores: {os.cpu_count()})")
    print(
        f"{'implementation':<34}{'workers':>8}{'seconds':>10}{'cpu s':>8}{'rows/s':>10}{'s/1024':>9}{'pass':>7}"
    )
    ours: dict[int, tuple[float, list]] = {}
    for workers in args.workers:
        parse_gold.cache_clear()  # no head start from a warm gold cache
        seconds, cpu, scores = timed(
            lambda w=workers: verify_batch(records, domain="math", workers=w, options=options)
        )
        passed = sum(score.passed for score in scores)
        print(
            f"{'cascade verify_batch':<34}{workers:>8}{seconds:>10.3f}{cpu:>8.2f}{len(records) / seconds:>10.1f}"
            f"{seconds * 1024 / len(records):>9.3f}{passed:>7}"
        )
        ours[workers] = (seconds, scores, cpu)
    plain_seconds, plain_cpu, plain = timed(lambda: plain_math_verify(records))
    print(
        f"{'math-verify parse+verify (plain)':<34}{1:>8}{plain_seconds:>10.3f}{plain_cpu:>8.2f}"
        f"{len(records) / plain_seconds:>10.1f}"
        f"{plain_seconds * 1024 / len(records):>9.3f}{sum(plain):>7}"
    )
    print(
        f"{'AceReason (reported, 64 workers)':<34}{64:>8}{'':>10}{'':>10}{ACEREASON_SECONDS_PER_1024:>9.3f}"
    )
    for workers, (seconds, _, cpu) in ours.items():
        print(
            f"speed-up over plain math-verify, {workers} worker(s): {plain_seconds / seconds:.1f}x wall, "
            f"{plain_cpu / cpu:.1f}x CPU seconds (the figure a loaded machine does not distort)"
        )
    _, scores, _ = ours[args.workers[0]]
    paths = Counter(score.details.get("path") for score in scores)
    print(f"decided by: {dict(paths)}")
    expected = [index % 4 < 2 for index in range(len(records))]
    ours_right = sum(score.passed == want for score, want in zip(scores, expected, strict=True))
    plain_right = sum(result == want for result, want in zip(plain, expected, strict=True))
    print(
        f"agreement with the construction (quarters 1-2 correct, 3-4 wrong): ours {ours_right}/{len(records)}, "
        f"plain math-verify {plain_right}/{len(records)}"
    )
    disagreements = [
        (record["id"], score.details.get("extracted"), result)
        for record, score, result in zip(records, scores, plain, strict=True)
        if score.passed != result
    ]
    print(f"ours and plain math-verify disagree on {len(disagreements)} rows")
    for row_id, extracted, result in disagreements[: args.show]:
        print(
            f"  {row_id}: ours {'wrong' if result else 'correct'} (extracted {extracted!r}), plain {result}"
        )


def section_if(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from ifeval_vs_reference import print_result, run_section

    result = run_section(repeats=2)
    print_result(result)
    print(f"  rows the two disagree on: {result['disagreeing_keys']}")


def section_math_checkset(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from math_fidelity import main as fidelity

    fidelity()  # precision, recall and the fast path's share on the check sets (benchmarks/math_fidelity.py)


SECTIONS: dict[str, Callable[[argparse.Namespace], None]] = {
    "math": section_math,
    "math_checkset": section_math_checkset,
    "if": section_if,
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--section", action="append", choices=sorted(SECTIONS), help="default: all sections")
    parser.add_argument("--rows", type=int, default=1024, help="math checks to time (default 1024)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts (default 1 2)")
    parser.add_argument("--warmup", type=int, default=128, help="records run untimed first by each side")
    parser.add_argument("--show", type=int, default=10, help="disagreements to print")
    args = parser.parse_args(argv)
    for name in args.section or list(SECTIONS):
        SECTIONS[name](args)
        print()


if __name__ == "__main__":
    main()
