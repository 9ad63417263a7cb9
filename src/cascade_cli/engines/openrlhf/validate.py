"""Refuse a stage before submission: flags OpenRLHF 0.11.2 does not know, ill-typed values, a cluster too
small for the roles, or OpenRLHF's own cluster assertions that would fail after minutes of start-up.

Flags are checked against the shipped flag set (flags_0_11_2.json, generated from OpenRLHF's source by
flagset.py), rebuilt into an argparse parser, so no OpenRLHF install is needed to plan or submit.
"""

from __future__ import annotations

import argparse
import functools
from typing import Any

from cascade_cli.errors import CascadeUsageError

_TYPES = {"int": int, "float": float, "str": str}


class _RefusingParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise CascadeUsageError(f"openrlhf.cli.{self.prog}: {message}")


@functools.cache
def shipped_parser(cli: str) -> argparse.ArgumentParser:
    from cascade_cli.engines.openrlhf.flagset import shipped_flag_sets

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


def _gpus(layout: tuple[int, int]) -> int:
    return layout[0] * layout[1]


def check_cluster(config: Any) -> None:
    """The roles fit the cluster, and OpenRLHF's colocation assertions hold."""
    from cascade_cli.engines.openrlhf.argv import role_layout

    cluster = config.cluster
    where = f"stage {getattr(config, 'name', '') or config.kind}: cluster"
    for key in ("nodes", "gpus_per_node", "vllm_engines", "vllm_tensor_parallel_size"):
        if int(getattr(cluster, key)) < 1:
            raise CascadeUsageError(
                f"{where}.{key}: expected a positive integer, found {getattr(cluster, key)}"
            )
    total = int(cluster.nodes) * int(cluster.gpus_per_node)
    if config.kind not in ("rlvr", "rlhf"):
        return
    actor = _gpus(role_layout(cluster, cluster.actor_gpus))
    vllm = int(cluster.vllm_engines) * int(cluster.vllm_tensor_parallel_size)
    if actor > total:
        raise CascadeUsageError(f"{where}.actor_gpus: {actor} GPUs asked, the cluster has {total}")
    uses_ref = float(getattr(config, "kl_coef", 0.0) or 0.0) > 0
    uses_rm = not (getattr(cluster, "reward_urls", None) or []) and config.kind == "rlhf"
    if uses_rm and getattr(config, "dynamic_filter", False):
        raise CascadeUsageError(
            f"{where}.reward_urls: dynamic_filter needs the reward service (OpenRLHF filters on remote rewards "
            "only); set cluster.reward_urls or dynamic_filter=false"
        )
    samples = int(getattr(config, "prompts_per_step", 1)) * int(getattr(config, "group_size", 1))
    if samples < actor:
        raise CascadeUsageError(
            f"stage {getattr(config, 'name', '') or config.kind}: prompts_per_step x group_size = {samples} samples "
            f"per step is fewer than the {actor} actor GPUs (OpenRLHF asserts at least one sample per GPU)"
        )
    if cluster.colocate_all:
        if vllm != actor:
            raise CascadeUsageError(
                f"{where}: colocate_all needs vllm_engines x vllm_tensor_parallel_size == actor GPUs "
                f"(OpenRLHF asserts it); found {cluster.vllm_engines} x {cluster.vllm_tensor_parallel_size} = "
                f"{vllm} for {actor} actor GPUs"
            )
        return
    needed = {"actor": actor, "vllm": vllm}
    if uses_ref:
        needed["ref"] = _gpus(role_layout(cluster, cluster.ref_gpus))
    if uses_rm:
        needed["reward"] = _gpus(role_layout(cluster, cluster.reward_gpus))
    if sum(needed.values()) > total:
        parts = " + ".join(f"{role} {gpus}" for role, gpus in needed.items())
        raise CascadeUsageError(
            f"{where}: the roles need {parts} = {sum(needed.values())} GPUs without colocate_all; the cluster has "
            f"{cluster.nodes} x {cluster.gpus_per_node} = {total} (set actor_gpus / vllm_engines, or colocate_all=true)"
        )
