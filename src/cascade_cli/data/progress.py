"""The one progress bar of long data passes (reading, filtering, sampling), drawn on the project console."""

from __future__ import annotations

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from cascade_cli.console import console


def progress_bar(label: str, disable: bool = False) -> Progress:
    """A transient bar: `label` (rich markup; may use {task.description} and {task.fields[...]}), the bar,
    done/total and elapsed time."""
    return Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=disable,
    )
