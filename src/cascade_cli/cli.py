"""The `cascade` command line: one thin function per command (parse -> build stage config -> call a runner).

Commands delivered by later work are registered only once they work.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Optional

import typer
from typer.core import TyperGroup

from cascade_cli import __version__
from cascade_cli.console import console, print_error, stdout
from cascade_cli.errors import CascadeRunError, CascadeUsageError


class _CascadeGroup(TyperGroup):
    """Turns our errors into one line and an exit code (2 for usage errors) instead of a traceback."""

    def invoke(self, ctx):  # type: ignore[no-untyped-def]
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
        bool | None,
        typer.Option("--version", callback=_version_callback, is_eager=True, help="Print the version and exit."),
    ] = None,
) -> None:
    """Cascade RL post-training toolkit."""


def main() -> None:
    app()


# ----------------------------------------------------------------------------------------------------------
# prepare-data (foundation)
# ----------------------------------------------------------------------------------------------------------


def _comma_list(text: str | None) -> list[str] | None:
    return [item.strip() for item in text.split(",") if item.strip()] if text else None


class _PrepareDataGroup(_CascadeGroup):
    """`prepare-data [OPTIONS] [key=value ...]` prepares a source; `prepare-data filter ...` runs the subcommand.

    A click group would read the first key=value override as a subcommand name; only a known subcommand
    name in first position is one.
    """

    def parse_args(self, ctx, args):  # type: ignore[no-untyped-def]
        if args and args[0] in self.commands:
            super(TyperGroup, self).parse_args(ctx, [])  # the prepare options' defaults
            ctx._protected_args, ctx.args = [args[0]], list(args[1:])
            return ctx.args
        return super(TyperGroup, self).parse_args(ctx, args)  # options + key=value overrides


prepare_data_app = typer.Typer(
    cls=_PrepareDataGroup,
    invoke_without_command=True,
    no_args_is_help=False,
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(prepare_data_app, name="prepare-data")


@prepare_data_app.callback()
def prepare_data_command(
    ctx: typer.Context,
    overrides: Annotated[
        list[str] | None,
        typer.Argument(help="More config keys as key=value, e.g. wrong_fraction=0.3 split=test", show_default=False),
    ] = None,
    source: Annotated[
        str | None,
        typer.Option(
            "--source",
            help="tiny:DOMAIN (math|code|if|pref|general|sft|tools), a .jsonl/.json/.parquet file or folder, or a hub id.",
        ),
    ] = None,
    out: Annotated[str | None, typer.Option("--out", help="Output folder (data.jsonl, heldout.jsonl, data_card.json).")] = None,
    domain: Annotated[
        str | None, typer.Option("--domain", help="Domain of every row: sft|pref|if|math|code|swe|general.")
    ] = None,
    n: Annotated[int | None, typer.Option("--n", help="Rows to generate for tiny:* sources.")] = None,
    holdout: Annotated[int | None, typer.Option("--holdout", help="Rows held out to heldout.jsonl.")] = None,
    field_map: Annotated[
        str | None, typer.Option("--map", help="Column mapping NAME=COLUMN,..., e.g. prompt=question,answer=solution.")
    ] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="Read at most this many source rows.")] = None,
    mode: Annotated[str | None, typer.Option("--mode", help="think or no_think for every row.")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed for tiny generation and the hold-out draw.")] = None,
    source_format: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="Source format: auto (from the columns), nemotron-sft, nemotron-rl-math, nemotron-rl-if, "
            "nemotron-rl-swe, openai, alpaca, sharegpt, livecodebench, taco, apps, helpsteer, ultrafeedback.",
        ),
    ] = None,
    decontaminate_against: Annotated[
        str | None,
        typer.Option(
            "--decontaminate-against",
            help="Drop rows sharing a word n-gram (ngram_n=9) with these benchmarks/files: math500,aime24,FILE.",
        ),
    ] = None,
    exclude_prompts_from: Annotated[
        str | None,
        typer.Option("--exclude-prompts-from", help="Drop rows whose prompt is in (or overlaps) these data files."),
    ] = None,
) -> None:
    """Turn a source into canonical rows: OUT/data.jsonl, OUT/heldout.jsonl and OUT/data_card.json.

    Filters (counts in the data card, removed ids in OUT/removed.jsonl): --exclude-prompts-from keeps SFT and
    RL prompts disjoint; --decontaminate-against drops rows that overlap benchmark prompts. --format names the
    source's format (else read off the columns). `cascade prepare-data filter` keeps prompts by pass rate.

    Example: [bold]cascade prepare-data --source tiny:math --out data/math --n 400 --holdout 100[/]
    """
    if ctx.invoked_subcommand is not None:
        return
    from cascade_cli.data.prepare import build_prepare_config, run_prepare_data
    from cascade_cli.data.sources import parse_field_map

    values = {
        "source": source, "out": out, "domain": domain, "n": n, "holdout": holdout, "limit": limit,
        "mode": mode, "seed": seed, "map": parse_field_map(field_map) or None, "format": source_format,
        "decontaminate_against": _comma_list(decontaminate_against),
        "exclude_prompts_from": _comma_list(exclude_prompts_from),
    }
    run_prepare_data(build_prepare_config(values, overrides or []))


@prepare_data_app.command("filter")
def prepare_data_filter_command(
    model: Annotated[str, typer.Option("--model", "--init", help="Checkpoint that samples: tiny, a folder or a hub id.")],
    data: Annotated[str, typer.Option("--data", help="Canonical RL rows: a .jsonl/.parquet file or a prepare-data folder.")],
    out: Annotated[str, typer.Option("--out", help="Output folder (data.jsonl, dropped.jsonl, pass_rate.json).")],
    overrides: Annotated[
        Optional[list[str]],
        typer.Argument(help="More config keys as key=value, e.g. max_new_tokens=2048 temperature=0.6", show_default=False),
    ] = None,
    k: Annotated[Optional[int], typer.Option("--k", help="Samples per prompt (paper: 16 for math, 8 for code).")] = None,
    max_pass: Annotated[
        Optional[float], typer.Option("--max-pass", help="Drop prompts solved this often or more (too easy).")
    ] = None,
    min_pass: Annotated[
        Optional[float], typer.Option("--min-pass", help="Drop prompts solved less often than this (too hard).")
    ] = None,
    reuse: Annotated[
        bool, typer.Option("--reuse", help="Rows that already carry a pass_rate for the same k are not sampled again.")
    ] = False,
) -> None:
    """Pass-rate filtering: sample k answers per prompt, score them with the domain's verifier, keep the band.

    Kept rows satisfy min_pass <= pass_rate < max_pass; every row gets `pass_rate` and `pass_rate_k`; dropped
    rows go to OUT/dropped.jsonl. Code as in the paper: --k 8 --min-pass 0.1 --max-pass 1.0.

    Example: [bold]cascade prepare-data filter --model runs/sft --data data/math --k 16 --max-pass 0.75 --out data/math_hard[/]
    """
    from cascade_cli.data.pass_rate import build_filter_config, run_pass_rate_filter
    from cascade_cli.engines.local.sampling import generator_sampler

    values = {
        "init": model, "data": data, "out": out, "k": k, "max_pass": max_pass, "min_pass": min_pass,
        "reuse": reuse or None,
    }
    run_pass_rate_filter(build_filter_config(values, overrides or []), make_sampler=generator_sampler)


# ----------------------------------------------------------------------------------------------------------
# sft (foundation)
# ----------------------------------------------------------------------------------------------------------

# Idle OpenMP threads sleep instead of spinning: on a shared or oversubscribed CPU, spinning threads make
# small-model training up to 10x slower. Must be set before torch loads, hence here at import time.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


# `--engine` / `--dry-run` on the training commands (same as the overrides engine=... dry_run=true).
EngineOption = Annotated[
    Optional[str],
    typer.Option("--engine", help="local (this process) or openrlhf (OpenRLHF jobs on a Ray cluster; see cluster.*)."),
]
DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="Print the commands the stage would run (engine openrlhf) and stop.")
]


@app.command("sft", context_settings={"allow_extra_args": False})
def sft_command(
    init: Annotated[
        str, typer.Option("--init", help="Start model: tiny, tiny:SEED, a checkpoint dir or a hub id.")
    ],
    data: Annotated[str, typer.Option("--data", help="SFT rows: a .jsonl file or a prepare-data directory.")],
    out: Annotated[str, typer.Option("--out", help="Output checkpoint directory.")],
    overrides: Annotated[
        Optional[list[str]],
        typer.Argument(help="key=value overrides of the SFT config (lr=3e-4 epochs=2 ...)."),
    ] = None,
    engine: EngineOption = None,
    dry_run: DryRunOption = False,
) -> None:
    """Supervised fine-tuning with assistant-only loss on the local engine (resumes from OUT/trainer_state).

    Example: [bold]cascade sft --init tiny --data runs/tiny/data/sft --out runs/tiny/sft lr=1e-3 epochs=3[/]
    """
    from cascade_cli.config.build import build_stage_config
    from cascade_cli.config.sft import SFTConfig
    from cascade_cli.recipe.kinds import run_config

    values = {"init": init, "data": data, "out": out, "engine": engine, "dry_run": dry_run or None}
    config = build_stage_config(SFTConfig, values, overrides or [])
    run_config(config)


# ----------------------------------------------------------------------------------------------------------
# rlhf (RM + GRPO on RM scores)
# ----------------------------------------------------------------------------------------------------------


class _RlhfGroup(_CascadeGroup):
    """`cascade rlhf rm ...` runs the subcommand; `cascade rlhf --init ... key=value ...` runs the group's own
    callback (the policy stage) with the `key=value` words as config overrides."""

    def parse_args(self, ctx, args):  # type: ignore[no-untyped-def]
        super().parse_args(ctx, args)
        rest = [*ctx._protected_args, *ctx.args]
        if rest and rest[0] not in self.commands:
            ctx.meta["rlhf.overrides"] = rest
            ctx._protected_args, ctx.args = [], []
        return ctx.args


rlhf_app = typer.Typer(
    name="rlhf",
    cls=_RlhfGroup,
    invoke_without_command=True,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(rlhf_app, name="rlhf")


@rlhf_app.callback()
def rlhf_command(
    ctx: typer.Context,
    init: Annotated[Optional[str], typer.Option("--init", help="SFT checkpoint to start the policy from.")] = None,
    reward_model: Annotated[
        Optional[str], typer.Option("--reward-model", help="Reward-model checkpoint (from `cascade rlhf rm`).")
    ] = None,
    data: Annotated[Optional[str], typer.Option("--data", help="Prompt rows (JSONL/parquet or a prepare-data dir).")] = None,
    out: Annotated[Optional[str], typer.Option("--out", help="Output checkpoint directory.")] = None,
    eval_data: Annotated[
        Optional[str], typer.Option("--eval-data", help="Held-out prompts: mean RM score of greedy answers before/after.")
    ] = None,
    engine: EngineOption = None,
    dry_run: DryRunOption = False,
) -> None:
    """GRPO on a reward model's scores (Half-Half thinking modes, code-switch penalty); subcommand `rm` trains the RM.

    Overrides go after the options as key=value (steps=20 kl_coef=1e-3 reward_shaping=zscore_tanh ...).

    Example: [bold]cascade rlhf --init runs/tiny/sft --reward-model runs/tiny/rm --data data/general --out runs/tiny/rlhf steps=20[/]

    Example: [bold]cascade rlhf rm --init runs/tiny/sft --data data/pref --out runs/tiny/rm[/]
    """
    if ctx.invoked_subcommand is not None:
        return
    from cascade_cli.config.build import build_stage_config
    from cascade_cli.config.rlhf import RLHFConfig
    from cascade_cli.recipe.kinds import run_config

    values = {"init": init, "reward_model": reward_model, "data": data, "out": out, "eval_data": eval_data,
              "engine": engine, "dry_run": dry_run or None}
    config = build_stage_config(RLHFConfig, values, ctx.meta.get("rlhf.overrides", []), "rlhf")
    summary = run_config(config)
    line = f"[green]done[/]: {config.out}  steps {summary.get('steps', '-')}"
    if "heldout_reward_after" in summary:
        line += f"  held-out RM score {summary['heldout_reward_before']:.3f} -> {summary['heldout_reward_after']:.3f}"
    console.print(line)


@rlhf_app.command("rm")
def rlhf_rm_command(
    init: Annotated[str, typer.Option("--init", help="Start model (usually the SFT checkpoint); tiny / tiny:SEED.")],
    data: Annotated[str, typer.Option("--data", help="Preference pairs (JSONL/parquet or a prepare-data dir).")],
    out: Annotated[str, typer.Option("--out", help="Output reward-model checkpoint directory.")],
    eval_data: Annotated[
        Optional[str], typer.Option("--eval-data", help="Held-out pairs (default: heldout.jsonl or a split).")
    ] = None,
    skip_bad_rows: Annotated[
        bool, typer.Option("--skip-bad-rows", help="Drop bad pairs (empty/identical sides, missing fields) with a count.")
    ] = False,
    overrides: Annotated[
        Optional[list[str]], typer.Argument(help="key=value overrides (lr=1e-5 epochs=1 ...).", show_default=False)
    ] = None,
    engine: EngineOption = None,
    dry_run: DryRunOption = False,
) -> None:
    """Train a Bradley-Terry reward model (one `score` head; loads in AutoModelForSequenceClassification and OpenRLHF).

    Example: [bold]cascade rlhf rm --init runs/tiny/sft --data runs/tiny/data/pref --out runs/tiny/rm lr=1e-3[/]
    """
    from cascade_cli.config.build import build_stage_config
    from cascade_cli.config.rm import RewardModelConfig
    from cascade_cli.recipe.kinds import run_config

    values = {"init": init, "data": data, "out": out, "eval_data": eval_data, "engine": engine,
              "dry_run": dry_run or None}
    if skip_bad_rows:
        values["skip_bad_rows"] = True
    config = build_stage_config(RewardModelConfig, values, overrides or [], "rlhf rm")
    summary = run_config(config)
    line = f"[green]done[/]: {out}  steps {summary.get('steps', '-')}"
    if "heldout_accuracy" in summary:
        line += (
            f"  held-out pairwise accuracy {summary['heldout_accuracy_before']:.3f} -> "
            f"{summary['heldout_accuracy']:.3f}  margin {summary['heldout_margin']:.2f}"
        )
    if summary.get("bad_rows_dropped"):
        line += f"  ({summary['bad_rows_dropped']} bad rows dropped)"
    console.print(line)


# ----------------------------------------------------------------------------------------------------------
# rlvr --domain (GRPO)
# ----------------------------------------------------------------------------------------------------------


@app.command("rlvr")
def rlvr_command(
    domain: Annotated[str, typer.Option("--domain", "-d", help="if | math | code | swe (picks the verifier).")],
    init: Annotated[str, typer.Option("--init", help="Input checkpoint directory (or tiny / tiny:SEED).")],
    data: Annotated[Path, typer.Option("--data", help="Canonical RL rows (JSONL/parquet) with prompt and label.")],
    out: Annotated[Path, typer.Option("--out", help="Output checkpoint directory.")],
    eval_data: Annotated[
        Path | None, typer.Option("--eval-data", help="Held-out rows: greedy accuracy before and after.")
    ] = None,
    overrides: Annotated[
        list[str] | None,
        typer.Argument(help="Config overrides key=value, e.g. steps=20 group_size=8 dynamic_filter=true", show_default=False),
    ] = None,
    engine: EngineOption = None,
    dry_run: DryRunOption = False,
) -> None:
    """GRPO with the domain's verifier as the reward (strictly on-policy, token-level loss, no KL).

    Example: [bold]cascade rlvr --domain math --init runs/tiny/sft --data data/math.jsonl --out runs/tiny/math_rl steps=30[/]
    """
    from cascade_cli.config.build import build_stage_config
    from cascade_cli.config.grpo import RLVRConfig
    from cascade_cli.recipe.kinds import run_config

    flags = {"domain": domain, "init": init, "data": str(data), "out": str(out), "engine": engine,
             "eval_data": None if eval_data is None else str(eval_data), "dry_run": dry_run or None}
    config = build_stage_config(RLVRConfig, flags, overrides or [], where="rlvr")
    summary = run_config(config)
    if config.engine != "local":
        return
    line = f"[green]done[/]: {out}  steps {summary['steps']}"
    if "heldout_accuracy_after" in summary:
        line += f"  held-out accuracy {summary['heldout_accuracy_before']:.3f} -> {summary['heldout_accuracy_after']:.3f}"
    console.print(line)


# ----------------------------------------------------------------------------------------------------------
# verify (verifiers; reward service)
# ----------------------------------------------------------------------------------------------------------


def _verify_options(option: list[str], domain: str | None, unsafe_no_sandbox: bool, all_tests: bool):
    from cascade_cli.scoring import parse_options

    options = parse_options(option, domain)
    if unsafe_no_sandbox:
        options.setdefault("code", {})["unsafe_no_sandbox"] = True
    if all_tests:
        options.setdefault("code", {})["all_tests"] = True
    return options


@app.command("verify")
def verify_command(
    input: Annotated[
        Path | None, typer.Option("--input", "-i", help="Rollout records (JSONL): id, prompt, response, label, domain.")
    ] = None,
    domain: Annotated[
        str | None, typer.Option("--domain", "-d", help="Score every record as this domain (else each record's own).")
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the records with reward, passed, details, latency.")
    ] = None,
    workers: Annotated[
        int | None, typer.Option("--workers", "-w", min=1, help="Worker processes (default 1; reward_func: min(4, CPUs)).")
    ] = None,
    json_summary: Annotated[bool, typer.Option("--json", help="Print the summary as JSON on stdout.")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 2 when any row is bad (missing field, bad label).")] = False,
    option: Annotated[
        list[str] | None,
        typer.Option("--option", "-O", help="Verifier option key=value (or domain.key=value); repeatable."),
    ] = None,
    unsafe_no_sandbox: Annotated[
        bool, typer.Option("--unsafe-no-sandbox", help="code: run tests without the sandbox (trusted code only).")
    ] = False,
    all_tests: Annotated[bool, typer.Option("--all-tests", help="code: run every test, not stop at the first failure.")] = False,
    serve: Annotated[
        bool, typer.Option("--serve", help="Run the HTTP reward service (OpenRLHF --reward.remote_url) instead.")
    ] = False,
    host: Annotated[str, typer.Option("--host", help="--serve: address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="--serve: port (0 picks a free one).")] = 5000,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.1, help="--serve / reward_func: seconds per request before reward 0.")
    ] = 60.0,
    print_reward_func_path: Annotated[
        bool, typer.Option("--print-reward-func-path", help="Print the path of the OpenRLHF reward_func file.")
    ] = False,
    export_reward_func: Annotated[
        Path | None, typer.Option("--export-reward-func", help="Write an OpenRLHF reward_func file to PATH.")
    ] = None,
) -> None:
    """Score rollouts with the verifiers, or serve rewards to OpenRLHF over HTTP.

    Example: [bold]cascade verify --domain math --input rollouts.jsonl --output scored.jsonl --workers 2[/]

    Example: [bold]cascade verify --serve --port 5000 --workers 4[/]  (then OpenRLHF
    --reward.remote_url http://HOST:5000/get_reward)

    Example: [bold]cascade verify --export-reward-func reward.py[/]  (then --reward.remote_url reward.py)
    """
    from cascade_cli import reward_func, scoring
    from cascade_cli.console import console, stdout

    options = _verify_options(option or [], domain, unsafe_no_sandbox, all_tests)
    if print_reward_func_path:
        typer.echo(reward_func.module_path())
        return
    if export_reward_func is not None:
        path = reward_func.export(export_reward_func, domain=domain, options=options, workers=workers, timeout_s=timeout)
        console.print(f"wrote {path}; pass it to OpenRLHF as --reward.remote_url {path}")
        return
    if serve:
        from cascade_cli.serve import run_server

        run_server(host=host, port=port, workers=workers or 1, timeout_s=timeout, domain=domain, options=options)
        return
    if input is None:
        raise CascadeUsageError("--input is required (a JSONL file of rollout records), unless --serve is given")

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("verifying"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console, transient=True, disable=json_summary,
    ) as progress:
        task = progress.add_task("verify", total=None)
        summary, rows = scoring.verify_file(
            input, output, domain=domain, options=options, workers=workers or 1,
            on_total=lambda total: progress.update(task, total=total),
            on_progress=lambda done: progress.advance(task, done),
        )
    bad = [row["error"] for row in rows if "error" in row]
    if json_summary:
        typer.echo(json.dumps(summary))
    else:
        stdout.print(scoring.summary_table(summary, title=f"cascade verify {input.name}"))
        for message in bad[:10]:
            console.print(f"[yellow]bad row[/] {message}", markup=True, soft_wrap=True)
        if len(bad) > 10:
            console.print(f"... and {len(bad) - 10} more bad rows (see 'error' in the output)")
    if strict and bad:
        raise CascadeUsageError(f"{len(bad)} bad row(s) in {input}; first: {bad[0]}")


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


@app.command("push")
def push_command(
    ckpt: Annotated[Path, typer.Argument(help="Checkpoint directory written by a cascade stage.")],
    repo_id: Annotated[str, typer.Option("--repo-id", help="Hub repository, ORG/NAME.")],
    private: Annotated[bool, typer.Option("--private", help="Create the repository as private.")] = False,
    revision: Annotated[Optional[str], typer.Option("--revision", help="Branch to push to.")] = None,
    commit_message: Annotated[Optional[str], typer.Option("--commit-message", help="Commit message.")] = None,
    include_trainer_state: Annotated[
        bool, typer.Option("--include-trainer-state", help="Also upload trainer_state/ (optimizer, RNG).")
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the model card and file list; upload nothing.")] = False,
) -> None:
    """Push a checkpoint to the Hugging Face Hub with a generated model card (cascade table, evals, usage).

    Example: [bold]cascade push runs/tiny/code_rl --repo-id me/tiny-cascade --dry-run[/]
    """
    from cascade_cli import hub

    plan = hub.plan_push(ckpt, repo_id, include_trainer_state=include_trainer_state)
    if dry_run:
        typer.echo(plan.card)
        typer.echo(f"# files to upload to {repo_id} ({len(plan.files)}):")
        for name in plan.files:
            typer.echo(name)
        return
    url = hub.push(plan, private=private, revision=revision, commit_message=commit_message)
    console.print(f"[green]pushed[/] {ckpt} -> {url}")


# ----------------------------------------------------------------------------------------------------------
# recipe run|plan|validate|list|show|cp
# ----------------------------------------------------------------------------------------------------------

recipe_app = _app("recipe", "Run, plan, validate, list, show and copy recipes (a whole cascade in one YAML).")
app.add_typer(recipe_app, name="recipe")

RecipeArg = Annotated[str, typer.Argument(help="Recipe file, or the name of a built-in recipe (see `recipe list`).")]
OverridesArg = Annotated[
    list[str] | None,
    typer.Argument(help="Dotlist overrides, e.g. stages.sft.lr=3e-4 run_dir=runs/try2", show_default=False),
]


@recipe_app.command("run")
def recipe_run(
    recipe: RecipeArg,
    overrides: OverridesArg = None,
    from_stage: Annotated[str | None, typer.Option("--from", help="Rerun from this stage on.")] = None,
    only: Annotated[str | None, typer.Option("--only", help="Run only this stage.")] = None,
) -> None:
    """Run every stage of a recipe in order, skipping stages already completed with the same inputs.

    Example: [bold]cascade recipe run recipes/tiny.yaml stages.sft.lr=3e-4[/]
    """
    from cascade_cli.recipe.loader import load_recipe
    from cascade_cli.recipe.runner import RUN_MANIFEST, run_recipe

    loaded = load_recipe(recipe, overrides or [])
    run_recipe(loaded, from_stage=from_stage, only=only)
    console.print(f"[green]done[/]: run manifest {Path(loaded.recipe.run_dir) / RUN_MANIFEST}")


@recipe_app.command("plan")
def recipe_plan(
    recipe: RecipeArg,
    overrides: OverridesArg = None,
    from_stage: Annotated[str | None, typer.Option("--from", help="Plan from this stage on.")] = None,
    only: Annotated[str | None, typer.Option("--only", help="Plan only this stage.")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Write the script here instead of stdout.")] = None,
) -> None:
    """Print the exact shell commands a `recipe run` equals, one per stage.

    Example: [bold]cascade recipe plan recipes/tiny.yaml > cascade.sh && bash cascade.sh[/]
    """
    from cascade_cli.recipe.loader import load_recipe
    from cascade_cli.recipe.plan import plan_lines
    from cascade_cli.recipe.runner import select_stages

    loaded = load_recipe(recipe, overrides or [])
    text = "\n".join(plan_lines(loaded, select_stages(loaded, from_stage, only))) + "\n"
    if out is not None:
        out.write_text(text)
        out.chmod(0o755)
        console.print(f"wrote {out}")
    else:
        typer.echo(text, nl=False)


@recipe_app.command("validate")
def recipe_validate(recipe: RecipeArg, overrides: OverridesArg = None) -> None:
    """Check a recipe (keys, types, stage kinds, interpolations) without running anything.

    Example: [bold]cascade recipe validate recipes/nemotron14b.yaml stages.math_rl.lr=2e-6[/]
    """
    from rich.table import Table

    from cascade_cli.recipe.loader import load_recipe

    loaded = load_recipe(recipe, overrides or [])
    table = Table(title=f"{loaded.path}: valid", show_lines=False)
    for column in ("stage", "kind", "engine", "init", "out"):
        table.add_column(column)
    for stage in loaded.stages:
        table.add_row(stage.name, stage.kind.kind, stage.config.engine, str(stage.config.init or "-"), stage.out)
    stdout.print(table)


@recipe_app.command("list")
def recipe_list() -> None:
    """List the built-in recipes.

    Example: [bold]cascade recipe list[/]
    """
    from rich.table import Table

    from cascade_cli.recipe.loader import builtin_recipes

    table = Table(title="built-in recipes")
    table.add_column("name")
    table.add_column("description")
    table.add_column("path")
    for name, path in builtin_recipes().items():
        import yaml

        description = (yaml.safe_load(path.read_text()) or {}).get("description", "")
        table.add_row(name, str(description).strip().splitlines()[0] if description else "", str(path))
    stdout.print(table)


@recipe_app.command("show")
def recipe_show(
    recipe: RecipeArg,
    overrides: OverridesArg = None,
    resolved: Annotated[bool, typer.Option("--resolved", help="Show defaults filled in and ${...} resolved.")] = False,
) -> None:
    """Print a recipe's YAML (as written, or resolved with --resolved).

    Example: [bold]cascade recipe show tiny --resolved[/]
    """
    from omegaconf import OmegaConf

    from cascade_cli.recipe.loader import find_recipe, load_recipe

    if resolved:
        typer.echo(OmegaConf.to_yaml(OmegaConf.create(load_recipe(recipe, overrides or []).resolved)), nl=False)
    else:
        typer.echo(find_recipe(recipe).read_text(), nl=False)


@recipe_app.command("cp")
def recipe_cp(
    name: Annotated[str, typer.Argument(help="Built-in recipe name (see `recipe list`) or a recipe file.")],
    dest: Annotated[Path, typer.Argument(help="Where to write the copy (a file or a directory).")],
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
) -> None:
    """Copy a built-in recipe to edit it.

    Example: [bold]cascade recipe cp tiny my_recipe.yaml[/]
    """
    from cascade_cli.recipe.loader import find_recipe

    source = find_recipe(name)
    target = dest / source.name if dest.is_dir() else dest
    if target.exists() and not force:
        raise CascadeUsageError(f"{target}: already exists (use --force to overwrite)")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(source.read_text())
    console.print(f"copied {source} -> {target}")
