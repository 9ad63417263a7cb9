"""`openrlhf.extra_args`: OpenRLHF flags a stage passes to its jobs as written, checked before submission.

Each flag must be one of the job CLI's own flags (the shipped flag table, flags_0_11_2.json, read from
OpenRLHF's source by flagset.py); a typo is a usage error with the closest flag named, and the values are
checked by OpenRLHF's parser rebuilt from that table (validate.py), so a bad value fails here, not on the
cluster. Items may hold several words (`"--ds.zero_stage 3"`), split as a shell would.
"""

from __future__ import annotations

import difflib
import shlex
from typing import Any

from cascade_cli.console import print_warning
from cascade_cli.engines.openrlhf.flagset import shipped_flag_sets
from cascade_cli.engines.openrlhf.validate import validate_args
from cascade_cli.errors import CascadeUsageError

KIND_CLIS: dict[str, str] = {
    "sft": "train_sft",
    "reward_model": "train_rm",
    "rlhf": "train_ppo_ray",
    "rlvr": "train_ppo_ray",
}


def extra_args(config: Any) -> list[str]:
    """The stage's `openrlhf.extra_args` as argv words (every kind with OpenRLHF jobs has the key)."""
    return [word for item in config.openrlhf.extra_args or [] for word in shlex.split(str(item))]


def _flag_name(word: str) -> str | None:
    """The flag a word names (`--a.b=1` -> `--a.b`), None for a value (`0.7`, `-1`)."""
    if not word.startswith("-") or word[1:2].isdigit() or word[1:2] == ".":
        return None
    return word.split("=", 1)[0]


def check_flags(cli: str, words: list[str]) -> None:
    """Usage error for a flag `cli` does not have (with a did-you-mean) or a value its parser refuses."""
    table = shipped_flag_sets()["clis"][cli]
    for word in words:
        name = _flag_name(word)
        if name is None or name in table:
            continue
        close = difflib.get_close_matches(name, list(table), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise CascadeUsageError(
            f"openrlhf.extra_args: {name} is not a flag of openrlhf.cli.{cli} (0.11.2){hint}"
        )
    if words and _flag_name(words[0]) is None:
        raise CascadeUsageError(f"openrlhf.extra_args: expected a --flag first; found {words[0]!r}")
    try:
        validate_args(cli, words)
    except CascadeUsageError as error:
        raise CascadeUsageError(f"openrlhf.extra_args: {error}") from None


def check_extra_args(config: Any) -> None:
    """The stage table's registry check of sft, rlhf rm, rlhf and rlvr (stages.py): runs on `recipe validate`
    and before every run."""
    words = extra_args(config)
    if not words:
        return
    cli = KIND_CLIS[config.kind]
    check_flags(cli, words)
    if config.engine != "openrlhf":
        print_warning(
            f"openrlhf.extra_args: ignored by engine {config.engine} (they go to openrlhf.cli.{cli} jobs)"
        )
