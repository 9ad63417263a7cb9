"""`cascade prepare-data` (sources -> canonical rows) and its `filter` subcommand (pass-rate filtering)."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from cascade_cli.cli.base import (
    OVERRIDES_COMMAND,
    OVERRIDES_SETTINGS,
    OverridesArg,
    field_option,
    keys_command,
    make_typer,
    stage_group,
    with_parameters,
)
from cascade_cli.stage_kinds import get_kind

PREPARE = get_kind("prepare_data")
FILTER_CONFIG = "cascade_cli.data.pass_rate:PassRateFilterConfig"
PREPARE_FLAGS = (
    "source", "out", "domain", "n", "holdout", "limit", "mode", "seed", "format", "add_constraints",
    "constraints_per_prompt",
)


def _comma_list(text: str | None) -> list[str] | None:
    return [item.strip() for item in text.split(",") if item.strip()] if text else None


def _prepare(values: dict[str, Any], overrides: list[str]) -> None:
    from cascade_cli.data.prepare import build_prepare_config
    from cascade_cli.data.sources import parse_field_map
    from cascade_cli.stage_kinds import run_config

    field_map = values.pop("field_map")
    values = {
        **values,
        "map": parse_field_map(field_map) or None,
        "decontaminate_against": _comma_list(values["decontaminate_against"]),
        "exclude_prompts_from": _comma_list(values["exclude_prompts_from"]),
    }
    run_config(build_prepare_config(values, overrides))


def prepare_data_command(
    ctx: typer.Context,
    field_map: Annotated[
        str | None, typer.Option("--map", help="Column mapping NAME=COLUMN,..., e.g. prompt=question,answer=solution.")
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
    **values: Any,
) -> None:
    """Turn a source into canonical rows: OUT/data.jsonl, OUT/heldout.jsonl and OUT/data_card.json.

    Filters (counts in the data card, removed ids in OUT/removed.jsonl): --exclude-prompts-from keeps SFT and
    RL prompts disjoint; --decontaminate-against drops rows that overlap benchmark prompts. --format names the
    source's format (else read off the columns). `cascade prepare-data filter` keeps prompts by pass rate.
    Sources: .jsonl/.json/.parquet/.csv/.tsv files, a folder of them (the Hub's data/ shards), a hub id.
    A row that cannot be read or does not fit is rejected, with its row number and reason, into
    OUT/rejected.jsonl; any rejection fails the run unless max_rejected=SHARE allows it (e.g. 0.05).
    More config keys go after the options as key=value (wrong_fraction=0.3 split=test ...).

    --add-constraints ifeval|ifbench turns prompt rows into IF-RL rows (verifiable constraints attached,
    decontaminated against IFEval by default).

    Example: [bold]cascade prepare-data --source tiny:math --out runs/tiny/data_math --n 400 --holdout 64[/]

    Example: [bold]cascade prepare-data --source prompts.jsonl --add-constraints ifeval --constraints-per-prompt 1-3
    --out runs/my/data_if[/]  (prompts.jsonl: one prompt per line, as a JSON string or a row)
    """
    if ctx.invoked_subcommand is None:
        _prepare({**values, "field_map": field_map, "decontaminate_against": decontaminate_against,
                  "exclude_prompts_from": exclude_prompts_from}, [])


def prepare_data_overrides(ctx: typer.Context, overrides: OverridesArg = None) -> None:
    """`cascade prepare-data [OPTIONS] key=value ...`: the options, then config keys.

    Example: [bold]cascade prepare-data --source tiny:sft --out runs/tiny/data_sft wrong_fraction=0.3[/]
    """
    _prepare(dict(ctx.parent.params), overrides or [])


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

    Example: [bold]cascade prepare-data filter --model runs/tiny/sft --data runs/tiny/data_math --k 16 --max-pass 0.75
    --out runs/tiny/data_math_hard[/]
    """
    from cascade_cli.data.pass_rate import build_filter_config
    from cascade_cli.stage_kinds import run_config

    values = {
        "init": model, "data": data, "out": out, "k": k, "max_pass": max_pass, "min_pass": min_pass,
        "reuse": reuse or None,
    }
    run_config(build_filter_config(values, overrides or []))


def register(app: typer.Typer) -> None:
    config_cls = PREPARE.config_class()
    options = [field_option(config_cls, key) for key in PREPARE_FLAGS]
    group = make_typer("prepare-data", cls=stage_group(PREPARE.config), invoke_without_command=True,
                       no_args_is_help=False)
    group.callback()(with_parameters(prepare_data_command, options))
    group.command(OVERRIDES_COMMAND, **OVERRIDES_SETTINGS)(prepare_data_overrides)
    group.command("filter", cls=keys_command(FILTER_CONFIG))(prepare_data_filter_command)
    app.add_typer(group, name="prepare-data")
