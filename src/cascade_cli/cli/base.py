"""What every command group shares: one-line errors, key=value words after a group's options, config keys in
`--help`, and --flags made from config fields (so a flag's type, default and help come from the config class)."""

from __future__ import annotations

import dataclasses
import inspect
import os
import sys
import typing
from collections.abc import Callable
from typing import Annotated, Any

import click
import typer
from omegaconf import MISSING
from typer.core import TyperCommand, TyperGroup

from cascade_cli import __version__, files
from cascade_cli.console import print_error
from cascade_cli.errors import CascadeRunError, CascadeUsageError

OVERRIDES_COMMAND = "key=value"  # the hidden command of a group that runs with key=value words
# Every word after the group's options is a key=value override: a stray option is reported as one.
OVERRIDES_SETTINGS: dict[str, Any] = {"hidden": True, "context_settings": {"ignore_unknown_options": True}}
COMMAND: dict[str, Any] = {}  # filled below: `app.command(name, **COMMAND)` for every plain command


class FlagsAsFlags:
    """--help shows a flag as a flag (`--dry-run`, not `--dry-run <bool>`: it takes no value), --help itself
    and the completion flags included (click adds those as the help is drawn)."""

    def get_params(self, ctx: click.Context) -> list:
        params = super().get_params(ctx)  # type: ignore[misc]
        for param in params:
            if param.param_type_name == "option" and getattr(param, "is_flag", False):
                param.metavar = ""
        return params


class CascadeCommand(FlagsAsFlags, TyperCommand):
    """Every command of the app (`**COMMAND`; config-keyed ones: `keys_command`)."""


COMMAND["cls"] = OVERRIDES_SETTINGS["cls"] = CascadeCommand


class CascadeGroup(FlagsAsFlags, TyperGroup):
    """Turns our errors and file-system errors into one line and an exit code (2 for usage errors, 1 for a
    failed run) instead of a traceback; `--version` after any command word prints the version."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if VERSION_OPTION in (args[: args.index("--")] if "--" in args else args):
            print_version()
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (CascadeUsageError, CascadeRunError) as error:
            print_error(str(error))
            raise typer.Exit(error.exit_code) from None
        except BrokenPipeError:  # `cascade ... | head`: the reader has gone; nothing more to say
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the exit's flush must not fail
            raise typer.Exit(1) from None
        except OSError as error:  # a path the checks before the work could not foresee (files.py)
            print_error(files.describe(error))
            raise typer.Exit(files.exit_code(error)) from None


VERSION_OPTION = "--version"


def print_version() -> None:
    typer.echo(f"cascade {__version__}")
    raise typer.Exit()


class _ConfigKeysHelp:
    """`--help` ends with the config keys of `config_target` ("module:Class"): key, type, default, description."""

    config_target: str = ""

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        super().format_help(ctx, formatter)  # type: ignore[misc]
        if self.config_target:
            write_config_keys(self.config_target, formatter)


class KeysCommand(_ConfigKeysHelp, CascadeCommand):
    pass


class StageGroup(_ConfigKeysHelp, CascadeGroup):
    """A group that also runs itself: `GROUP [OPTIONS] key=value ...` runs the group's own stage, while
    `GROUP SUB ...` runs a subcommand. Any first word that is not a subcommand name (or an option) goes, with
    the rest, to the hidden OVERRIDES_COMMAND, which reads the group's options from its parent context."""

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        if args and not args[0].startswith("-") and self.get_command(ctx, args[0]) is None:
            return OVERRIDES_COMMAND, self.get_command(ctx, OVERRIDES_COMMAND), args
        return super().resolve_command(ctx, args)


def keys_command(config_target: str) -> type[KeysCommand]:
    return type("KeysCommand", (KeysCommand,), {"config_target": config_target})


def stage_group(config_target: str) -> type[StageGroup]:
    return type("StageGroup", (StageGroup,), {"config_target": config_target})


HELP_OPTIONS = ("-h", "--help")


def make_typer(name: str, help_text: str | None = None, cls: type[TyperGroup] = CascadeGroup, **settings: Any) -> typer.Typer:
    settings.setdefault("no_args_is_help", True)
    if help_text is not None:  # else the callback's docstring
        settings["help"] = help_text
    return typer.Typer(
        name=name,
        cls=cls,
        add_completion=name == "cascade",
        pretty_exceptions_enable=False,
        rich_markup_mode="rich",
        context_settings={"help_option_names": list(HELP_OPTIONS)},
        **settings,
    )


