"""The command line as a whole: --version, --help everywhere with an example, one-line errors."""

from __future__ import annotations

import subprocess
import sys

import typer.main

from cascade_cli import __version__
from cascade_cli.cli import app


def all_commands() -> list[tuple[list[str], object]]:
    root = typer.main.get_command(app)
    found: list[tuple[list[str], object]] = []

    def walk(path: list[str], command) -> None:
        found.append((path, command))
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                walk([*path, name], sub)

    walk([], root)
    return found


def test_version(cli):
    result = cli(["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"cascade {__version__}"
    for words in (["sft"], ["recipe", "run"], ["rlhf", "rm"], ["prepare-data", "filter"]):
        result = cli([*words, "--version"])
        assert result.exit_code == 0 and result.output.strip() == f"cascade {__version__}", words


def test_the_version_has_one_source_and_a_changelog_section():
    from pathlib import Path

    from setuptools.config.pyprojecttoml import read_configuration

    root = Path(__file__).resolve().parents[1]
    assert read_configuration(root / "pyproject.toml", expand=True)["project"]["version"] == __version__
    sections = [line for line in (root / "CHANGELOG.md").read_text().splitlines() if line.startswith("## [")]
    assert sections[0].startswith(f"## [{__version__}]"), sections[0]


def test_every_command_has_help_with_an_example(cli):
    commands = all_commands()
    assert len(commands) >= 8
    for path, command in commands:
        result = cli([*path, "--help"])
        assert result.exit_code == 0, path
        if not hasattr(command, "commands") or path == []:
            assert "Example" in result.output, f"`cascade {' '.join(path)} --help` shows no example"


def test_root_help_lists_commands(cli):
    output = cli(["--help"]).output
    for path, _ in all_commands():
        if len(path) == 1:
            assert path[0] in output


def test_console_script_runs_as_a_module():
    result = subprocess.run(
        [sys.executable, "-m", "cascade_cli", "--version"], capture_output=True, text=True
    )
    assert result.returncode == 0 and __version__ in result.stdout
