"""The `cascade` command line: one thin function per command (parse -> build stage config -> call a runner).

Commands delivered by later work are registered only once they work.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import click
import typer
from typer.core import TyperGroup

from cascade_cli import __version__
from cascade_cli.console import print_error
from cascade_cli.errors import CascadeRunError, CascadeUsageError


class _CascadeGroup(TyperGroup):
    """Turns our errors into one line and an exit code (2 for usage errors) instead of a traceback."""

    def invoke(self, ctx: click.Context):  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except (CascadeUsageError, CascadeRunError) as error:
            print_error(str(error))
            raise typer.Exit(error.exit_code) from None


def _app(name: str, help_text: str) -> typer.Typer:
    return typer.Typer(
        name=name,
        help=help_text,
        cls=_CascadeGroup,
        no_args_is_help=True,
        add_completion=name == "cascade",
        pretty_exceptions_enable=False,
        rich_markup_mode="rich",
        context_settings={"help_option_names": ["-h", "--help"]},
    )


app = _app(
    "cascade",
    "Cascade RL post-training (Nemotron-Cascade): SFT -> RLHF -> RLVR per domain, as composable commands.\n\n"
    "Example: [bold]cascade recipe run recipes/tiny.yaml[/]",
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"cascade {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        Optional[bool],
        typer.Option("--version", callback=_version_callback, is_eager=True, help="Print the version and exit."),
    ] = None,
) -> None:
    """Cascade RL post-training toolkit."""


def main() -> None:
    app()


# ----------------------------------------------------------------------------------------------------------
# prepare-data (foundation)
# ----------------------------------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------------------------------
# sft (foundation)
# ----------------------------------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------------------------------
# rlhf (RM + GRPO on RM scores)
# ----------------------------------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------------------------------
# rlvr --domain (GRPO)
# ----------------------------------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------------------------------
# verify (verifiers; reward service)
# ----------------------------------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------------------------------
# eval / report
# ----------------------------------------------------------------------------------------------------------


def _print_eval_table(results: dict, title: str) -> None:
    from rich.table import Table

    from cascade_cli.console import stdout

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


@app.command("eval")
def eval_command(
    model: Annotated[Path | None, typer.Option("--model", help="Checkpoint directory (HF save_pretrained).")] = None,
    benchmarks: Annotated[
        str | None,
        typer.Option("--benchmarks", help="Comma-separated: math500, aime24, aime25, ifeval, humaneval, code_stdio, "
                     "tiny_math, tiny_code, tiny_if, mcq:FILE, code_stdio:FILE, hf:DATASET[:SPLIT]."),
    ] = None,
    benchmark_file: Annotated[
        Path | None, typer.Option("--benchmark-file", help="A local JSONL benchmark (canonical or raw rows).")
    ] = None,
    domain: Annotated[str | None, typer.Option("--domain", help="Domain for --benchmark-file / hf: / --responses.")] = None,
    responses: Annotated[
        Path | None, typer.Option("--responses", help="Score this JSONL of responses instead of generating.")
    ] = None,
    k: Annotated[int | None, typer.Option("--k", help="Samples per problem (default: the benchmark's).")] = None,
    mode: Annotated[str | None, typer.Option("--mode", help="think | no_think (default: the benchmark's).")] = None,
    max_tokens: Annotated[int, typer.Option("--max-tokens", help="Max new tokens per sample.")] = 1024,
    temperature: Annotated[float, typer.Option("--temperature")] = 0.6,
    top_p: Annotated[float, typer.Option("--top-p")] = 0.95,
    limit: Annotated[int | None, typer.Option("--limit", help="Only the first N problems of each benchmark.")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Where results.json and samples.jsonl go.")] = None,
    backend: Annotated[str, typer.Option("--backend", help="auto | vllm | hf")] = "auto",
    seed: Annotated[int, typer.Option("--seed")] = 0,
    workers: Annotated[int, typer.Option("--workers", help="Verifier processes.")] = 1,
) -> None:
    """Evaluate a checkpoint on benchmarks (avg@k and pass@k), or score a responses file.

    Example: cascade eval --model runs/tiny/math_rl --benchmarks tiny_math,math500 --k 4 --limit 50
    """
    from cascade_cli.console import console
    from cascade_cli.evaluation.run import evaluate_checkpoint, score_responses

    if responses is not None:
        if model is not None:
            raise CascadeUsageError("give either --model (generate) or --responses (score a file), not both")
        out = out or Path("runs") / "eval" / responses.stem
        with console.status(f"scoring {responses}"):
            results = score_responses(
                responses, benchmarks, domain=domain, benchmark_file=benchmark_file, limit=limit, k=k,
                workers=workers, out_dir=out,
            )
        _print_eval_table(results, f"responses {responses}")
    else:
        if model is None:
            raise CascadeUsageError("--model CKPT is required (or --responses FILE to score given responses)")
        out = out or Path("runs") / "eval" / model.name
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console) as bar:
            task = bar.add_task("loading", total=None)

            def report(name: str, done: int, total: int) -> None:
                verb = "generating + scoring" if done < total else "done"
                bar.update(task, description=f"{name}: {verb} ({total} problems)")

            results = evaluate_checkpoint(
                model, benchmarks or [], k, mode=mode, max_tokens=max_tokens, temperature=temperature, top_p=top_p,
                limit=limit, backend=backend, seed=seed, workers=workers, out_dir=out,
                benchmark_file=benchmark_file, domain=domain, progress=report,
            )
        _print_eval_table(results, f"{model} ({results['settings']['backend_used']})")
    console.print(f"results: {out / 'results.json'}  samples: {out / 'samples.jsonl'}")


@app.command("report")
def report_command(
    run_dir: Annotated[Path, typer.Argument(help="Run directory with eval/<stage>/results.json (and run.json).")],
    max_regression: Annotated[
        float, typer.Option("--max-regression", help="Flag a drop of more than this many points after a stage.")
    ] = 3.0,
    fail_on_regression: Annotated[
        bool, typer.Option("--fail-on-regression", help="Exit 1 when a regression is flagged.")
    ] = False,
) -> None:
    """Write report.md (stage x benchmark table with deltas) and report.png (scores across stages).

    Example: cascade report runs/tiny --max-regression 3
    """
    from cascade_cli.console import console, print_warning, stdout
    from cascade_cli.evaluation.report import write_report

    report = write_report(run_dir, max_regression=max_regression)
    stdout.print(Path(report["markdown"]).read_text())
    for regression in report["regressions"]:
        print_warning(
            f"{regression['benchmark']} fell {-regression['delta']:.1f} points after stage {regression['stage']}"
        )
    console.print(f"report: {report['markdown']}  plot: {report['plot']}")
    if fail_on_regression and report["regressions"]:
        raise typer.Exit(1)


# ----------------------------------------------------------------------------------------------------------
# push
# ----------------------------------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------------------------------
# recipe run|plan|validate|list|show|cp
# ----------------------------------------------------------------------------------------------------------
