"""Checks only (this module builds no job): refuse a stage before submission: flags OpenRLHF 0.11.2 does not
know, ill-typed values, a cluster too small for the roles, or OpenRLHF's own cluster assertions that would
fail after minutes of start-up.

Flags are checked against the shipped flag set (flags_0_11_2.json, generated from OpenRLHF's source by
flagset.py), rebuilt into an argparse parser, so no OpenRLHF install is needed to plan or submit.
"""

from __future__ import annotations

import argparse
import functools

from cascade_cli.config.common import StageConfig
from cascade_cli.config.grpo import GRPOConfig
from cascade_cli.engines.openrlhf.cluster import role_gpus
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


def _where(config: StageConfig) -> str:
    return f"stage {config.name or config.kind}"


def check_cluster(config: StageConfig) -> None:
    """The cluster block's sizes are positive."""
    cluster = config.cluster
    for key, value in (
        ("nodes", cluster.nodes),
        ("gpus_per_node", cluster.gpus_per_node),
        ("vllm_engines", cluster.vllm_engines),
        ("vllm_tensor_parallel_size", cluster.vllm_tensor_parallel_size),
    ):
        if int(value) < 1:
            raise CascadeUsageError(f"{_where(config)}: cluster.{key}: expected a positive integer, found {value}")


def check_rl_cluster(config: GRPOConfig) -> None:
    """An RL stage's roles fit the cluster, and OpenRLHF's colocation assertions hold."""
    check_cluster(config)
    cluster = config.cluster
    where = f"{_where(config)}: cluster"
    total = int(cluster.nodes) * int(cluster.gpus_per_node)
    actor = role_gpus(cluster, cluster.actor_gpus)
    vllm = int(cluster.vllm_engines) * int(cluster.vllm_tensor_parallel_size)
    if actor > total:
        raise CascadeUsageError(f"{where}.actor_gpus: {actor} GPUs asked, the cluster has {total}")
    uses_ref = config.kl_coef > 0
    uses_rm = config.kind == "rlhf" and not cluster.reward_urls
    if uses_rm and config.dynamic_filter:
        raise CascadeUsageError(
            f"{where}.reward_urls: dynamic_filter needs the reward service (OpenRLHF filters on remote rewards "
            "only); set cluster.reward_urls or dynamic_filter=false"
        )
    samples = config.prompts_per_step * config.group_size
    if samples < actor:
        raise CascadeUsageError(
            f"{_where(config)}: prompts_per_step x group_size = {samples} samples per step is fewer than the "
            f"{actor} actor GPUs (OpenRLHF asserts at least one sample per GPU)"
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
        needed["ref"] = role_gpus(cluster, cluster.ref_gpus)
    if uses_rm:
        needed["reward"] = role_gpus(cluster, cluster.reward_gpus)
    if sum(needed.values()) > total:
        parts = " + ".join(f"{role} {gpus}" for role, gpus in needed.items())
        raise CascadeUsageError(
            f"{where}: the roles need {parts} = {sum(needed.values())} GPUs without colocate_all; the cluster has "
            f"{cluster.nodes} x {cluster.gpus_per_node} = {total} (set actor_gpus / vllm_engines, or colocate_all=true)"
        )
