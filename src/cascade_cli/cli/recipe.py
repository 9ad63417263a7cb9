"""`cascade recipe run|plan|validate|list|show|cp`: a whole cascade in one YAML."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from cascade_cli import files
from cascade_cli.cli.base import COMMAND, keys_command, make_typer
from cascade_cli.console import console, print_done, stdout
from cascade_cli.errors import CascadeUsageError

RECIPE_CONFIG = "cascade_cli.recipe.schema:RecipeConfig"
recipe_app = make_typer(
    "recipe",
    "Run, plan, validate, list, show and copy recipes (a whole cascade in one YAML).\n\n"
    "Example: [bold]cascade recipe run recipes/tiny.yaml[/]",
)
with_keys = {"cls": keys_command(RECIPE_CONFIG)}

RecipeArg = Annotated[str, typer.Argument(help="Recipe file, or the name of a built-in recipe (see `recipe list`).")]
OverridesArg = Annotated[
    list[str] | None,
    typer.Argument(
        help="Dotlist overrides, e.g. stages.sft.lr=3e-4 run_dir=runs/try2 (a stage's keys: its command's --help)",
        show_default=False,
    ),
]


@recipe_app.command("run", **with_keys)
def recipe_run(
    recipe: RecipeArg,
    overrides: OverridesArg = None,
    restart: Annotated[
        bool, typer.Option("--restart", help="Start every selected stage over (restart=true), even when completed.")
    ] = False,
    from_stage: Annotated[str | None, typer.Option("--from", help="Rerun from this stage on.")] = None,
    only: Annotated[str | None, typer.Option("--only", help="Run only this stage.")] = None,
) -> None:
    """Run every stage of a recipe in order, skipping stages already completed with the same inputs.

    A stage whose config or inputs changed since run.json recorded it starts over (the changed keys are
    printed); an interrupted stage with the same config resumes. --from, --only and --restart start the
    stages they select over.

    Example: [bold]cascade recipe run recipes/tiny.yaml stages.sft.lr=3e-4[/]
    """
    from cascade_cli.recipe.loader import load_recipe
    from cascade_cli.recipe.runner import RUN_MANIFEST, run_recipe

    loaded = load_recipe(recipe, overrides or [])
    files.output_dir(loaded.recipe.run_dir, key="run_dir")
    run_recipe(loaded, from_stage=from_stage, only=only, restart=restart)
    print_done(f"run manifest {Path(loaded.recipe.run_dir) / RUN_MANIFEST}")


@recipe_app.command("plan", **with_keys)
def recipe_plan(
    recipe: RecipeArg,
    overrides: OverridesArg = None,
    from_stage: Annotated[str | None, typer.Option("--from", help="Plan from this stage on.")] = None,
    only: Annotated[str | None, typer.Option("--only", help="Plan only this stage.")] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Write the script here instead of stdout (--launcher slurm: a directory)."),
    ] = None,
    launcher: Annotated[
        str | None,
        typer.Option(
            "--launcher",
            help="Set cluster.launcher of every openrlhf stage: ray, hostfile, or slurm (one sbatch script per "
            "job in --out DIR, and DIR/submit.sh). Default: each stage's cluster.launcher.",
        ),
    ] = None,
) -> None:
    """Print the exact shell commands a `recipe run` equals, one per stage.

    With --launcher slurm (or cluster.launcher: slurm), write one sbatch script per job into --out DIR and
    DIR/submit.sh, which submits them in order (each after the previous succeeded).

    Example: [bold]cascade recipe plan recipes/tiny.yaml --out cascade.sh[/]  (then `bash cascade.sh` runs it)
    """
    from cascade_cli.config.common import LAUNCHERS
    from cascade_cli.recipe.loader import load_recipe
    from cascade_cli.recipe.plan import plan_lines
    from cascade_cli.recipe.runner import select_stages
    from cascade_cli.recipe.slurm_plan import use_launcher, wants_slurm

    if launcher is not None and launcher not in LAUNCHERS:
        raise CascadeUsageError(f"--launcher: expected one of {', '.join(LAUNCHERS)}, found {launcher!r}")
    loaded = load_recipe(recipe, overrides or [])
    stages = select_stages(loaded, from_stage, only)
    if launcher is not None:
        use_launcher(stages, launcher)
    if wants_slurm(stages):
        _write_slurm_plan(loaded, stages, out)
        return
    text = "\n".join(plan_lines(loaded, stages)) + "\n"
    if out is not None:
        out.write_text(text)
        out.chmod(0o755)
        console.print(f"wrote {out}")
    else:
        typer.echo(text, nl=False)


def _write_slurm_plan(loaded, stages, out: Path | None) -> None:
    from cascade_cli.recipe.slurm_plan import SUBMIT, slurm_scripts

    if out is None or (out.exists() and not out.is_dir()):
        raise CascadeUsageError("--out: --launcher slurm writes one sbatch script per job: give a directory")
    scripts = slurm_scripts(loaded, stages)
    out.mkdir(parents=True, exist_ok=True)
    for name, text in scripts.items():
        (out / name).write_text(text)
        (out / name).chmod(0o755)
    console.print(f"wrote {len(scripts) - 1} sbatch scripts to {out}; submit them in order with: bash {out / SUBMIT}")


@recipe_app.command("validate", **with_keys)
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


@recipe_app.command("list", **COMMAND)
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


@recipe_app.command("show", **with_keys)
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


@recipe_app.command("cp", **COMMAND)
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


def register(app: typer.Typer) -> None:
    app.add_typer(recipe_app, name="recipe")
