"""The training commands (sft, rlhf, rlhf rm, rlvr), each built from its row of the stage table.

A stage command is: --flags (the table's `flags` and `options`, typed and documented by the config class) +
key=value words -> the kind's config -> `run_config`. `cascade rlhf` is also a group (its `rm` subcommand).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer

from cascade_cli.cli.base import (
    OVERRIDES_COMMAND,
    OVERRIDES_SETTINGS,
    OverridesArg,
    collection_values,
    field_option,
    given,
    keys_command,
    make_typer,
    stage_group,
    with_parameters,
)
from cascade_cli.console import print_done
from cascade_cli.stage_kinds import STAGE_KINDS, StageKind, run_config

SHORT_NAMES = {"domain": ("-d",)}


def _done_rlhf(config: Any, summary: dict[str, Any]) -> str:
    line = f"{config.out}  steps {summary.get('steps', '-')}"
    if "heldout_reward_after" in summary:
        line += f"  held-out RM score {summary['heldout_reward_before']:.3f} -> {summary['heldout_reward_after']:.3f}"
    return line


def _done_reward_model(config: Any, summary: dict[str, Any]) -> str:
    line = f"{config.out}  steps {summary.get('steps', '-')}"
    if "heldout_accuracy" in summary:
        line += (
            f"  held-out pairwise accuracy {summary['heldout_accuracy_before']:.3f} -> "
            f"{summary['heldout_accuracy']:.3f}  margin {summary['heldout_margin']:.2f}"
        )
    if summary.get("bad_rows_dropped"):
        line += f"  ({summary['bad_rows_dropped']} bad rows dropped)"
    return line


def _done_distill(config: Any, summary: dict[str, Any]) -> str:
    line = f"[green]done[/]: {config.out}  steps {summary['steps']}"
    for domain in config.teachers:
        if f"heldout_accuracy_{domain}_after" in summary:
            before, after = summary[f"heldout_accuracy_{domain}_before"], summary[f"heldout_accuracy_{domain}_after"]
            line += f"  held-out {domain} {before:.3f} -> {after:.3f}"
    return line


def _done_rlvr(config: Any, summary: dict[str, Any]) -> str | None:
    if config.engine != "local":
        return None
    line = f"{config.out}  steps {summary['steps']}"
    if "heldout_accuracy_after" in summary:
        line += f"  held-out accuracy {summary['heldout_accuracy_before']:.3f} -> {summary['heldout_accuracy_after']:.3f}"
    return line


# What each command says about itself: its help (with an example) and its last line (None: the runner's own).
HELP: dict[str, tuple[str, Callable[[Any, dict[str, Any]], str | None] | None]] = {
    "sft": (
        "Supervised fine-tuning with assistant-only loss on the local engine (resumes from OUT/trainer_state).\n\n"
        "Example: [bold]cascade sft --init tiny --data runs/tiny/data_sft --out runs/tiny/sft lr=3e-3 max_steps=300[/]",
        None,
    ),
    "reward_model": (
        "Train a Bradley-Terry reward model (one `score` head; loads in AutoModelForSequenceClassification and "
        "OpenRLHF).\n\n"
        "Example: [bold]cascade rlhf rm --init runs/tiny/sft --data runs/tiny/data_pref --out runs/tiny/rm lr=1.5e-3[/]",
        _done_reward_model,
    ),
    "rlhf": (
        "GRPO on a reward model's scores (Half-Half thinking modes, code-switch penalty); subcommand `rm` trains "
        "the RM.\n\n"
        "Overrides go after the options as key=value (steps=20 kl_coef=1e-3 reward_shaping=zscore_tanh ...).\n\n"
        "Example: [bold]cascade rlhf --init runs/tiny/sft --reward-model runs/tiny/rm --data runs/tiny/data_chat "
        "--out runs/tiny/rlhf steps=8[/]\n\n"
        "Example: [bold]cascade rlhf rm --init runs/tiny/sft --data runs/tiny/data_pref --out runs/tiny/rm lr=1.5e-3[/]",
        _done_rlhf,
    ),
    "rlvr": (
        "GRPO with the domain's verifier as the reward (strictly on-policy, token-level loss, no KL).\n\n"
        "Example: [bold]cascade rlvr --domain math --init runs/tiny/sft --data runs/tiny/data_math "
        "--out runs/tiny/math_rl steps=15[/]\n\n"
        "Example: [bold]cascade rlvr --domain code --init runs/tiny/math_rl --data runs/tiny/data_code "
        "--out runs/tiny/code_rl steps=15[/]\n\n"
        "Your own reward function (OpenRLHF's reward_func signature, batched) instead of the verifier:\n\n"
        "Example: [bold]cascade rlvr --domain math --init runs/tiny/sft --data runs/tiny/data_math "
        "--out runs/tiny/my_reward_rl --reward-func examples/data/my_reward.py:score steps=15[/]\n\n"
        "The same in the code verifier's bubblewrap sandbox (no network, no host files but the runtime, "
        "site-packages and the reward file; reward_func_timeout_s and reward_func_memory_mb per batch):\n\n"
        "Example: [bold]cascade rlvr --domain math --init runs/tiny/sft --data runs/tiny/data_math "
        "--out runs/tiny/my_reward_sandboxed --reward-func examples/data/my_reward.py:score "
        "reward_func_isolation=sandbox steps=15[/]",
        _done_rlvr,
    ),
    "distill": (
        "Multi-domain on-policy distillation (MOPD): the student samples, each prompt's domain routes it to its "
        "teacher, and the loss follows the teacher's per-token log-probs of the sampled tokens.\n\n"
        "Example: [bold]cascade distill --init runs/tiny/swe_rl --teachers if=runs/tiny/if_rl,math=runs/tiny/math_rl "
        "--data runs/tiny/data_if --data runs/tiny/data_math --out runs/tiny/distill steps=10[/]",
        _done_distill,
    ),
}


def run_stage(kind: StageKind, values: dict[str, Any], overrides: list[str]) -> None:
    """Flags + key=value words -> the kind's config -> its engine; then the command's last line."""
    from cascade_cli.config.build import build_stage_config

    config_cls = kind.config_class()
    config = build_stage_config(
        config_cls, collection_values(config_cls, given(values)), overrides, where=" ".join(kind.command)
    )
    summary = run_config(config)
    done = HELP[kind.kind][1]
    line = done(config, summary) if done else None
    if line:
        print_done(line)


def _options(kind: StageKind, required: bool) -> list:
    config_cls = kind.config_class()
    flags = [field_option(config_cls, key, required=required, names=SHORT_NAMES.get(key, ())) for key in kind.flags]
    return flags + [field_option(config_cls, key) for key in kind.options]


def _stage_command(kind: StageKind) -> Callable[..., None]:
    def command(overrides: OverridesArg = None, **values: Any) -> None:
        run_stage(kind, values, overrides or [])

    command.__doc__ = HELP[kind.kind][0]
    return with_parameters(command, _options(kind, required=True))


def _group_callback(kind: StageKind) -> Callable[..., None]:
    """The group's own stage: runs here when no word follows the options, else in OVERRIDES_COMMAND."""

    def callback(ctx: typer.Context, **values: Any) -> None:
        if ctx.invoked_subcommand is None:
            run_stage(kind, values, [])

    callback.__doc__ = HELP[kind.kind][0]
    return with_parameters(callback, _options(kind, required=False))


