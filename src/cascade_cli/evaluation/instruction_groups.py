"""Where an instruction-following score comes from: per instruction group, per stage (IFEval, IFBench).

An IFEval or IFBench sample (a row of `cascade eval`'s samples.jsonl) carries the IF verifier's verdict for each
of its instructions (`details.instructions = [{"id", "strict", "loose"}]`) and the label it was scored against
(`label.instruction_id_list` and `label.kwargs`). The group of an instruction is its id's prefix: IFEval's
`length_constraints`, `change_case`, `punctuation`, ...; IFBench's categories `count`, `format`, `ratio`, ...

A gain carried by groups that a short answer satisfies (no commas, all lowercase, a quoted reply) while the
groups that ask for length or structure fall is the signature of a policy that learned brevity rather than the
instructions; `hack_flags` turns these numbers into flags, this module measures them.

Pairing: an instruction is keyed by (problem id, its place in the problem's instruction list), so a stage's
verdict is compared with the previous stage's verdict on the same instruction of the same prompt; with k
samples per problem its value is the share of the k samples that follow it.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from cascade_cli.chat import answer_text
from cascade_cli.evaluation.intervals import bootstrap
from cascade_cli.jsonl import read_jsonl
from cascade_cli.verifiers.base import RecordError, parse_label
from cascade_cli.verifiers.instruction import text as measure
from cascade_cli.verifiers.instruction.verifier import parse_instructions

SAMPLES_NAME = "samples.jsonl"
LENGTH_GROUP = "length_constraints"
PARAGRAPH_DIVIDER = re.compile(r"\s?\*\*\*\s?")  # IFEval's `***` divider (ifeval.number_paragraphs)

Key = tuple[str, int]  # (problem id, the instruction's place in its prompt's list)


def read_samples(path: str | Path) -> list[dict[str, Any]]:
    """A samples.jsonl's rows; a malformed line fails naming the file and the line."""
    return read_jsonl(path)


def answer_words(row: dict[str, Any]) -> int:
    """Words in the answer a verifier reads (the text after `</think>`)."""
    return len(answer_text(str(row.get("response") or "")).split())


def median_words(rows: list[dict[str, Any]]) -> dict[str, float]:
    """benchmark -> the median length of its answers in words (a score can rise because answers shrank)."""
    lengths: dict[str, list[int]] = defaultdict(list)
    for row in rows:
        lengths[str(row.get("benchmark"))].append(answer_words(row))
    return {name: statistics.median(values) for name, values in lengths.items()}


def instruction_benchmarks(rows: list[dict[str, Any]]) -> list[str]:
    """The benchmarks whose samples carry per-instruction verdicts (IFEval, IFBench), in first-seen order."""
    names: dict[str, None] = {}
    for row in rows:
        if isinstance((row.get("details") or {}).get("instructions"), list):
            names.setdefault(str(row.get("benchmark")), None)
    return list(names)


