"""`cascade eval` (benchmarks or a responses file; its sampling flags are the `EvalSettings` fields) and
`cascade report` (the per-stage table and plot)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated, Any

import typer

from cascade_cli import files
from cascade_cli.cli.base import COMMAND, collection_values, field_option, given, with_parameters
from cascade_cli.config.eval import EvalSettings
from cascade_cli.console import console, print_warning, stdout
from cascade_cli.errors import CascadeUsageError
from cascade_cli.progress import Progress


def _print_eval_table(results: dict, title: str) -> None:
    from rich.table import Table

    table = Table(title=title)
    table.add_column("benchmark", no_wrap=True)
    for column in ("problems", "samples", "score", "metrics", "truncated", "errors"):
        table.add_column(column, justify="left" if column == "metrics" else "right")
    for name, summary in results["benchmarks"].items():
        metrics = "\n".join(f"{key} {value:.1f}" for key, value in summary["metrics"].items())
        table.add_row(
            name, str(summary["problems"]), str(summary["samples"]), f"{summary['score']:.1f}", metrics,
            str(summary["truncated"]), str(summary["errors"]),
        )
    stdout.print(table)


def eval_command(
    model: Annotated[Path | None, typer.Option("--model", help="Checkpoint directory (HF save_pretrained).")] = None,
    benchmarks: Annotated[
        str | None,
        typer.Option("--benchmarks", help="Comma-separated: math500, aime24, aime25, gsm8k, ifeval, ifbench, humaneval, "
                     "mbpp, code_stdio, tiny_math, tiny_code, tiny_if, tiny_swe; or a file: mcq:FILE (multiple-choice "
                     "rows), code_stdio:FILE, ifbench:FILE, math:FILE, ifeval:FILE; or hf:DATASET[:SPLIT] with --domain."),
    ] = None,
    benchmark_file: Annotated[
        Path | None, typer.Option("--benchmark-file", help="A local JSONL benchmark (canonical or raw rows).")
    ] = None,
    domain: Annotated[str | None, typer.Option("--domain", help="Domain for --benchmark-file / hf: / --responses.")] = None,
    responses: Annotated[
        Path | None, typer.Option("--responses", help="Score this JSONL of responses instead of generating.")
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Where results.json and samples.jsonl go.")] = None,
    **values: Any,
) -> None:
    """Evaluate a checkpoint on benchmarks (avg@k and pass@k), or score a responses file.

    Example: [bold]cascade eval --model runs/tiny/math_rl --benchmarks tiny_math,tiny_code --k 4 --limit 32
    --out runs/tiny/eval/math_rl[/]
    """
    from cascade_cli.config.build import build_stage_config
    from cascade_cli.evaluation.run import evaluate_checkpoint, reporting_to, score_responses

    settings = build_stage_config(EvalSettings, collection_values(EvalSettings, given(values)), [], where="eval")
    if responses is not None:
        if model is not None:
            raise CascadeUsageError("give either --model (generate) or --responses (score a file), not both")
        out = files.output_dir(out or Path("runs") / "eval" / responses.stem)
        with Progress("eval", note=f"scoring {responses}", transient=True):
            results = score_responses(
                responses, benchmarks, domain=domain, benchmark_file=benchmark_file, limit=settings.limit,
                k=settings.k, workers=settings.workers, out_dir=out,
            )
        _print_eval_table(results, f"responses {responses}")
    else:
        if model is None:
            raise CascadeUsageError("--model CKPT is required (or --responses FILE to score given responses)")
        out = files.output_dir(out or Path("runs") / "eval" / model.name)
        names = [name for name in (benchmarks or "").split(",") if name.strip()] + ([1] if benchmark_file else [])
        with Progress("eval", len(names) or None, unit="benchmark", note=f"loading {model}",
                      line_per_update=True) as bar:
            results = evaluate_checkpoint(
                model, benchmarks or [], settings, out_dir=out, benchmark_file=benchmark_file, domain=domain,
                progress=reporting_to(bar),
            )
        _print_eval_table(results, f"{model} ({results['settings']['backend_used']})")
    console.print(f"results: {out / 'results.json'}  samples: {out / 'samples.jsonl'}")


def report_command(
    run_dir: Annotated[Path, typer.Argument(help="Run directory with eval/<stage>/results.json (and run.json).")],
    max_regression: Annotated[
        float, typer.Option("--max-regression", help="Flag a drop of more than this many points after a stage.")
    ] = 3.0,
    fail_on_regression: Annotated[
        bool, typer.Option("--fail-on-regression", help="Exit 1 when a regression is flagged.")
    ] = False,
    fail_on_hack: Annotated[
        bool,
        typer.Option("--fail-on-hack", help="Exit 1 when a gain looks like a hack (answers halved, a group fell, "
                     "answers short of the length asked for)."),
    ] = False,
    best: Annotated[
        str | None,
        typer.Option("--best", help="Only print the name of this benchmark's best stage (a tie: the later one)."),
    ] = None,
) -> None:
    """Write report.md (stage x benchmark table with deltas, each benchmark's best stage starred; from the
    stages' samples.jsonl, IFEval's and IFBench's per-group tables and the gains that look like a hack) and
    report.png (scores across stages).

    Example: [bold]cascade report runs/tiny --max-regression 3[/]
    """
    from cascade_cli.evaluation.hack_flags import flag_line
    from cascade_cli.evaluation.report import best_stage_of, write_report

    if best is not None:
        typer.echo(best_stage_of(run_dir, best))
        return
    report = write_report(run_dir, max_regression=max_regression)
    stdout.print(Path(report["markdown"]).read_text())
    for regression in report["regressions"]:
        print_warning(
            f"{regression['benchmark']} fell {-regression['delta']:.1f} points after stage {regression['stage']}"
        )
    for flag in report["hack_flags"]:
        print_warning(f"looks like a hack: {flag_line(flag)}")
    console.print(f"report: {report['markdown']}  plot: {report['plot']}")
    if (fail_on_regression and report["regressions"]) or (fail_on_hack and report["hack_flags"]):
        raise typer.Exit(1)



def register(app: typer.Typer) -> None:
    settings = [field_option(EvalSettings, setting.name) for setting in dataclasses.fields(EvalSettings)]
    app.command("eval", **COMMAND)(with_parameters(eval_command, settings))
    app.command("report", **COMMAND)(report_command)
