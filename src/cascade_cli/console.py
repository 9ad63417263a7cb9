"""The rich console every command prints through (stderr for messages, stdout stays for data).

Markup and emoji codes are off on both consoles: user data (a path such as `runs/[x]`, a spec such as
`tiny:abc`, a value such as `[a,b]`) prints as given. Styles come only from the helpers here, which build a
`rich.text.Text` whose user part is plain text.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

console = Console(stderr=True, highlight=False, markup=False, emoji=False)
stdout = Console(highlight=False, soft_wrap=True, markup=False, emoji=False)


def labelled(label: str, style: str, message: str) -> Text:
    """`label message` with only the label styled (the message is never read as markup)."""
    return Text.assemble((label, style), " ", message)


def print_error(message: str) -> None:
    console.print(labelled("error:", "bold red", message), soft_wrap=True)


def print_warning(message: str) -> None:
    console.print(labelled("warning:", "bold yellow", message), soft_wrap=True)


def print_done(message: str, label: str = "done:") -> None:
    """A command's last line: `done: OUT ...` (green label)."""
    console.print(labelled(label, "green", message), soft_wrap=True)


def print_skip(message: str) -> None:
    """A step left out because it is done already: `skip ...` (dim label)."""
    console.print(labelled("skip", "dim", message), soft_wrap=True)


def status(message: str) -> Any:
    """A spinner with `message` while a block runs (a terminal only; rich prints nothing elsewhere)."""
    return console.status(Text(message))
