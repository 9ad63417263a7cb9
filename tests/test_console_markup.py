"""No Rich markup or emoji code is read in user data: `[x]` in a path, `tiny:abc` as a spec, `[a,b]` in a
message print as written, through every printer of console.py and the commands that print user data."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

from cascade_cli import console as console_module
from cascade_cli.progress import Progress

USER_TEXT = "runs/[x]/tiny:abc [bold]b[/] :smile: [a,b]"


def printers() -> list:
    """Every public function of console.py that prints a message."""
    return [
        function for name, function in inspect.getmembers(console_module, inspect.isfunction)
        if function.__module__ == console_module.__name__ and name.startswith("print_")
    ]


@pytest.mark.parametrize("printer", printers(), ids=lambda function: function.__name__)
def test_every_printer_prints_user_text_as_written(printer):
    with console_module.console.capture() as captured:
        printer(USER_TEXT)
    assert USER_TEXT in captured.get()


def test_the_consoles_and_the_progress_lines_print_user_text_as_written():
    for console in (console_module.console, console_module.stdout):
        with console.capture() as captured:
            console.print(USER_TEXT)
            console.print(console_module.labelled("label", "green", USER_TEXT))
        assert captured.get().count(USER_TEXT) == 2
    with console_module.console.capture() as captured, Progress(USER_TEXT, 2, note=USER_TEXT) as progress:
        progress.advance(note=USER_TEXT)
    assert captured.get().count(USER_TEXT) >= 4  # label and note of the first and the last line
    assert console_module.status(USER_TEXT).renderable.text.plain == USER_TEXT  # the spinner's text


def test_commands_print_paths_and_specs_as_written(cli, tmp_path: Path):
    data = tmp_path / "d[x]"
    result = cli(["prepare-data", "--source", "tiny:math", "--out", data, "--n", "4"])
    assert result.exit_code == 0 and "d[x]" in result.output and "tiny:math" in result.output, result.output
    result = cli(["sft", "--init", "tiny:abc", "--data", data, "--out", tmp_path / "o"])
    assert result.exit_code == 2 and "init tiny:abc:" in result.output, result.output
    result = cli(["sft", "--init", "tiny", "--data", tmp_path / "no[x]", "--out", tmp_path / "o", "max_steps=1"])
    assert result.exit_code == 2 and "no[x]" in result.output, result.output
    result = cli(["rlvr", "--domain", "math", "--init", "tiny", "--data", data, "--out", tmp_path / "o",
                  "cluster.reward_urls=http://x"])
    assert result.exit_code == 2 and "expected a list, e.g. [a,b]" in result.output, result.output
    recipe = tmp_path / "r[x].yaml"
    recipe.write_text("model: tiny\nstages:\n  d: {kind: prepare_data, source: 'tiny:math'}\n")
    result = cli(["recipe", "validate", recipe])
    assert result.exit_code == 0 and "r[x].yaml" in result.output, result.output


def test_report_prints_its_image_link_and_run_name_as_written(cli, tmp_path: Path):
    run = tmp_path / "[x]"
    (run / "eval" / "sft").mkdir(parents=True)
    results = {"benchmarks": {"tiny_math": {"score": 10.0, "primary": "avg@1", "k": 1}}}
    (run / "eval" / "sft" / "results.json").write_text(json.dumps(results))
    result = cli(["report", run])
    assert result.exit_code == 0, result.output
    assert "# Cascade report: [x]" in result.output and "![scores by stage](report.png)" in result.output
    assert "[x]/report.png" in "".join(result.output.split())
