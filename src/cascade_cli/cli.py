"""The `cascade` command line: one thin function per command (parse -> build stage config -> call a runner).

Commands delivered by later work are registered only once they work.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from typer.core import TyperGroup

from cascade_cli import __version__
from cascade_cli.console import console, print_error, stdout
from cascade_cli.errors import CascadeRunError, CascadeUsageError


class _CascadeGroup(TyperGroup):
    """Turns our errors into one line and an exit code (2 for usage errors) instead of a traceback."""

    def invoke(self, ctx):  # type: ignore[no-untyped-def]
        try:
            return super().invoke(ctx)
        except (CascadeUsageError, CascadeRunError) as error:
            print_error(str(error))
            raise typer.Exit(error.exit_code) from None


def _app(name: str, help_text: str) -> typer.Typer:
    return typer.Typer(
        name=name,
        help=help_text,
        cls=_CascadeGroup,
        no_args_is_help=True,
        add_completion=name == "cascade",
        pretty_exceptions_enable=False,
        rich_markup_mode="rich",
        context_settings={"help_option_names": ["-h", "--help"]},
    )


app = _app(
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
        typer.Option("--version", callback=_version_callback, is_eager=True, help="Print the version and exit."),
    ] = None,
) -> None:
    """Cascade RL post-training toolkit."""


def main() -> None:
    app()


# ----------------------------------------------------------------------------------------------------------
# prepare-data (foundation)
# ----------------------------------------------------------------------------------------------------------


@app.command("prepare-data")
def prepare_data_command(
    overrides: Annotated[
        list[str] | None,
        typer.Argument(help="More config keys as key=value, e.g. wrong_fraction=0.3 split=test", show_default=False),
    ] = None,
    source: Annotated[
        str | None,
        typer.Option(
            "--source",
            help="tiny:DOMAIN (math|code|if|pref|general|sft), a .jsonl/.json/.parquet file or folder, or a hub id.",
        ),
    ] = None,
    out: Annotated[str | None, typer.Option("--out", help="Output folder (data.jsonl, heldout.jsonl, data_card.json).")] = None,
    domain: Annotated[
        str | None, typer.Option("--domain", help="Domain of every row: sft|pref|if|math|code|swe|general.")
    ] = None,
    n: Annotated[int | None, typer.Option("--n", help="Rows to generate for tiny:* sources.")] = None,
    holdout: Annotated[int | None, typer.Option("--holdout", help="Rows held out to heldout.jsonl.")] = None,
    field_map: Annotated[
        str | None, typer.Option("--map", help="Column mapping NAME=COLUMN,..., e.g. prompt=question,answer=solution.")
    ] = None,
    limit: Annotated[int | None, typer.Option("--limit", help="Read at most this many source rows.")] = None,
    mode: Annotated[str | None, typer.Option("--mode", help="think or no_think for every row.")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed for tiny generation and the hold-out draw.")] = None,
) -> None:
    """Turn a source into canonical rows: OUT/data.jsonl, OUT/heldout.jsonl and OUT/data_card.json.

    Example: [bold]cascade prepare-data --source tiny:math --out data/math --n 400 --holdout 100[/]
    """
    from cascade_cli.data.prepare import build_prepare_config, run_prepare_data
    from cascade_cli.data.sources import parse_field_map

    values = {
        "source": source, "out": out, "domain": domain, "n": n, "holdout": holdout, "limit": limit,
        "mode": mode, "seed": seed, "map": parse_field_map(field_map) or None,
    }
    run_prepare_data(build_prepare_config(values, overrides or []))


# ----------------------------------------------------------------------------------------------------------
# sft (foundation)
# ----------------------------------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------------------------------
# rlhf (RM + GRPO on RM scores)
# ----------------------------------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------------------------------
# rlvr --domain (GRPO)
# ----------------------------------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------------------------------
# verify (verifiers; reward service)
# ----------------------------------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------------------------------
# eval / report
# ----------------------------------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------------------------------
# push
# ----------------------------------------------------------------------------------------------------------


@app.command("push")
def push_command(
    ckpt: Annotated[Path, typer.Argument(help="Checkpoint directory written by a cascade stage.")],
    repo_id: Annotated[str, typer.Option("--repo-id", help="Hub repository, ORG/NAME.")],
    private: Annotated[bool, typer.Option("--private", help="Create the repository as private.")] = False,
    revision: Annotated[Optional[str], typer.Option("--revision", help="Branch to push to.")] = None,
    commit_message: Annotated[Optional[str], typer.Option("--commit-message", help="Commit message.")] = None,
    include_trainer_state: Annotated[
        bool, typer.Option("--include-trainer-state", help="Also upload trainer_state/ (optimizer, RNG).")
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
    console.print(f"[green]pushed[/] {ckpt} -> {url}")


# ----------------------------------------------------------------------------------------------------------
# recipe run|plan|validate|list|show|cp
# ----------------------------------------------------------------------------------------------------------

recipe_app = _app("recipe", "Run, plan, validate, list, show and copy recipes (a whole cascade in one YAML).")
app.add_typer(recipe_app, name="recipe")

RecipeArg = Annotated[str, typer.Argument(help="Recipe file, or the name of a built-in recipe (see `recipe list`).")]
OverridesArg = Annotated[
    list[str] | None,
    typer.Argument(help="Dotlist overrides, e.g. stages.sft.lr=3e-4 run_dir=runs/try2", show_default=False),
]


@recipe_app.command("run")
def recipe_run(
    recipe: RecipeArg,
    overrides: OverridesArg = None,
    from_stage: Annotated[str | None, typer.Option("--from", help="Rerun from this stage on.")] = None,
    only: Annotated[str | None, typer.Option("--only", help="Run only this stage.")] = None,
) -> None:
    """Run every stage of a recipe in order, skipping stages already completed with the same inputs.

    Example: [bold]cascade recipe run recipes/tiny.yaml stages.sft.lr=3e-4[/]
    """
    from cascade_cli.recipe.loader import load_recipe
    from cascade_cli.recipe.runner import RUN_MANIFEST, run_recipe

    loaded = load_recipe(recipe, overrides or [])
    run_recipe(loaded, from_stage=from_stage, only=only)
    console.print(f"[green]done[/]: run manifest {Path(loaded.recipe.run_dir) / RUN_MANIFEST}")


@recipe_app.command("plan")
def recipe_plan(
    recipe: RecipeArg,
    overrides: OverridesArg = None,
    from_stage: Annotated[str | None, typer.Option("--from", help="Plan from this stage on.")] = None,
    only: Annotated[str | None, typer.Option("--only", help="Plan only this stage.")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Write the script here instead of stdout.")] = None,
) -> None:
    """Print the exact shell commands a `recipe run` equals, one per stage.

    Example: [bold]cascade recipe plan recipes/tiny.yaml > cascade.sh && bash cascade.sh[/]
    """
    from cascade_cli.recipe.loader import load_recipe
    from cascade_cli.recipe.plan import plan_lines
    from cascade_cli.recipe.runner import select_stages

    loaded = load_recipe(recipe, overrides or [])
    text = "\n".join(plan_lines(loaded, select_stages(loaded, from_stage, only))) + "\n"
    if out is not None:
        out.write_text(text)
        out.chmod(0o755)
        console.print(f"wrote {out}")
    else:
        typer.echo(text, nl=False)


@recipe_app.command("validate")
def recipe_validate(recipe: RecipeArg, overrides: OverridesArg = None) -> None:
    """Check a recipe (keys, types, stage kinds, interpolations) without running anything.

    Example: [bold]cascade recipe validate recipes/nemotron14b.yaml stages.math_rl.lr=2e-6[/]
    """
    from rich.table import Table

    from cascade_cli.recipe.loader import load_recipe

    loaded = load_recipe(recipe, overrides or [])
    table = Table(title=f"{loaded.path}: valid", show_lines=False)
    for column in ("stage", "kind", "engine", "init", "out"):
        table.add_column(column)
    for stage in loaded.stages:
        table.add_row(stage.name, stage.kind.kind, stage.config.engine, str(stage.config.init or "-"), stage.out)
    stdout.print(table)


@recipe_app.command("list")
def recipe_list() -> None:
    """List the built-in recipes.

    Example: [bold]cascade recipe list[/]
    """
    from rich.table import Table

    from cascade_cli.recipe.loader import builtin_recipes

    table = Table(title="built-in recipes")
    table.add_column("name")
    table.add_column("description")
    table.add_column("path")
    for name, path in builtin_recipes().items():
        import yaml

        description = (yaml.safe_load(path.read_text()) or {}).get("description", "")
        table.add_row(name, str(description).strip().splitlines()[0] if description else "", str(path))
    stdout.print(table)


@recipe_app.command("show")
def recipe_show(
    recipe: RecipeArg,
    overrides: OverridesArg = None,
    resolved: Annotated[bool, typer.Option("--resolved", help="Show defaults filled in and ${...} resolved.")] = False,
) -> None:
    """Print a recipe's YAML (as written, or resolved with --resolved).

    Example: [bold]cascade recipe show tiny --resolved[/]
    """
    from omegaconf import OmegaConf

    from cascade_cli.recipe.loader import find_recipe, load_recipe

    if resolved:
        typer.echo(OmegaConf.to_yaml(OmegaConf.create(load_recipe(recipe, overrides or []).resolved)), nl=False)
    else:
        typer.echo(find_recipe(recipe).read_text(), nl=False)


@recipe_app.command("cp")
def recipe_cp(
    name: Annotated[str, typer.Argument(help="Built-in recipe name (see `recipe list`) or a recipe file.")],
    dest: Annotated[Path, typer.Argument(help="Where to write the copy (a file or a directory).")],
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
) -> None:
    """Copy a built-in recipe to edit it.

    Example: [bold]cascade recipe cp tiny my_recipe.yaml[/]
    """
    from cascade_cli.recipe.loader import find_recipe

    source = find_recipe(name)
    target = dest / source.name if dest.is_dir() else dest
    if target.exists() and not force:
        raise CascadeUsageError(f"{target}: already exists (use --force to overwrite)")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(source.read_text())
    console.print(f"copied {source} -> {target}")
