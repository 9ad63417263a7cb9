"""Gains that look like a hack: a benchmark's headline score rises after a stage while its answers show that
the policy learned the form the verifier pays for rather than the task.

A stage is flagged, per benchmark whose score rose from the stage before it, when
    (a) shorter: its median answer is less than half as long as the previous stage's;
    (b) group_fell: one of the benchmark's instruction groups (IFEval) or categories (IFBench) fell by more
        than its interval: the paired 95% bootstrap interval of the group's change lies wholly below zero;
    (c) short_of_length: more answers fall short of a length minimum their prompt asked for (IFEval's
        length_constraints: at least N words or sentences, N paragraphs) than after the previous stage, the
        paired 95% interval of that change wholly above zero.
The numbers come from `instruction_groups.stage_breakdown` (each stage's samples.jsonl); the headline scores
from results.json (`cascade report`) or from the samples (`benchmarks/real_gains.py`).
"""

from __future__ import annotations

from typing import Any

SHORTER_THAN = 0.5  # (a): the median answer below this fraction of the previous stage's


def hack_flags(
    breakdown: dict[str, dict[str, Any]], scores: dict[str, dict[str, float]]
) -> list[dict[str, Any]]:
    """Every flag, in benchmark then stage order: {"benchmark", "stage", "previous_stage", "kind", "gain",
    "detail"}. `scores`: benchmark -> stage -> headline score (percent)."""
    flags: list[dict[str, Any]] = []
    for name, entry in breakdown.items():
        stages = [stage for stage in entry["stages"] if stage in scores.get(name, {})]
        for previous, stage in zip(stages, stages[1:], strict=False):
            gain = scores[name][stage] - scores[name][previous]
            if gain <= 0:
                continue
            found = (
                _shorter(entry, previous, stage) + _groups_fell(entry, stage) + _short_of_length(entry, stage)
            )
            flags += [
                {
                    "benchmark": name,
                    "stage": stage,
                    "previous_stage": previous,
                    "kind": kind,
                    "gain": round(gain, 2),
                    "detail": detail,
                }  # fmt: skip
                for kind, detail in found
            ]
    return flags


def _shorter(entry: dict[str, Any], previous: str, stage: str) -> list[tuple[str, str]]:
    before, after = entry["words"][previous], entry["words"][stage]
    if after < SHORTER_THAN * before:
        return [("shorter", f"median answer {after:.0f} words, from {before:.0f} (less than half)")]
    return []


def _groups_fell(entry: dict[str, Any], stage: str) -> list[tuple[str, str]]:
    found = []
    for group, cells in entry.get("groups", {}).items():
        change = (cells.get(stage) or {}).get("change")
        if change and change[2] < 0:
            found.append(("group_fell", f"{group} fell {change[0]:+.1f} points [{change[1]:+.1f}, {change[2]:+.1f}] "
                                        f"to {cells[stage]['share']:.1f}% followed"))  # fmt: skip
    return found


def _short_of_length(entry: dict[str, Any], stage: str) -> list[tuple[str, str]]:
    cell = entry.get("short", {}).get(stage)
    if not cell or not cell["change"] or cell["change"][1] <= 0:
        return []
    earlier = [s for s in entry["stages"][: entry["stages"].index(stage)] if s in entry["short"]]
    before = entry["short"][earlier[-1]]["count"] if earlier else 0
    change = cell["change"]
    return [("short_of_length", f"{cell['count']} of {cell['of']} answers short of the length asked for, from "
                                f"{before} ({change[0]:+.1f} points [{change[1]:+.1f}, {change[2]:+.1f}])")]  # fmt: skip


def flag_line(flag: dict[str, Any]) -> str:
    """One flag as a sentence (report.md's list, the warnings `cascade report` prints)."""
    return (
        f"{flag['benchmark']} rose {flag['gain']:+.1f} after `{flag['stage']}` (from `{flag['previous_stage']}`) "
        f"but {flag['detail']} [{flag['kind']}]"
    )


def render_flags(flags: list[dict[str, Any]]) -> list[str]:
    """report.md's section: what a flag means, then one line per flag (or None.)."""
    lines = [
        "## Gains that look like a hack",
        "",
        "A benchmark's score rose after the stage while (a) its median answer is less than half the previous "
        "stage's [shorter], (b) one of its instruction groups or categories fell by more than its paired 95% "
        "interval [group_fell], or (c) more answers fall short of the length their prompt asked for, by more "
        "than its interval [short_of_length]. Read the per-group table before trusting such a gain.",
        "",
    ]
    return lines + ([f"- ⚠ {flag_line(flag)}" for flag in flags] if flags else ["None."]) + [""]