def write_config_keys(config_target: str, formatter: click.HelpFormatter) -> None:
    from cascade_cli.config.docs import config_keys
    from cascade_cli.stage_kinds import load

    rows = [(key.key, f"{key.type} = {key.default}. {key.description}") for key in config_keys(load(config_target))]
    formatter.write_paragraph()
    with formatter.section("Config keys (key=value after the options; type = default)"):
        formatter.write_dl(rows)


# ---- --flags made from config fields -------------------------------------------------------------------

OverridesArg = Annotated[
    list[str] | None,
    typer.Argument(help="Config keys as key=value (listed below), e.g. lr=3e-4 rollout.backend=hf", show_default=False),
]


def _flag_type(hint: Any) -> Any:
    """The click-facing type of a config field: its scalar, optional (the config supplies the default); a
    list or dict field is a repeatable string flag (`collection_values` reads it)."""
    scalar = _unwrap_optional(hint)
    if typing.get_origin(scalar) in (list, dict):
        return list[str]
    return scalar if scalar in (bool, int, float) else str


def _unwrap_optional(hint: Any) -> Any:
    args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    return args[0] if type(None) in typing.get_args(hint) else hint


def collection_values(config_cls: type, values: dict[str, Any]) -> dict[str, Any]:
    """Flag values of list and dict fields as the config takes them: every occurrence of the flag holds one
    or more comma-separated items, a dict's as KEY=VALUE (`--teachers if=A,math=B --data D1 --data D2`);
    `"[]"` or an empty value gives an empty list."""
    from cascade_cli.config.docs import type_hints

    hints = type_hints(config_cls)
    out = dict(values)
    for key, given_values in values.items():
        origin = typing.get_origin(_unwrap_optional(hints.get(key)))
        if origin not in (list, dict):
            continue
        if not given_values:  # a repeatable flag not given: the config's default
            del out[key]
            continue
        items = [item.strip() for value in given_values for item in str(value).split(",") if item.strip()]
        if origin is list and items in ([], ["[]"]):  # `--report-to "[]"` (or ""): the empty list, not the default
            out[key] = []
            continue
        if origin is list:
            out[key] = items
            continue
        pairs = {}
        for item in items:
            name, sep, value = (part.strip() for part in item.partition("="))
            if not (name and sep and value):
                raise CascadeUsageError(f"--{key.replace('_', '-')}: expected KEY=VALUE items, found {item!r}")
            pairs[name] = value
        out[key] = pairs
    return out


def field_option(config_cls: type, key: str, *, required: bool = False, names: tuple[str, ...] = ()) -> inspect.Parameter:
    """A keyword parameter `key` whose typer Option `--key` has the field's type, help and default."""
    from cascade_cli.config.docs import field_description, type_hints

    field = {f.name: f for f in dataclasses.fields(config_cls)}[key]
    kind = _flag_type(type_hints(config_cls)[key])
    default = None if required or field.default in (dataclasses.MISSING, MISSING) else field.default
    option = typer.Option(f"--{key.replace('_', '-')}", *names, help=field_description(config_cls, key))
    if kind is bool:
        return inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, default=False, annotation=Annotated[bool, option])
    annotation = Annotated[kind if required else kind | None, option]  # type: ignore[operator]
    empty = inspect.Parameter.empty
    return inspect.Parameter(key, inspect.Parameter.KEYWORD_ONLY, default=empty if required else default, annotation=annotation)


def with_parameters(function: Callable[..., Any], extra: list[inspect.Parameter]) -> Callable[..., Any]:
    """Give `function(..., **values)` a signature with its own parameters then `extra`, as typer reads it."""
    own = [p for p in inspect.signature(function, eval_str=True).parameters.values() if p.kind != p.VAR_KEYWORD]
    function.__signature__ = inspect.Signature([*own, *extra])  # type: ignore[attr-defined]
    function.__annotations__ = {}
    return function


def given(values: dict[str, Any]) -> dict[str, Any]:
    """Flag values as config values: False flags and unset options mean "not given" (the config's default)."""
    return {key: value for key, value in values.items() if value is not None and value is not False}
