"""Recipe loading: schema, overrides, interpolation, chaining, errors naming the YAML path; plan round trip."""

from __future__ import annotations

import shlex
import textwrap
import typing
from pathlib import Path

import pytest

from cascade_cli.cli.base import collection_values
from cascade_cli.config.structure import parse_overrides, structure, to_plain
from cascade_cli.errors import CascadeUsageError
from cascade_cli.recipe.loader import builtin_recipes, load_recipe
from cascade_cli.recipe.plan import plan_lines, stage_argv

RECIPE = """
name: t
model: tiny
run_dir: {run_dir}
seed: 3
defaults:
  engine: local
stages:
  data:
    kind: prepare_data
    source: tiny:sft
    n: 50
  sft1:
    kind: sft
    data: ${{stages.data.out}}
    lr: 1e-3
    max_steps: 4
  hard:
    kind: pass_rate_filter
    data: ${{stages.data.out}}
    k: 4
    min_pass: 0.25
  sft2:
    kind: sft
    data: ${{stages.data.out}}/data.jsonl
    max_seq_len: 1024
"""


def write(tmp_path: Path, text: str, name: str = "r.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_defaults_chaining_and_interpolation(tmp_path):
    recipe = load_recipe(str(write(tmp_path, RECIPE.format(run_dir=tmp_path / "run"))))
    data, sft1, hard, sft2 = recipe.stages
    assert data.out == f"{tmp_path}/run/data"
    assert sft1.config.init == "tiny"  # first model stage starts from `model`
    assert hard.config.init == sft1.out  # a pass-rate filter samples with the policy before it
    assert sft2.config.init == sft1.out  # later ones from the previous model stage (a filter is data)
    assert sft1.config.data == data.out
    assert sft2.config.data == f"{data.out}/data.jsonl"
    assert sft1.config.seed == 3 and sft1.config.name == "sft1"
    assert sft1.config.lr == pytest.approx(1e-3)


def test_dotlist_overrides_win(tmp_path):
    path = write(tmp_path, RECIPE.format(run_dir=tmp_path / "run"))
    recipe = load_recipe(
        str(path), ["stages.sft1.lr=3e-4", f"run_dir={tmp_path}/other", "stages.sft2.init=tiny:3"]
    )
    assert recipe.stage("sft1").config.lr == pytest.approx(3e-4)
    assert recipe.stage("sft1").out == f"{tmp_path}/other/sft1"
    assert recipe.stage("sft2").config.init == "tiny:3"


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("stages.sft1.lrr=1", "stages.sft1.lrr: unknown key"),
        ("stages.sft1.lr=abc", "stages.sft1.lr: wrong type"),
        ("stages.sft1.kind=nope", "stages.sft1.kind: unknown stage kind 'nope'"),
        ("modell=tiny", "modell: unknown top-level key"),
        ("stages.sft1.data=${stages.missing.out}", "stages.sft1.data"),
    ],
)
def test_errors_name_the_yaml_path(tmp_path, override, expected):
    path = write(tmp_path, RECIPE.format(run_dir=tmp_path / "run"))
    with pytest.raises(CascadeUsageError) as caught:
        load_recipe(str(path), [override])
    assert str(path) in str(caught.value)
    assert expected in str(caught.value)


def test_missing_required_key(tmp_path):
    path = write(tmp_path, "model: tiny\nstages:\n  s:\n    kind: sft\n")
    with pytest.raises(CascadeUsageError, match=r"stages\.s\.data: missing required value"):
        load_recipe(str(path))


def test_invalid_yaml_names_line(tmp_path):
    path = write(tmp_path, "model: tiny\nstages:\n  s: [\n")
    with pytest.raises(CascadeUsageError, match=r"invalid YAML at line \d+"):
        load_recipe(str(path))


def test_cli_errors_are_one_line_exit_2(tmp_path, cli):
    path = write(tmp_path, RECIPE.format(run_dir=tmp_path / "run"))
    result = cli(["recipe", "validate", path, "stages.sft1.lrr=1"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert "stages.sft1.lrr: unknown key" in result.output
    result = cli(["recipe", "run", tmp_path / "missing.yaml"])
    assert result.exit_code == 2 and "recipe not found" in result.output


def parse_stage_argv(stage, argv):
    """Rebuild a stage config from a printed command the way the commands parse their argv."""
    from omegaconf import OmegaConf

    flags, overrides, rest = {}, [], argv[len(stage.kind.command) + 1 :]
    while rest:
        token = rest.pop(0)
        if token.startswith("--"):
            flags.setdefault(token[2:].replace("-", "_"), []).append(rest.pop(0))
        else:
            overrides.append(token)
    config_cls = stage.kind.config_class()
    hints = typing.get_type_hints(config_cls)  # a list or dict flag repeats; any other is given once
    flags = {key: words if typing.get_origin(hints[key]) in (list, dict) else words[-1] for key, words in flags.items()}
    values = OmegaConf.merge(OmegaConf.create(collection_values(config_cls, flags)), parse_overrides(overrides))
    return structure(config_cls, values)


@pytest.mark.parametrize("which", ["mini", "tiny"])
def test_plan_round_trips_to_the_same_configs(tmp_path, which):
    """Each printed command, parsed the way the commands parse their argv, rebuilds the stage config."""
    if which == "tiny":  # nested values: phases (a list of mappings), dict-valued keys, list and dict flags
        overrides = ["stages.data_sft.map={prompt: question, answer: solution}", f"run_dir={tmp_path / 'run'}"]
        recipe = load_recipe("tiny", overrides)  # a run_dir without results: `best:` stays as written
    else:
        recipe = load_recipe(str(write(tmp_path, RECIPE.format(run_dir=tmp_path / "run"))), ["stages.sft1.lr=3e-4"])
    lines = [line for line in plan_lines(recipe) if line.startswith(("cascade prepare-data", "cascade sft",
                                                                     "cascade rlhf", "cascade rlvr", "cascade distill"))]
    assert len(lines) == len(recipe.stages)
    for stage, line in zip(recipe.stages, lines, strict=True):
        argv = shlex.split(line)
        assert argv == stage_argv(stage)
        assert to_plain(parse_stage_argv(stage, argv)) == to_plain(stage.config), stage.name


def test_builtin_recipes_validate():
    recipes = builtin_recipes()
    assert "tiny" in recipes
    for name in recipes:
        load_recipe(name)


def test_recipe_cp_list_show(tmp_path, cli):
    result = cli(["recipe", "list"])
    assert result.exit_code == 0 and "tiny" in result.output
    result = cli(["recipe", "cp", "tiny", tmp_path])
    assert result.exit_code == 0 and (tmp_path / "tiny.yaml").is_file()
    assert cli(["recipe", "cp", "tiny", tmp_path]).exit_code == 2  # refuses to overwrite
    result = cli(["recipe", "show", "tiny", "--resolved"])
    assert result.exit_code == 0 and "runs/tiny/sft" in result.output
