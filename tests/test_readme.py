"""The README, tried as a new user would: its tested shell blocks run word for word.

Convention: a fenced block whose info string is `bash tested` (```` ```bash tested ````) is run by this test;
GitHub still highlights it as bash. Tested blocks run in README order, each as one `bash -euo pipefail`
script, all in the same fresh directory that holds copies of the clone's `recipes/` and `examples/`, with the
virtualenv's `bin` on PATH and this checkout's `src` on PYTHONPATH (what `source .venv/bin/activate` gives).
Keep them fast (seconds): a block that trains may only run a few steps. Every other `bash` block (the whole
demo, cluster commands) is not run but must pass `bash -n`. Commands that need a file the user does not have
belong in an untested block.

The reference pages under docs/ that hold the README's former text (DOCS) are checked the same way: their `bash`
blocks must pass `bash -n` and their `yaml` blocks must validate as recipes. They hold no tested block: a block a
new user must be able to run stays in the README, where it runs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = [REPO / "docs" / name for name in (
    "commands.md", "models.md", "recipes.md", "mopd.md", "engines.md", "data.md", "evaluation.md", "developing.md",
)]
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)


def cli_env() -> dict[str, str]:
    """`cascade` on PATH (the venv's bin) and this checkout's src first on PYTHONPATH."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    src = str(REPO / "src")
    env["PYTHONPATH"] = f"{src}{os.pathsep}{env['PYTHONPATH']}" if env.get("PYTHONPATH") else src
    return env


def shell_blocks(page: Path = README) -> list[tuple[str, bool, int]]:
    """(script, tested, line) for each ```bash block of the README (or another page)."""
    text = page.read_text(encoding="utf-8")
    blocks = []
    for match in FENCE.finditer(text):
        words = match.group(1).split()
        if words[:1] == ["bash"]:
            line = text.count("\n", 0, match.start()) + 1
            blocks.append((match.group(2), words[1:] == ["tested"], line))
    return blocks


def test_readme_marks_the_commands_a_new_user_needs():
    tested = "\n".join(script for script, is_tested, _ in shell_blocks() if is_tested)
    for command in (
        "cascade --help",
        "cascade recipe list",
        "cascade recipe plan tiny",
        "cascade recipe validate recipes/nemotron14b.yaml",
        "cascade verify --input",
        "cascade eval --responses",
        "cascade sft ",
        "--dry-run",
    ):
        assert command in tested, f"README: no tested block runs {command!r}"
    assert "cascade push runs/quick/sft" in tested
    # The two set-up commands come before anything else.
    first = shell_blocks()[0][0]
    assert first.splitlines()[0].startswith("make demo") and "make test" in first


@pytest.mark.parametrize(
    "page,script,line",
    [pytest.param(page, s, n, id=f"{page.name}:line{n}")
     for page in [README, *DOCS] for s, tested, n in shell_blocks(page) if not tested],
)
def test_untested_blocks_are_valid_bash(page, script, line):
    result = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    assert result.returncode == 0, f"{page.relative_to(REPO)} line {line}: {result.stderr}"


def test_reference_pages_hold_no_tested_block():
    for page in DOCS:
        assert page.is_file(), f"{page.relative_to(REPO)} is gone: update DOCS in tests/test_readme.py"
        tested = [line for _, is_tested, line in shell_blocks(page) if is_tested]
        assert not tested, f"{page.relative_to(REPO)} lines {tested}: a tested block runs only in README.md"


def test_tested_blocks_run(tmp_path):
    shutil.copytree(REPO / "recipes", tmp_path / "recipes")
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    env = cli_env()
    blocks = [(script, line) for script, tested, line in shell_blocks() if tested]
    assert len(blocks) >= 5
    for script, line in blocks:
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
            timeout=300,
        )
        assert result.returncode == 0, (
            f"README.md block at line {line} exited {result.returncode}:\n{script}\n"
            f"stdout: {result.stdout[-2000:]}\nstderr: {result.stderr[-3000:]}"
        )
    # What the blocks say they make is there.
    assert (tmp_path / "runs" / "quick" / "sft" / "cascade_stage.json").is_file()
    assert (tmp_path / "runs" / "scored.jsonl").is_file()
    assert (tmp_path / "runs" / "external" / "math" / "results.json").is_file()
    assert "ray job submit" in (tmp_path / "nemotron14b.sh").read_text()
    # "Coming from TRL / OpenRLHF / verl": a TRL preference file, verl's parquet and a LoRA adapter went through.
    coming = tmp_path / "runs" / "coming"
    assert (coming / "rm" / "cascade_stage.json").is_file() and (coming / "verl_math" / "data").is_dir()
    assert (coming / "lora" / "adapter_config.json").is_file()


def test_command_table_lists_every_command():
    import typer.main

    from cascade_cli.cli import app

    names = sorted(typer.main.get_command(app).commands)
    assert len(names) >= 9
    table = README.read_text(encoding="utf-8").split("## Commands", 1)[1].split("\n## ", 1)[0]
    for name in names:
        assert f"| `cascade {name}" in table, f"README's command table misses `cascade {name}`"


def yaml_blocks(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    return [m.group(2) for m in FENCE.finditer(text) if m.group(1).strip() == "yaml"]


def test_yaml_blocks_are_valid_recipes(tmp_path, cli):
    # The README's recipe, and the pass-rate filter recipe docs/data.md took from it.
    assert yaml_blocks(README) and yaml_blocks(REPO / "docs" / "data.md")
    for page in [README, *DOCS]:
        for number, recipe in enumerate(yaml_blocks(page)):
            path = tmp_path / f"{page.stem}_{number}.yaml"
            path.write_text(recipe)
            result = cli(["recipe", "validate", str(path)])
            assert result.exit_code == 0, f"{page.relative_to(REPO)} yaml block {number}: {result.output}"
