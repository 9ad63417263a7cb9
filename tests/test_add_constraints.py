"""`prepare-data --add-constraints ifeval|ifbench`: every label passes the IF verifier's check_label, no two
conflicting constraints share a prompt, kwargs and phrasings vary, the prompt reads the constraints in words,
and the base prompts are decontaminated against IFEval (or IFBench) by default."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path

import pytest

from cascade_cli.data.constraints import (
    BY_SET,
    attach_constraints,
    conflict_table,
    parse_count_range,
    parse_sets,
)
from cascade_cli.records import load_rows
from cascade_cli.verifiers.instruction import REGISTRY, InstructionVerifier

REAL = Path(__file__).parent / "data" / "real"
PROMPTS = [f"Tell me about topic number {i}: why do volcanoes erupt and how can people prepare?" for i in range(300)]


def _rows(prompts: list[str]) -> list[dict]:
    return [{"id": str(i), "domain": "general", "prompt": p, "mode": "no_think", "source": "t"} for i, p in enumerate(prompts)]


@pytest.mark.parametrize("sets", ["ifeval", "ifbench", "ifeval,ifbench"])
def test_labels_valid_varied_and_never_conflicting(sets: str):
    rows = attach_constraints(_rows(PROMPTS), sets, "1-3", seed=0)
    constraints = [c for name in parse_sets(sets) for c in BY_SET[name]]
    table = conflict_table(constraints)
    verifier = InstructionVerifier()
    counts, sizes = Counter(), Counter()
    for row, base in zip(rows, PROMPTS, strict=True):
        label = row["label"]
        assert verifier.check_label(label) is None
        ids = label["instruction_id_list"]
        assert row["domain"] == "if" and row["mode"] == "no_think" and row["prompt"].startswith(base + "\n\n")
        assert len(row["prompt"]) > len(base) + 20  # the constraints are written out
        for first, second in itertools.combinations(ids, 2):
            assert second not in table[first], (first, second)
        counts.update(ids)
        sizes[len(ids)] += 1
    assert set(sizes) == {1, 2, 3}
    assert len(counts) >= 0.8 * len(constraints)  # varied: most of the set is drawn in 300 prompts
    assert all(cid in REGISTRY for cid in counts)


def test_ifeval_conflicts_follow_ifeval_registry():
    table = conflict_table(BY_SET["ifeval"])
    assert "change_case:english_lowercase" in table["change_case:english_capital"]
    assert "detectable_format:title" in table["startend:quotation"]
    assert table["detectable_format:constrained_response"] >= {c.id for c in BY_SET["ifeval"]}
    assert "keywords:existence" not in table["detectable_format:json_format"]
    assert all(a in table[b] for a, others in table.items() for b in others)  # symmetric


def test_kwargs_vary_and_repeat_the_request():
    rows = attach_constraints(_rows(PROMPTS), "ifeval", "3", seed=1)
    words = {json.dumps(kw, sort_keys=True) for row in rows for cid, kw in zip(
        row["label"]["instruction_id_list"], row["label"]["kwargs"], strict=True) if cid == "length_constraints:number_words"}
    assert len(words) >= 5
    repeats = [row for row in rows if "combination:repeat_prompt" in row["label"]["instruction_id_list"]]
    assert repeats
    for row in repeats:
        index = row["label"]["instruction_id_list"].index("combination:repeat_prompt")
        assert row["label"]["kwargs"][index]["prompt_to_repeat"] == PROMPTS[int(row["id"])]
    again = attach_constraints(_rows(PROMPTS), "ifeval", "3", seed=1)
    assert again == rows  # seeded


def test_options_are_checked():
    assert parse_count_range("1-3") == (1, 3) and parse_count_range("2") == (2, 2)
    for bad in ("0", "3-1", "a", "1-9"):
        with pytest.raises(Exception, match="constraints_per_prompt"):
            parse_count_range(bad)
    with pytest.raises(Exception, match="add_constraints"):
        parse_sets("ifevil")


def test_cli_decontaminates_against_ifeval_by_default(cli, tmp_path: Path, shared_data: Path):
    ifeval = [json.loads(line) for line in (shared_data / "ifeval" / "input_data.jsonl").read_text().splitlines()]
    leaked = ifeval[0]["prompt"]
    source = tmp_path / "prompts.jsonl"
    lines = [json.dumps(text) for text in ("What is the capital of France?", leaked, "How do bees make honey?")]
    source.write_text("\n".join(lines) + "\n")
    out = tmp_path / "if"
    result = cli(["prepare-data", "--source", source, "--out", out, "--add-constraints", "ifeval",
                  "--constraints-per-prompt", "2"])  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = load_rows(out)
    assert len(rows) == 2 and not any(row["prompt"].startswith(leaked[:40]) for row in rows)
    assert all(len(row["label"]["instruction_id_list"]) <= 2 for row in rows)
    card = json.loads((out / "data_card.json").read_text())
    assert "ifeval" in json.dumps(card["filters"])
    kept = tmp_path / "kept"
    result = cli(["prepare-data", "--source", source, "--out", kept, "--add-constraints", "ifeval",
                  "constraints_decontaminate=false"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert len(load_rows(kept)) == 3


def test_cli_refuses_bad_options_and_non_prompt_rows(cli, tmp_path: Path):
    source = REAL / "prompt_strings.jsonl"
    result = cli(["prepare-data", "--source", source, "--out", tmp_path / "a", "--add-constraints", "nope"])
    assert result.exit_code == 2 and "add_constraints" in result.output
    result = cli(["prepare-data", "--source", REAL / "hh_rlhf.jsonl", "--out", tmp_path / "b",
                  "--add-constraints", "ifeval", "constraints_decontaminate=false"])  # fmt: skip
    assert result.exit_code == 2 and "expected a prompt row" in result.output


def test_cli_domain_if_with_constraints_reads_prompt_rows(cli, tmp_path: Path):
    """Naming the domain the constraints produce is not an error: the source's base prompts get their
    constraints attached before any IF-row check (issue 34: it failed with "missing key 'instruction_id_list'")."""
    source = tmp_path / "prompts.jsonl"
    prompts = ("Write a short note about rain.", "Describe a city at night.", "How do bees make honey?")
    source.write_text("".join(json.dumps({"prompt": text}) + "\n" for text in prompts))
    named, unnamed = tmp_path / "named", tmp_path / "unnamed"
    for out, extra in ((named, ["--domain", "if"]), (unnamed, [])):
        result = cli(["prepare-data", "--source", source, "--out", out, *extra, "--add-constraints", "ifeval",
                      "constraints_decontaminate=false"])  # fmt: skip
        assert result.exit_code == 0, result.output
    rows = load_rows(named)
    assert [row["domain"] for row in rows] == ["if"] * 3
    verifier = InstructionVerifier()
    assert all(verifier.check_label(row["label"]) is None and row["label"]["instruction_id_list"] for row in rows)
    assert rows == load_rows(unnamed)  # the domain named or inferred, the same rows
    result = cli(["prepare-data", "--source", source, "--out", tmp_path / "math", "--domain", "math",
                  "--add-constraints", "ifeval"])  # fmt: skip
    assert result.exit_code == 2 and "--add-constraints makes instruction-following rows" in result.output
