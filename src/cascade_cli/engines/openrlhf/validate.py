"""Checks only (this module builds no job): refuse flags OpenRLHF 0.11.2 does not know and ill-typed values
before submission. (A cluster too small for the roles, and OpenRLHF's own cluster assertions, are checks of
the config classes: config/grpo.py `check_openrlhf_layout`.)

Flags are checked against the shipped flag set (flags_0_11_2.json, generated from OpenRLHF's source by
flagset.py), rebuilt into an argparse parser, so no OpenRLHF install is needed to plan or submit.
"""

from __future__ import annotations

import argparse
import functools

from cascade_cli.engines.openrlhf.flagset import shipped_flag_sets
from cascade_cli.errors import CascadeUsageError

_TYPES = {"int": int, "float": float, "str": str}


class _RefusingParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise CascadeUsageError(f"openrlhf.cli.{self.prog}: {message}")


@functools.cache
def shipped_parser(cli: str) -> argparse.ArgumentParser:
    table = shipped_flag_sets()["clis"].get(cli)
    if table is None:
        raise CascadeUsageError(f"openrlhf: no flag set for CLI {cli!r}")
    parser = _RefusingParser(prog=cli, add_help=False, allow_abbrev=False)
    for option, spec in table.items():
        if spec["store"] == "true":
            parser.add_argument(option, dest=spec["dest"], action="store_true")
        elif spec["store"] == "false":
            parser.add_argument(option, dest=spec["dest"], action="store_false")
        else:
            parser.add_argument(
                option,
                dest=spec["dest"],
                nargs=spec["nargs"],
                type=_TYPES.get(spec["type"], str),
                choices=spec["choices"],
            )
    return parser


def validate_args(cli: str, args: list[str]) -> argparse.Namespace:
    """Parse `args` as OpenRLHF's `cli` would; unknown flags, missing or ill-typed values raise."""
    return shipped_parser(cli).parse_args(args)
