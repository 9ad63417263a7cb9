"""OpenRLHF's own command-line parsers, rebuilt from its source, and the flag set we ship from them.

OpenRLHF builds each parser inside the `if __name__ == "__main__":` block of `openrlhf/cli/<name>.py`.
`main_block()` splits that block with `ast` into the parser-building statements (everything before
`args = parser.parse_args()`) and the validation statements after it; `build_parser()` executes the first
part, so the parser is OpenRLHF's, not a copy. Importing those modules is not possible on a CPU machine
(they import ray, deepspeed and the trainers at the top), and not needed.

`flags_0_11_2.json` next to this file is `flag_table()` of the 0.11.2 parsers, so a submission can be
validated where OpenRLHF is not installed. Regenerate it (tests check it matches the installed source):

    PYTHONPATH=src python -m cascade_cli.engines.openrlhf.flagset --write
"""

from __future__ import annotations

import argparse
import ast
import datetime as _datetime
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

OPENRLHF_VERSION = "0.11.2"
CLIS: tuple[str, ...] = ("train_sft", "train_rm", "train_ppo_ray")
FLAGS_FILE = Path(__file__).with_name("flags_0_11_2.json")


def openrlhf_dir() -> Path | None:
    """The installed `openrlhf` package directory (found without importing it), or None."""
    spec = importlib.util.find_spec("openrlhf")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def cli_source(cli: str) -> Path:
    base = openrlhf_dir()
    if base is None:
        raise FileNotFoundError("openrlhf is not installed (pip install --no-deps openrlhf==0.11.2)")
    return base / "cli" / f"{cli}.py"


def _is_main_guard(node: ast.stmt) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    left, comparators = node.test.left, node.test.comparators
    return (
        isinstance(left, ast.Name)
        and left.id == "__name__"
        and len(comparators) == 1
        and isinstance(comparators[0], ast.Constant)
        and comparators[0].value == "__main__"
    )


def _is_parse_args(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Attribute)
        and node.value.func.attr == "parse_args"
    )


def main_block(cli: str) -> tuple[list[ast.stmt], list[ast.stmt]]:
    """(statements that build `parser`, statements after `args = parser.parse_args()`)."""
    path = cli_source(cli)
    tree = ast.parse(path.read_text(), filename=str(path))
    guard = next((node for node in tree.body if _is_main_guard(node)), None)
    if guard is None:
        raise ValueError(f"{path}: no `if __name__ == '__main__':` block")
    body = guard.body  # type: ignore[attr-defined]
    split = next((index for index, node in enumerate(body) if _is_parse_args(node)), None)
    if split is None:
        raise ValueError(f"{path}: no `args = parser.parse_args()` in the main block")
    return body[:split], body[split + 1 :]


def _namespace() -> dict[str, Any]:
    # What the parser statements use from the module's imports (help strings call datetime.now()).
    return {"argparse": argparse, "datetime": _datetime.datetime, "os": os, "__name__": "openrlhf_cli"}


def build_parser(cli: str) -> argparse.ArgumentParser:
    """OpenRLHF's own ArgumentParser for `openrlhf.cli.<cli>`, built by running its source statements."""
    setup, _ = main_block(cli)
    namespace = _namespace()
    module = ast.Module(body=setup, type_ignores=[])
    exec(compile(module, str(cli_source(cli)), "exec"), namespace)  # noqa: S102 - OpenRLHF's own source
    return namespace["parser"]


def _hierarchize():
    """OpenRLHF's `hierarchize`, loaded from its file (its package __init__ imports the trainers)."""
    path = cli_source("train_sft").parents[1] / "utils" / "config.py"
    spec = importlib.util.spec_from_file_location("_openrlhf_utils_config", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.hierarchize


def _imports_hierarchize(node: ast.stmt) -> bool:
    return isinstance(node, ast.ImportFrom) and any(alias.name == "hierarchize" for alias in node.names)


def parse_like_openrlhf(cli: str, argv: list[str]) -> Any:
    """What `python -m openrlhf.cli.<cli> ARGV` does up to training: OpenRLHF's parser, then its own
    validation statements (asserts, derived defaults) with `train(args)` captured instead of run.

    Returns the hierarchized args that `train` would get. An unknown or ill-typed flag raises SystemExit
    (argparse), a violated OpenRLHF assertion raises AssertionError.
    """
    setup, validation = main_block(cli)
    namespace = _namespace()
    filename = str(cli_source(cli))
    exec(compile(ast.Module(body=setup, type_ignores=[]), filename, "exec"), namespace)  # noqa: S102
    namespace["args"] = namespace["parser"].parse_args(argv)
    captured: list[Any] = []
    namespace["hierarchize"] = _hierarchize()
    namespace["train"] = captured.append
    rest = [node for node in validation if not _imports_hierarchize(node)]
    exec(compile(ast.Module(body=rest, type_ignores=[]), filename, "exec"), namespace)  # noqa: S102
    if len(captured) != 1:
        raise AssertionError(f"openrlhf.cli.{cli}: the main block did not reach train(args)")
    return captured[0]


def _type_name(action: argparse.Action) -> str | None:
    kind = action.type
    if kind is None:
        return None if action.nargs == 0 else "str"
    return getattr(kind, "__name__", str(kind))


def flag_table(parser: argparse.ArgumentParser) -> dict[str, dict[str, Any]]:
    """{"--flag": {"dest", "nargs", "type", "choices"}} for every option string of `parser`."""
    table: dict[str, dict[str, Any]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
            nargs: Any = 0
        else:
            nargs = action.nargs
        for option in action.option_strings:
            table[option] = {
                "dest": action.dest,
                "nargs": nargs,
                "type": _type_name(action),
                "choices": list(action.choices) if action.choices is not None else None,
                "store": "true"
                if isinstance(action, argparse._StoreTrueAction)
                else "false"
                if isinstance(action, argparse._StoreFalseAction)
                else "value",
            }
    return dict(sorted(table.items()))


def installed_flag_sets() -> dict[str, Any]:
    """The flag tables of the installed OpenRLHF's CLIs (what FLAGS_FILE must equal)."""
    from importlib.metadata import version

    return {
        "openrlhf_version": version("openrlhf"),
        "clis": {cli: flag_table(build_parser(cli)) for cli in CLIS},
    }


def shipped_flag_sets() -> dict[str, Any]:
    return json.loads(FLAGS_FILE.read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate (or check) the shipped OpenRLHF flag set.")
    parser.add_argument("--write", action="store_true", help=f"write {FLAGS_FILE.name}")
    args = parser.parse_args(argv)
    current = installed_flag_sets()
    if current["openrlhf_version"] != OPENRLHF_VERSION:
        print(
            f"installed openrlhf {current['openrlhf_version']}, expected {OPENRLHF_VERSION}", file=sys.stderr
        )
        return 1
    text = json.dumps(current, indent=1, sort_keys=True) + "\n"
    if args.write:
        FLAGS_FILE.write_text(text)
        print(f"wrote {FLAGS_FILE}")
        return 0
    same = FLAGS_FILE.exists() and FLAGS_FILE.read_text() == text
    print(
        "up to date" if same else f"{FLAGS_FILE.name} differs from the installed source; rerun with --write"
    )
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