def _overrides_command(kind: StageKind) -> Callable[..., None]:
    words = " ".join(kind.command)

    def command(ctx: typer.Context, overrides: OverridesArg = None) -> None:
        run_stage(kind, dict(ctx.parent.params), overrides or [])

    command.__doc__ = f"`cascade {words} [OPTIONS] key=value ...`: the options, then config keys.\n\n" \
        f"Example: [bold]cascade {words} --help[/]"
    return command


def register(app: typer.Typer) -> None:
    # `prepare-data` and its `filter` subcommand: cli/data.py
    kinds = [kind for kind in STAGE_KINDS.values() if kind.command[0] != "prepare-data"]
    parents = {kind.command[0] for kind in kinds if len(kind.command) == 2}
    groups: dict[str, typer.Typer] = {}
    for kind in (kind for kind in kinds if len(kind.command) == 1):
        word = kind.command[0]
        if word in parents:  # `cascade rlhf ...` runs a stage and holds `cascade rlhf rm`
            groups[word] = make_typer(word, cls=stage_group(kind.config), invoke_without_command=True)
            groups[word].callback()(_group_callback(kind))
            groups[word].command(OVERRIDES_COMMAND, **OVERRIDES_SETTINGS)(_overrides_command(kind))
            app.add_typer(groups[word], name=word)
        else:
            app.command(word, cls=keys_command(kind.config))(_stage_command(kind))
    for kind in (kind for kind in kinds if len(kind.command) == 2):
        groups[kind.command[0]].command(kind.command[1], cls=keys_command(kind.config))(_stage_command(kind))
