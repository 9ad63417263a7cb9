"""The `cascade` command line: one thin function per command (parse -> build stage config -> call a runner).

Commands delivered by later work are registered only once they work.
"""

from __future__ import annotations

import os
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

# Idle OpenMP threads sleep instead of spinning: on a shared or oversubscribed CPU, spinning threads make
# small-model training up to 10x slower. Must be set before torch loads, hence here at import time.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


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
) -> None:
    """Supervised fine-tuning with assistant-only loss on the local engine (resumes from OUT/trainer_state).

    Example: [bold]cascade sft --init tiny --data runs/tiny/data/sft --out runs/tiny/sft lr=1e-3 epochs=3[/]
    """
    from cascade_cli.config.build import build_stage_config
    from cascade_cli.config.sft import SFTConfig
    from cascade_cli.engines.local.sft import run_sft

    config = build_stage_config(SFTConfig, {"init": init, "data": data, "out": out}, overrides or [])
    run_sft(config)


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


# ----------------------------------------------------------------------------------------------------------
# push
# ----------------------------------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------------------------------
# recipe run|plan|validate|list|show|cp
# ----------------------------------------------------------------------------------------------------------
