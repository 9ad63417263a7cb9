"""`cascade push`: a checkpoint and its generated model card to the Hugging Face Hub."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from cascade_cli.cli.base import COMMAND
from cascade_cli.console import print_done


def push_command(
    ckpt: Annotated[Path, typer.Argument(help="Checkpoint directory written by a cascade stage.")],
    repo_id: Annotated[str, typer.Option("--repo-id", help="Hub repository, ORG/NAME.")],
    private: Annotated[bool, typer.Option("--private", help="Create the repository as private.")] = False,
    revision: Annotated[Optional[str], typer.Option("--revision", help="Branch to push to.")] = None,
    commit_message: Annotated[Optional[str], typer.Option("--commit-message", help="Commit message.")] = None,
    include_trainer_state: Annotated[
        bool, typer.Option(
            "--include-trainer-state",
            help="Also upload trainer_state/ (optimizer, RNG; kept by stages trained with keep_trainer_state=true).",
        )
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
    print_done(f"{ckpt} -> {url}", label="pushed")



def register(app: typer.Typer) -> None:
    app.command("push", **COMMAND)(push_command)
