"""The `cascade` command line: one module per command group, each command parses -> builds a stage config
-> calls a runner. `app` is the Typer app; `main` is the console script (`cascade = "cascade_cli.cli:main"`)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from cascade_cli import __version__
from cascade_cli.cli import data, evaluate, push, recipe, stages, tts, verify
from cascade_cli.cli.base import HELP_OPTIONS, make_typer
from cascade_cli.cli.verify import _verify_options  # noqa: F401  (tests import it from here)
from cascade_cli.cpu_load import choose_wait_policy
from cascade_cli.progress import set_verbosity

app = make_typer(
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
        typer.Option(
            "--version", callback=_version_callback, is_eager=True, metavar="",
            help="Print the version and exit (also after any command: `cascade sft --version`).",
        ),
    ] = None,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", metavar="",
            help="Also show the libraries' own progress bars and logs (transformers, datasets, the hub).",
        ),
    ] = False,
) -> None:
    """Cascade RL post-training toolkit."""
    set_verbosity(verbose)
    # Idle OpenMP threads spin on an idle machine and sleep on a busy one (cpu_load.py). Chosen before a command
    # loads torch, as the policy cannot change once torch is in; a help screen needs no torch and skips it.
    wants_help = any(arg in HELP_OPTIONS for arg in sys.argv[1:])
    if "torch" not in sys.modules and not wants_help:
        choose_wait_policy()


for group in (data, stages, verify, evaluate, tts, push, recipe):  # the order of `cascade --help`
    group.register(app)


def main() -> None:
    app()
