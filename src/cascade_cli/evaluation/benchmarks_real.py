"""GSM8K and MBPP, the real benchmarks of the smol cascade, beside humaneval / ifeval / math500 (registered
from evaluation/benchmarks.py). Data: `shared/data/real/` (see its SOURCES.md).

    gsm8k   the 1,319 test problems; id = the 0-based line number in test.jsonl, as a string; label = the
            final answer after `####`; posed like MATH-500 (reason step by step, answer in \\boxed{});
            read as lm-eval's gsm8k task reports it, `flexible-extract` (the last number of the response)
    mbpp    the 500 test tasks (task ids 11-510); id = the task id, as a string; label = its `test_list`
            (+ `test_setup_code`) as an assert label; posed the usual way (the task and its first test)

Neither is a paper benchmark: their defaults are the common small-model settings (greedy pass@1, k = 1).
"""

from __future__ import annotations

from typing import Any

from cascade_cli.data.formats_real import GSM8K_TEMPLATE, MBPP_TEMPLATE, gsm8k_solution, mbpp_label
from cascade_cli.data.shared_paths import shared_file
from cascade_cli.evaluation.benchmark_rows import Benchmark, _row
from cascade_cli.jsonl import iter_jsonl

GSM8K_FILE = "real/gsm8k/test.jsonl"
MBPP_FILE = "real/mbpp/mbpp.jsonl"
MBPP_TEST_IDS = range(11, 511)  # the standard test split (mbpp/README.md)


def load_gsm8k() -> list[dict[str, Any]]:
    path = shared_file(GSM8K_FILE, "gsm8k")
    rows = []
    for line, raw in iter_jsonl(path):
        _, final = gsm8k_solution(raw["answer"])
        prompt = GSM8K_TEMPLATE.format(question=raw["question"])
        rows.append(
            _row(str(line - 1), "math", prompt, {"answer": final}, "think", str(path), question=raw["question"],
                 reference=f"The answer is $\\boxed{{{final}}}$.")
        )  # fmt: skip
    return rows


def load_mbpp() -> list[dict[str, Any]]:
    path = shared_file(MBPP_FILE, "mbpp")
    rows = []
    for _, raw in iter_jsonl(path):
        if raw["task_id"] not in MBPP_TEST_IDS:
            continue
        prompt = MBPP_TEMPLATE.format(text=raw["text"].strip(), test=raw["test_list"][0].strip())
        code = raw["code"].replace("\r\n", "\n").expandtabs(4).rstrip()
        rows.append(
            _row(str(raw["task_id"]), "code", prompt, mbpp_label(raw), "think", str(path), question=raw["text"],
                 reference=f"```python\n{code}\n```")
        )  # fmt: skip
    return rows


# default_k / default_temperature / default_max_tokens: greedy pass@1 with room for a worked solution.
REAL_BENCHMARKS = {
    bench.name: bench
    for bench in (
        Benchmark("gsm8k", "math", load_gsm8k, "GSM8K test (1,319 grade-school math problems)", default_k=1,
                  default_temperature=0.0, default_max_tokens=512, source=GSM8K_FILE, extraction="flexible"),
        Benchmark("mbpp", "code", load_mbpp, "MBPP test (500 Python tasks, ids 11-510)", default_k=1,
                  default_temperature=0.0, default_max_tokens=512, source=MBPP_FILE),
    )
}  # fmt: skip
