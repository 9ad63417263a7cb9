"""`cascade eval`: generate k samples per problem, score them, write `results.json` and `samples.jsonl`.

`evaluate_checkpoint` is also the per-stage hook for recipes (`evaluate_stage` writes RUN_DIR/eval/STAGE/).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cascade_cli.chat import NO_FLAG, check_mode, render_prompt
from cascade_cli.config.eval import EvalSettings
from cascade_cli.console import console, print_warning
from cascade_cli.errors import CascadeUsageError
from cascade_cli.evaluation.benchmarks import Benchmark, resolve_benchmarks
from cascade_cli.evaluation.responses import match_responses, self_labelled_records
from cascade_cli.evaluation.scoring import score_benchmark
from cascade_cli.jsonl import write_jsonl
from cascade_cli.manifest import require_model_dir
from cascade_cli.progress import Progress as ProgressBar
from cascade_cli.records import rollout_record
from cascade_cli.template_choice import RECORD_KEY, TemplateUse, choose_template
from cascade_cli.trackers import report_evaluation
from cascade_cli.verifiers import known_domains
from cascade_cli.verifiers.batch import verifier_problem

RESULTS_NAME = "results.json"
SAMPLES_NAME = "samples.jsonl"
SETTING_KEYS = [setting.name for setting in dataclasses.fields(EvalSettings)]

# (benchmark, done, total[, its summary when done]) after each step
Progress = Callable[..., None]


def _load(benchmarks: list[Benchmark], limit: int | None) -> dict[str, list[dict[str, Any]]]:
    loaded = {}
    for bench in benchmarks:
        rows = bench.rows(limit)
        if not rows:
            raise CascadeUsageError(f"benchmark {bench.name}: no rows ({bench.source or bench.description})")
        loaded[bench.name] = rows
    return loaded


def _check_verifiers(groups: list[tuple[str, str]]) -> None:
    """Fail before any model loads when a benchmark's verifier cannot be built (unknown domain, not installed)."""
    for name, domain in groups:
        if domain not in known_domains():
            raise CascadeUsageError(
                f"benchmark {name}: no verifier for domain {domain!r}; known domains: {', '.join(known_domains())}"
            )
        problem = verifier_problem(domain, {})  # builds the cached verifier that scoring then uses
        if problem:
            raise CascadeUsageError(f"benchmark {name}: {problem}")


def planned_tokens(specs: list[Benchmark], rows_by_name: dict[str, list[Any]], settings: EvalSettings) -> int:
    """Every answer of the evaluation at full length: what `rollout.backend: auto` weighs against vLLM's
    engine start (engines/local/rollout/rollout_backend.py)."""
    return sum(
        len(rows_by_name[bench.name]) * (settings.k or bench.default_k) * (settings.max_tokens or bench.default_max_tokens)
        for bench in specs
    )


def warn_dropped_mode(template: TemplateUse, mode: str | None) -> None:
    """A mode flag asked for under a template that knows none is left out, and the user told so."""
    if mode in (None, NO_FLAG) or template.mode_flags:
        return
    print_warning(
        f"mode {mode}: left out, the model's own chat template knows no mode flag "
        f"(chat_template {template.choice}; chat_template cascade renders it)"
    )


def write_results(out_dir: str | Path, results: dict[str, Any], samples: list[dict[str, Any]]) -> Path:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / RESULTS_NAME).write_text(json.dumps(results, indent=2, default=str) + "\n")
    write_jsonl(out_dir / SAMPLES_NAME, samples)
    return out_dir / RESULTS_NAME