def followed_by_group(rows: list[dict[str, Any]], benchmark: str) -> dict[str, dict[Key, list[bool]]]:
    """group -> instruction -> its strict verdict in each sample of `benchmark`."""
    groups: dict[str, dict[Key, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for row in rows:
        if row.get("benchmark") != benchmark:
            continue
        for index, instruction in enumerate((row.get("details") or {}).get("instructions") or []):
            group = str(instruction.get("id", "")).split(":")[0]
            groups[group][(str(row.get("id")), index)].append(bool(instruction.get("strict")))
    return groups


def asked_minimum(instruction_id: str, kwargs: dict[str, Any]) -> tuple[str, int] | None:
    """(what is counted, the least asked for) for IFEval's length constraints that set a minimum: words and
    sentences `at least` N, N paragraphs (an exact count: fewer is short of it); None for a maximum or another
    instruction."""
    try:
        if instruction_id == "length_constraints:number_words" and kwargs.get("relation") == "at least":
            return "words", int(kwargs["num_words"])
        if instruction_id == "length_constraints:number_sentences" and kwargs.get("relation") == "at least":
            return "sentences", int(kwargs["num_sentences"])
        if instruction_id == "length_constraints:number_paragraphs":
            return "paragraphs", int(kwargs["num_paragraphs"])
        if instruction_id == "length_constraints:nth_paragraph_first_word":
            return "blank_line_paragraphs", int(kwargs["num_paragraphs"])
    except (KeyError, TypeError, ValueError):
        return None  # a label the verifier itself rejects: its verdict already says so
    return None


def measured(text: str, unit: str) -> int:
    """The answer's count of `unit`, as IFEval's checker counts it."""
    if unit == "words":
        return measure.count_words(text)
    if unit == "sentences":
        return measure.count_sentences(text) if text.strip() else 0
    if unit == "paragraphs":
        return sum(1 for part in PARAGRAPH_DIVIDER.split(text) if part.strip())
    return sum(1 for paragraph in text.split("\n\n") if paragraph.strip())  # nth_paragraph_first_word's rule


def short_of_minimum(rows: list[dict[str, Any]], benchmark: str) -> dict[Key, list[bool]]:
    """Each length constraint that asks for a minimum -> whether each sample's answer falls short of it."""
    short: dict[Key, list[bool]] = defaultdict(list)
    for row in rows:
        if row.get("benchmark") != benchmark:
            continue
        try:
            ids, kwargs = parse_instructions(parse_label(row))
        except RecordError:
            continue  # an unscorable label: the verifier's verdict (an error) already counts it as failed
        text = answer_text(str(row.get("response") or ""))
        for index, (instruction_id, entry) in enumerate(zip(ids, kwargs, strict=True)):
            minimum = asked_minimum(instruction_id, entry)
            if minimum is not None:
                unit, least = minimum
                short[(str(row.get("id")), index)].append(measured(text, unit) < least)
    return short


def share(values: dict[Key, list[bool]]) -> float:
    """Percent of all verdicts that are True (every sample of every instruction counts once)."""
    flat = [value for samples in values.values() for value in samples]
    return 100.0 * sum(flat) / len(flat) if flat else float("nan")


def count_true(values: dict[Key, list[bool]]) -> int:
    return sum(sum(samples) for samples in values.values())


def paired_change(
    before: dict[Key, list[bool]], after: dict[Key, list[bool]]
) -> tuple[float, float, float, int] | None:
    """(change, low, high, n) in points of the share True, over the instructions both stages answered (each
    instruction's value: the share of its samples), with a paired 95% bootstrap interval; None when none
    are shared."""
    shared = sorted(key for key in after if key in before)
    if not shared:
        return None
    mean = lambda samples: sum(samples) / len(samples)  # noqa: E731
    change, low, high = bootstrap([mean(after[k]) for k in shared], [mean(before[k]) for k in shared])
    return change, low, high, len(shared)


def stage_breakdown(stages: list[str], samples: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """benchmark -> what each stage's answers look like, against the stage before it (the previous stage in
    `stages` with samples of that benchmark):
        "stages": the stages with samples of it, in order;
        "words": stage -> median answer in words;
        "groups" (IFEval, IFBench): group -> stage -> {"n" instructions, "share" followed (strict, percent),
            "change": [change, low, high] from the stage before, paired 95% bootstrap, or None};
        "short" (where prompts ask for a length minimum): stage -> {"count" answers short of it, "of" answers,
            "change" of the share short, as above}.
    """
    result: dict[str, dict[str, Any]] = {}
    names = list(dict.fromkeys(str(row.get("benchmark")) for s in stages for row in samples.get(s, [])))
    instruction_names = {name for s in stages for name in instruction_benchmarks(samples.get(s, []))}
    for name in names:
        present = [s for s in stages if any(row.get("benchmark") == name for row in samples.get(s, []))]
        entry: dict[str, Any] = {"stages": present, "words": {}}
        for stage in present:
            entry["words"][stage] = median_words([r for r in samples[stage] if r.get("benchmark") == name])[
                name
            ]
        if name in instruction_names:
            entry["groups"] = _compared(present, {s: followed_by_group(samples[s], name) for s in present})
            short = {s: {"short": short_of_minimum(samples[s], name)} for s in present}
            if any(short[s]["short"] for s in present):
                entry["short"] = _compared(present, short)["short"]
        result[name] = entry
    return result


def _compared(stages: list[str], per_stage: dict[str, dict[str, dict[Key, list[bool]]]]) -> dict[str, Any]:
    """group -> stage -> {"n", "share", "count", "of", "change"}: each stage against the one before it."""
    table: dict[str, dict[str, Any]] = {}
    groups = list(dict.fromkeys(group for stage in stages for group in per_stage[stage]))
    for group in groups:
        table[group] = {}
        previous = None
        for stage in stages:
            values = per_stage[stage].get(group)
            if not values:
                continue
            change = paired_change(per_stage[previous][group], values) if previous else None
            table[group][stage] = {
                "n": len(values),
                "share": share(values),
                "count": count_true(values),
                "of": sum(len(samples) for samples in values.values()),
                "change": list(change[:3]) if change else None,
            }
            previous = stage
    return table


def _change_text(cell: dict[str, Any]) -> str:
    change = cell.get("change")
    return f" ({change[0]:+.1f} [{change[1]:+.1f}, {change[2]:+.1f}])" if change else ""


def render_group_tables(breakdown: dict[str, dict[str, Any]]) -> list[str]:
    """Markdown: for each instruction benchmark, the share of each group's instructions followed (strict)
    after each stage, the change from the stage before with its paired 95% interval, the median answer and
    how many answers fall short of a length minimum their prompt asked for."""
    lines: list[str] = []
    for name, entry in breakdown.items():
        if "groups" not in entry:
            continue
        stages = entry["stages"]
        lines += [f"### {name}", "", "| instruction group | instructions | " + " | ".join(stages) + " |",
                  "|---|---|" + "---|" * len(stages)]  # fmt: skip
        for group, cells in sorted(
            entry["groups"].items(), key=lambda item: -max(c["n"] for c in item[1].values())
        ):
            n = max(cell["n"] for cell in cells.values())
            row = [f"{cells[s]['share']:.1f}{_change_text(cells[s])}" if s in cells else "–" for s in stages]
            lines.append(f"| {group} | {n} | " + " | ".join(row) + " |")
        lines.append(
            "| median answer (words) | | " + " | ".join(f"{entry['words'][s]:.0f}" for s in stages) + " |"
        )
        if "short" in entry:
            cells = entry["short"]
            row = [f"{cells[s]['count']} of {cells[s]['of']}{_change_text(cells[s])}" if s in cells else "–"
                   for s in stages]  # fmt: skip
            lines.append("| answers short of an asked length minimum | | " + " | ".join(row) + " |")
        lines.append("")
    return lines
