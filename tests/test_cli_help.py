"""Every command's --help lists its config keys with type, default and description, read from the config
class (one source for help, validation and docs); every key of every stage config is documented."""

from __future__ import annotations

import dataclasses
import textwrap

import pytest

from cascade_cli.config.docs import config_keys, field_description
from cascade_cli.config.eval import EvalConfig
from cascade_cli.stage_kinds import STAGE_KINDS


def flat(text: str) -> str:
    return " ".join(text.split())


def test_rlvr_help_lists_its_config_keys(cli):
    result = cli(["rlvr", "--help"])
    assert result.exit_code == 0
    help_text = flat(result.output)
    assert "Config keys" in help_text
    assert "group_size int = 8. Responses per prompt" in help_text
    assert "rollout.backend str = auto. auto | hf | vllm" in help_text
    assert "dynamic_filter bool = false. Batch-level (DAPO) dynamic filtering" in help_text
    assert "phases list[PhaseConfig] = []." in help_text and "phases[].steps int = required." in help_text
    assert "cluster.nodes int = 1. Nodes in the Ray cluster." in help_text
    assert "restart bool = false." in help_text and "--restart" in help_text
    assert "kind " not in help_text.split("Config keys", 1)[1]  # set by the command, not by a user


@pytest.mark.parametrize(
    "command,key",
    [
        (["sft"], "packing bool = false."),
        (["rlhf"], "reward_shaping str = none."),
        (["rlhf", "rm"], "heldout_fraction float = 0.1."),
        (["prepare-data"], "wrong_fraction float = 0.2."),
        (["prepare-data", "filter"], "max_pass float = 0.75."),
        (["recipe", "run"], "run_dir str = runs/${name}."),
    ],
)
def test_every_key_value_command_lists_its_keys(cli, command, key):
    result = cli([*command, "--help"])
    assert result.exit_code == 0 and key in flat(result.output), command


def test_eval_flags_come_from_eval_settings(cli):
    help_text = flat(cli(["eval", "--help"]).output)
    assert "--max-tokens" in help_text and "Max new tokens per sample (unset: the" in help_text
    assert "--workers" in help_text and "verifier processes" in help_text


@pytest.mark.parametrize("kind", list(STAGE_KINDS))
def test_every_stage_config_key_has_a_description(kind):
    """Fails when someone adds a config key without a comment (trailing, or the line above the field)."""
    undocumented = [key.key for key in config_keys(STAGE_KINDS[kind].config_class()) if not key.description]
    assert not undocumented, f"{kind}: keys without a `# comment`: {undocumented}"


def test_eval_config_keys_have_descriptions():
    assert [key.key for key in config_keys(EvalConfig) if not key.description] == []


def test_description_is_the_trailing_comment_else_the_lines_above(tmp_path, monkeypatch):
    source = textwrap.dedent('''
        from dataclasses import dataclass, field

        @dataclass
        class Example:
            """Docstring."""

            # Two lines
            # above.
            above: int = 1
            trailing: str = "x"  # trailing wins
            # ignored: a trailing comment wins
            both: float = 0.5  # the trailing one

            # a blank line ends a comment block

            bare: bool = False
            items: list[int] = field(default_factory=list)
    ''')
    (tmp_path / "example_config.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    from example_config import Example

    assert field_description(Example, "above") == "Two lines above."
    assert field_description(Example, "trailing") == "trailing wins"
    assert field_description(Example, "both") == "the trailing one"
    assert field_description(Example, "bare") == ""
    keys = {key.key: key for key in config_keys(Example)}
    assert (keys["items"].type, keys["items"].default) == ("list[int]", "[]")
    assert [f.name for f in dataclasses.fields(Example)] == list(keys)


def every_help(cli) -> dict[str, str]:
    """`cascade WORDS --help` of every visible command and group, whitespace flattened."""
    import typer.main

    from cascade_cli.cli import app

    found: dict[str, str] = {}

    def walk(words: list[str], command) -> None:
        found[" ".join(words)] = flat(cli([*words, "--help"]).output)
        for name, sub in getattr(command, "commands", {}).items():
            if not getattr(sub, "hidden", False):
                walk([*words, name], sub)

    walk([], typer.main.get_command(app))
    return found


USER_FILES = ("reward.py", "agent.py", "FILE.py")


def test_flags_show_as_flags_and_no_help_points_into_source_files(cli):
    import re

    for words, text in every_help(cli).items():
        assert "<bool>" not in text, f"`cascade {words} --help` shows a flag as taking a value"
        # files the examples write, and a reward function of the user's own (FILE.py, my_reward.py)
        sources = {s for s in re.findall(r"[\w/]+\.py\b", text) if not s.endswith(USER_FILES)}
        assert not sources, f"`cascade {words} --help` points into source files: {sources}"
    result = cli(["sft", "--init", "tiny", "--data", "x", "--out", "o", "--dry-run", "true"])
    assert result.exit_code == 2  # a flag takes no value: `true` is read as a key=value word and refused


def test_eval_help_lists_every_benchmark_and_only_benchmarks(cli):
    from cascade_cli.evaluation.benchmarks import BENCHMARKS, FILE_BENCHMARKS

    text = flat(cli(["eval", "--help"]).output)
    missing = [name for name in [*BENCHMARKS, *(f"{kind}:FILE" for kind in FILE_BENCHMARKS if kind != "file")]
               if name not in text]
    assert not missing, f"`cascade eval --help` does not list {missing}"
    assert all("gpqa" in BENCHMARKS or "GPQA" not in help_text for help_text in every_help(cli).values())
