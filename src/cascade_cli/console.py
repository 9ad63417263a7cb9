"""The one rich console every command prints through (stderr for messages, stdout stays for data)."""

from __future__ import annotations

from rich.console import Console

console = Console(stderr=True, highlight=False)
stdout = Console(highlight=False, soft_wrap=True)


def print_error(message: str) -> None:
    console.print(f"[bold red]error:[/] {message}", markup=True, soft_wrap=True)


def print_warning(message: str) -> None:
    console.print(f"[bold yellow]warning:[/] {message}", markup=True, soft_wrap=True)