def evaluate_checkpoint(
    model_dir: str | Path,
    benchmarks: list[str] | list[Benchmark] | str,
    settings: EvalSettings | None = None,
    *,
    out_dir: str | Path | None = None,
    benchmark_file: str | Path | None = None,
    domain: str | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Generate k samples per problem with the checkpoint and score them -> the results dict.

    `settings` (default `EvalSettings()`): `k`, `mode`, `temperature` and `max_tokens` unset mean each
    benchmark's own (k: 64 AIME, 8 IF/code, 1 gsm8k/mbpp; mode: no_think for IFEval; temperature 0.6, greedy
    for gsm8k/mbpp; the values used are in each benchmark's summary). Writes `results.json` and `samples.jsonl` under `out_dir` when given.
    """
    settings = settings or EvalSettings()
    from cascade_cli.models.resolve import resolve_model
    from cascade_cli.models.tiny import is_embedded_spec

    if is_embedded_spec(str(model_dir)):
        model_dir = resolve_model(str(model_dir))  # `tiny`, `smollm2-135m`, `gguf:PATH`: built offline
    model_dir = require_model_dir(model_dir, "checkpoint")
    specs = [b for b in benchmarks if isinstance(b, Benchmark)] if isinstance(benchmarks, list) else []
    names = [b for b in benchmarks if isinstance(b, str)] if isinstance(benchmarks, list) else benchmarks
    specs += resolve_benchmarks(names, benchmark_file, domain) if names or benchmark_file else []
    rows_by_name = _load(specs, settings.limit)  # bad names, files and domains fail before the model loads
    _check_verifiers([(bench.name, bench.domain) for bench in specs])

    from cascade_cli.engines.local.rollout.generation import Generator

    started = time.time()
    generator = Generator(
        str(model_dir), backend=settings.backend, seed=settings.seed,
        planned_tokens=planned_tokens(specs, rows_by_name, settings),
    )
    results: dict[str, Any] = {}
    samples: list[dict[str, Any]] = []
    first_prompt: str | None = None
    try:
        template = choose_template(generator.tokenizer, settings.chat_template, model_dir=model_dir)
        warn_dropped_mode(template, settings.mode)
        console.print(template.line(model_dir), soft_wrap=True)
        for bench in specs:
            rows = rows_by_name[bench.name]
            bench_k = settings.k or bench.default_k
            bench_mode = check_mode(settings.mode or bench.mode) if template.mode_flags else NO_FLAG
            prompts = [render_prompt(row["prompt"], bench_mode, generator.tokenizer) for row in rows]
            first_prompt = prompts[0] if first_prompt is None else first_prompt
            if progress:
                progress(bench.name, 0, len(rows))
            t0 = time.time()
            max_tokens = settings.max_tokens or bench.default_max_tokens
            temperature = bench.default_temperature if settings.temperature is None else settings.temperature
            completions = generator.generate(
                prompts, n=bench_k, max_new_tokens=max_tokens, temperature=temperature, top_p=settings.top_p
            )
            gen_seconds = time.time() - t0
            records = [
                {
                    **rollout_record(row, completion.text, domain=bench.domain, mode=bench_mode,
                                     finish_reason=completion.finish_reason),
                    "sample_index": index,
                }
                for row, outs in zip(rows, completions, strict=True)
                for index, completion in enumerate(outs)
            ]
            summary, verdicts = score_benchmark(
                records, name=bench.name, domain=bench.domain, metric=bench.metric, k=bench_k, workers=settings.workers,
                options=bench.verifier_options(),
            )
            summary.update(
                mode=bench_mode, temperature=temperature, max_tokens=max_tokens, generation_seconds=round(gen_seconds, 3)
            )
            results[bench.name] = summary
            samples.extend({"benchmark": bench.name, **verdict} for verdict in verdicts)
            if progress:
                progress(bench.name, len(rows), len(rows), summary)
        backend_used = getattr(generator, "backend", settings.backend)
    finally:
        generator.close()
    output = {
        "model": str(model_dir),
        "settings": {**{key: getattr(settings, key) for key in SETTING_KEYS}, "backend_used": backend_used},
        RECORD_KEY: template.record(first_prompt),
        "benchmarks": results,
        "seconds": round(time.time() - started, 3),
        "evaluated_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    if out_dir is not None:
        write_results(out_dir, output, samples)
        report_evaluation(settings.report_to, out_dir, output, samples, model=Path(model_dir).name)
    return output


def score_responses(
    responses: str | Path,
    benchmarks: list[str] | str | None = None,
    *,
    domain: str | None = None,
    benchmark_file: str | Path | None = None,
    limit: int | None = None,
    k: int | None = None,
    workers: int = 1,
    out_dir: str | Path | None = None,
) -> dict[str, Any]:
    """Score a responses file (format in `evaluation/responses.py`) without generating."""
    results: dict[str, Any] = {}
    samples: list[dict[str, Any]] = []
    if benchmarks or benchmark_file:
        specs = resolve_benchmarks(benchmarks, benchmark_file, domain)
        rows_by_name = _load(specs, None)  # match against every row; --limit then keeps the first N problems
        matched = match_responses(responses, rows_by_name)
        if limit:
            for name, records in matched.items():
                kept = {str(row["id"]) for row in rows_by_name[name][:limit]}
                matched[name] = [record for record in records if str(record["id"]) in kept]
        groups = [
            (bench.name, bench.domain, bench.metric, matched[bench.name], bench.verifier_options()) for bench in specs
        ]
    elif domain:
        metric = "ifeval" if domain == "if" else "accuracy"
        groups = [(Path(responses).stem, domain, metric, self_labelled_records(responses, domain), {})]
    else:
        raise CascadeUsageError(
            "--responses needs --benchmarks NAME, --benchmark-file FILE --domain D, or --domain D"
        )
    _check_verifiers([(name, bench_domain) for name, bench_domain, *_ in groups])
    for name, bench_domain, metric, records, options in groups:
        if not records:
            raise CascadeUsageError(f"responses file {responses}: no response matches benchmark {name}")
        summary, verdicts = score_benchmark(
            records, name=name, domain=bench_domain, metric=metric, k=k, workers=workers, options=options
        )
        results[name] = summary
        samples.extend({"benchmark": name, **verdict} for verdict in verdicts)
    output = {
        "responses": str(responses),
        "settings": {"k": k, "limit": limit, "domain": domain},
        "benchmarks": results,
        "evaluated_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    if out_dir is not None:
        write_results(out_dir, output, samples)
    return output


def reporting_to(bar: ProgressBar) -> Progress:
    """The `progress` callback that shows each benchmark on `bar` (a line per benchmark in a log)."""

    def report(name: str, done: int, total: int, summary: dict[str, Any] | None = None) -> None:
        if done < total:
            bar.update(note=f"{name}: generating + scoring {total} problems")
        elif summary and isinstance(summary.get("score"), (int, float)):
            cut = f", {summary['truncated']} of {summary['samples']} cut at the token limit" if "truncated" in summary else ""
            bar.advance(note=f"{name}: {summary.get('primary', 'score')} {summary['score']:.1f}{cut}")
        else:
            bar.advance(note=f"{name}: done")

    return report


def evaluate_stage(run_dir: str | Path, stage: str, model_dir: str | Path, config: Any) -> dict[str, Any]:
    """The recipe hook: evaluate a stage's checkpoint with an `EvalConfig` into RUN_DIR/eval/STAGE/."""
    from cascade_cli.evaluation.report import stage_eval_dir

    benchmarks = list(config.benchmarks)
    with ProgressBar(f"eval {stage}", len(benchmarks), unit="benchmark", note=f"loading {model_dir}",
                     line_per_update=True) as bar:
        return evaluate_checkpoint(model_dir, benchmarks, config, out_dir=stage_eval_dir(run_dir, stage),
                                   progress=reporting_to(bar))
