"""Every numeric and enum key of every stage kind has a bound in its config class (config/checks.py), and a
value outside it is refused before any work with one line naming the key, the bound and the value found, exit
2: by the command and by `recipe validate`, which reject exactly the same values. The table is read from the
config classes, so a new key without a bound fails here."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml

from cascade_cli.config.checks import OneOf, Range, bounds_of, nested_config, scalar_type
from cascade_cli.config.eval import EvalConfig, EvalSettings
from cascade_cli.stage_kinds import STAGE_KINDS

# What each stage command needs besides the key under test (a --data that does not exist: if a bad value
# were let through, the run would stop on the missing data with another message, and the test fails).
REQUIRED = {
    "prepare_data": {"source": "tiny:math"},
    "sft": {"init": "tiny", "data": "missing.jsonl"},
    "reward_model": {"init": "tiny", "data": "missing.jsonl"},
    "rlhf": {"init": "tiny", "reward_model": "tiny", "data": "missing.jsonl"},
    "rlvr": {"domain": "math", "init": "tiny", "data": "missing.jsonl"},
    "distill": {"init": "tiny", "teachers": "math=tiny", "data": "missing.jsonl"},
    "pass_rate_filter": {"init": "tiny", "data": "missing.jsonl"},
}
IN_A_RECIPE = {"distill": {"teachers": {"math": "tiny"}, "data": ["missing.jsonl"]}}  # the same keys in YAML
LIST_ITEM_REQUIRED = {"phases": {"steps": 1}}  # an item of a list of configs needs these keys


def walk(cls: type, prefix: str = "") -> list[tuple[str, type, Any]]:
    """(dotted key, scalar type, bound or None) of every scalar key of `cls`, nested configs included."""
    hints, bounds, found = typing.get_type_hints(cls), bounds_of(cls), []
    for field in dataclasses.fields(cls):
        if field.name == "kind":
            continue
        nested, many = nested_config(hints[field.name])
        if nested is not None:
            found += walk(nested, f"{prefix}{field.name}[0]." if many else f"{prefix}{field.name}.")
            continue
        kind = scalar_type(hints[field.name])
        if kind in (int, float, str):
            found.append((f"{prefix}{field.name}", kind, bounds.get(field.name)))
    return found


def bad_values(kind: type, bound: Any) -> list[Any]:
    if isinstance(bound, Range):
        return bound.outside(kind is int)
    return ["bogus"] if isinstance(bound, OneOf) else []


def cases(cls: type) -> list[tuple[str, Any]]:
    return [(key, value) for key, kind, bound in walk(cls) for value in bad_values(kind, bound)]


CONFIGS = {name: kind.config_class() for name, kind in STAGE_KINDS.items()}
CONFIGS.update({"eval": EvalConfig})
STAGE_CASES = [(name, key, value) for name in STAGE_KINDS for key, value in cases(CONFIGS[name])]


@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_numeric_and_word_key_has_a_bound(name):
    """A number needs a Range, a string a OneOf or TEXT (any string, checked where it is resolved)."""
    unbounded = [key for key, _, bound in walk(CONFIGS[name]) if bound is None]
    assert not unbounded, f"{name}: keys without a bound in BOUNDS (config/checks.py): {unbounded}"


def as_override(key: str, value: Any) -> str:
    """`key=value`, or for a key inside a list of configs (`phases[0].steps`) the list with one item."""
    if "[0]." in key:
        outer, inner = key.split("[0].")
        item = {**LIST_ITEM_REQUIRED.get(outer, {}), inner: value}
        return f"{outer}=[{{{', '.join(f'{k}: {v}' for k, v in item.items())}}}]"
    return f"{key}={value}"


def assert_refused(output: str, key: str, value: Any) -> None:
    line = output.strip().splitlines()[-1]
    assert len(output.strip().splitlines()) == 1 and line.startswith("error: "), output
    assert f"{key}: expected " in line, output
    assert (repr(value) if isinstance(value, str) else str(value)) in line.split("expected", 1)[1], output


@pytest.mark.parametrize(("name", "key", "value"), STAGE_CASES)
def test_the_command_refuses_a_value_out_of_bounds(cli, tmp_path, name, key, value):
    kind = STAGE_KINDS[name]
    flags = [word for flag, given in REQUIRED[name].items() for word in (f"--{flag.replace('_', '-')}", given)]
    result = cli([*kind.command, *flags, "--out", tmp_path / "out", as_override(key, value)])
    assert result.exit_code == 2, result.output
    assert_refused(result.output, key, value)
    assert not (tmp_path / "out").exists()  # refused before any work


@pytest.mark.parametrize(("name", "key", "value"), STAGE_CASES)
def test_recipe_validate_refuses_the_same_value(cli, tmp_path, name, key, value):
    stage: dict[str, Any] = {"kind": name, **REQUIRED[name], **IN_A_RECIPE.get(name, {})}
    target, *path = key.replace("[0]", "").split(".")
    item = dict(LIST_ITEM_REQUIRED.get(target, {}))
    nested = stage.setdefault(target, [item] if "[0]" in key else {}) if path else stage
    (nested[0] if isinstance(nested, list) else nested)[path[-1] if path else target] = value
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({"model": "tiny", "run_dir": str(tmp_path / "run"), "stages": {"s": stage}}))
    result = cli(["recipe", "validate", recipe])
    assert result.exit_code == 2, result.output
    assert_refused(result.output, f"stages.s.{key}", value)


@pytest.mark.parametrize(("key", "value"), cases(EvalConfig))
def test_the_recipe_eval_block_and_the_eval_command_refuse_a_value_out_of_bounds(cli, tmp_path, key, value):
    recipe = tmp_path / "recipe.yaml"
    stages = {"d": {"kind": "prepare_data", "source": "tiny:math"}}
    recipe.write_text(yaml.safe_dump({"model": "tiny", "stages": stages, "eval": {key: value}}))
    result = cli(["recipe", "validate", recipe])
    assert result.exit_code == 2, result.output
    assert_refused(result.output, f"eval.{key}", value)
    if key in {f.name for f in dataclasses.fields(EvalSettings)}:
        result = cli(["eval", "--model", "tiny", "--benchmarks", "tiny_math", f"--{key.replace('_', '-')}", value])
        assert result.exit_code == 2, result.output
        assert_refused(result.output, key, value)


CLUSTER = "cluster.reward_urls=[http://127.0.0.1:5000/get_reward]"

# Keys that depend on each other, and names a registry holds: refused alike by the command and the recipe.
CROSS_CASES = [
    ("sft", ["lr=0.01", "min_lr=0.1"], "min_lr: expected a number <= lr (0.01), found 0.1"),
    ("sft", ["dry_run=true"], "dry_run: only engine openrlhf has a dry run"),
    ("sft", ["lora.r=8", "lora.target_modules=','"], "lora.target_modules: expected all-linear or module names"),
    ("sft", ["cluster.runtime_env_json='[1]'"], "cluster.runtime_env_json: expected a JSON object, found list"),
    ("sft", ["init=smollm2-135"], "init smollm2-135: not a known model spec"),
    ("sft", ["init=tiny:abc"], "init tiny:abc: expected `tiny` or `tiny:SEED`"),
    ("reward_model", ["lr=1e-5", "min_lr=1e-4"], "min_lr: expected a number <= lr"),
    ("rlvr", ["if_rm_bonus=true", "domain=if"], "if_rm_bonus: the local engine needs reward_model=CKPT"),
    ("rlvr", ["reward_model=tiny", "domain=if"], "reward_model: read only by if_rm_bonus on the local engine"),
    ("rlvr", ["engine=openrlhf", CLUSTER, "domain=if", "if_rm_bonus=true", "reward_model=tiny"], "reward_model: read only"),
    ("rlvr", ["engine=openrlhf", "if_rm_bonus=true", CLUSTER], "if_rm_bonus: only for domain if"),
    ("rlvr", ["engine=openrlhf"], "cluster.reward_urls: missing reward source"),
    ("rlvr", ["engine=openrlhf", CLUSTER, "cluster.actor_gpus=12"], "cluster.actor_gpus: 12 GPUs must fill whole nodes"),
    ("rlvr", ["engine=openrlhf", CLUSTER, "cluster.vllm_engines=4"], "colocate_all needs vllm_engines"),
    ("rlvr", ["engine=openrlhf", CLUSTER, "prompts_per_step=1", "group_size=4"], "fewer than the 8 actor GPUs"),
    ("rlvr", ["cluster.reward_urls=[10.0.0.5:5000]"], "cluster.reward_urls: '10.0.0.5:5000': expected an http"),
    ("rlhf", ["engine=openrlhf", "top_k=20"], "top_k / overlong_filter / epoch_filter need cascade's agent"),
    ("prepare_data", ["add_constraints=ifevil"], "add_constraints: expected ifeval | ifbench"),
    ("prepare_data", ["add_constraints=ifeval", "constraints_per_prompt=9"], "constraints_per_prompt: expected a count"),
    ("prepare_data", ["format=bogus"], "format: expected auto or one of"),
    ("prepare_data", ["mix.math=-1"], "mix.math: expected a weight >= 0, found -1"),
    ("distill", ["dynamic_filter=true"], "dynamic_filter: distill learns from every rollout's tokens"),
]


@pytest.mark.parametrize(("name", "overrides", "message"), CROSS_CASES)
def test_checks_across_keys_are_the_same_for_the_command_and_recipe_validate(cli, tmp_path, name, overrides, message):
    kind = STAGE_KINDS[name]
    flags = [word for flag, given in REQUIRED[name].items() for word in (f"--{flag.replace('_', '-')}", given)]
    result = cli([*kind.command, *flags, "--out", tmp_path / "out", *overrides])
    assert result.exit_code == 2 and message in result.output, result.output
    assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "out").exists()
    recipe = tmp_path / "recipe.yaml"
    stage = {"kind": name, **REQUIRED[name], **IN_A_RECIPE.get(name, {})}
    recipe.write_text(yaml.safe_dump({"model": "tiny", "run_dir": str(tmp_path / "run"), "stages": {"s": stage}}))
    result = cli(["recipe", "validate", recipe, *(f"stages.s.{item}" for item in overrides)])
    assert result.exit_code == 2 and message in result.output, result.output


def test_a_run_of_a_stage_built_in_python_checks_it_too(tmp_path: Path):
    """Configs built in Python (tests, scripts) meet the same checks at `run_config`, before any work."""
    from cascade_cli.config.grpo import RLVRConfig
    from cascade_cli.errors import CascadeUsageError
    from cascade_cli.stage_kinds import run_config

    config = RLVRConfig(domain="math", init="tiny", data="missing.jsonl", out=str(tmp_path / "o"), steps=-3)
    with pytest.raises(CascadeUsageError, match="steps: expected an integer >= 1, found -3"):
        run_config(config)
    assert not (tmp_path / "o").exists()


def test_recipe_validate_refuses_an_unknown_benchmark_a_run_would_stop_on(cli, tmp_path: Path):
    recipe = tmp_path / "recipe.yaml"
    stages = {"d": {"kind": "prepare_data", "source": "tiny:math"}}
    eval_block = {"after_each_stage": True, "benchmarks": ["tiny_math", "gpqa"]}
    recipe.write_text(yaml.safe_dump({"model": "tiny", "stages": stages, "eval": eval_block}))
    result = cli(["recipe", "validate", recipe])
    assert result.exit_code == 2 and "eval.benchmarks: unknown benchmark 'gpqa'" in result.output, result.output
