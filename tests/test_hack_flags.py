"""`cascade report` and benchmarks/real_gains.py flag a gain that looks like a hack, and report.md carries the
per-group table of IFEval and IFBench.

Each stage's evaluation folder is what `cascade eval` writes (results.json and samples.jsonl), made here by the
real IF verifier scoring hand-written answers (`score_benchmark`, the path `cascade eval` takes)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cascade_cli.cli import app
from cascade_cli.errors import CascadeUsageError
from cascade_cli.evaluation.report import stage_eval_dir, write_report
from cascade_cli.evaluation.run import write_results
from cascade_cli.evaluation.scoring import score_benchmark

ROOT = Path(__file__).resolve().parents[1]
LOWER = {"instruction_id_list": ["change_case:english_lowercase"], "kwargs": [{}]}
LOWER_LONG = {
    "instruction_id_list": ["change_case:english_lowercase", "length_constraints:number_words"],
    "kwargs": [{}, {"relation": "at least", "num_words": 40}],
}
NO_COMMA = {"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]}
SENTENCE = "The quick brown fox jumps over the lazy dog near the river bank"  # 13 words, capitals, no comma
LONG_CAPITALISED = " ".join([SENTENCE + "."] * 5)  # 65 words
LONG_LOWER = LONG_CAPITALISED.lower()
LONG_LOWER_COMMAS = LONG_LOWER.replace(" near", ", near")
SHORT_LOWER = "the fox jumps over the dog."


def _write_stage(run_dir: Path, stage: str, answers: dict[str, list[tuple[dict, str]]]) -> None:
    """eval/<stage>/ as `cascade eval` leaves it: benchmark -> [(label, answer)], one greedy answer each."""
    results, samples = {}, []
    for name, pairs in answers.items():
        records = [
            {"id": f"{name}-{index}", "prompt": "p", "response": answer, "label": label, "domain": "if",
             "mode": "no_think", "finish_reason": "stop", "sample_index": 0}
            for index, (label, answer) in enumerate(pairs)
        ]  # fmt: skip
        summary, verdicts = score_benchmark(records, name=name, domain="if", metric="ifeval", k=1)
        results[name] = summary
        samples += [{"benchmark": name, **verdict} for verdict in verdicts]
    write_results(stage_eval_dir(run_dir, stage), {"benchmarks": results}, samples)


def _run(run_dir: Path, stages: dict[str, dict[str, list[tuple[dict, str]]]]) -> Path:
    for stage, answers in stages.items():
        _write_stage(run_dir, stage, answers)
    # as `recipe run` writes it: the recipe's stages (the base model's evaluation is not a stage)
    (run_dir / "run.json").write_text(json.dumps({"stage_order": [s for s in stages if s != "base"]}))
    return run_dir


def _base(lower: int, lower_long: int, no_comma: int = 0) -> dict[str, list[tuple[dict, str]]]:
    """Long capitalised answers: follow the word minimum and no-comma, break lowercase."""
    return {"ifeval": [(LOWER, LONG_CAPITALISED)] * lower + [(LOWER_LONG, LONG_CAPITALISED)] * lower_long
            + [(NO_COMMA, LONG_CAPITALISED)] * no_comma}  # fmt: skip


def _kinds(report: dict) -> set[tuple[str, str, str]]:
    return {(flag["benchmark"], flag["stage"], flag["kind"]) for flag in report["hack_flags"]}


def test_brevity_gain_trips_every_flag_and_the_table_shows_where_it_came_from(tmp_path: Path) -> None:
    # base: 0 of 14 prompts pass; if_rl: short lowercase answers pass the 8 lowercase-only prompts (+57 points)
    # and break the 40-word minimum of the other 6, which long answers met before
    hacked = {"ifeval": [(LOWER, SHORT_LOWER)] * 8 + [(LOWER_LONG, SHORT_LOWER)] * 6}
    report = write_report(_run(tmp_path, {"base": _base(8, 6), "if_rl": hacked}))
    assert report["table"]["ifeval"] == {"base": 0.0, "if_rl": 100 * 8 / 14}
    assert _kinds(report) == {("ifeval", "if_rl", "shorter"), ("ifeval", "if_rl", "group_fell"),
                              ("ifeval", "if_rl", "short_of_length")}  # fmt: skip
    details = {flag["kind"]: flag["detail"] for flag in report["hack_flags"]}
    assert details["shorter"] == "median answer 6 words, from 65 (less than half)"
    assert details["group_fell"].startswith("length_constraints fell -100.0 points [-100.0, -100.0] to 0.0%")
    assert details["short_of_length"].startswith("6 of 6 answers short of the length asked for, from 0")
    markdown = (tmp_path / "report.md").read_text()
    assert "## Gains that look like a hack" in markdown and "⚠ ifeval rose +57.1 after `if_rl`" in markdown
    assert "| instruction group | instructions | base | if_rl |" in markdown
    assert "| change_case | 14 | 0.0 | 100.0 (+100.0 [+100.0, +100.0]) |" in markdown
    assert "| length_constraints | 6 | 100.0 | 0.0 (-100.0 [-100.0, -100.0]) |" in markdown
    assert "| median answer (words) | | 65 | 6 |" in markdown
    assert (
        "| answers short of an asked length minimum | | 0 of 6 | 6 of 6 (+100.0 [+100.0, +100.0]) |"
        in markdown
    )


def test_an_honest_gain_is_not_flagged(tmp_path: Path) -> None:
    # long lowercase answers: every prompt passes, the word minimum still met, answers as long as before
    honest = {"ifeval": [(LOWER, LONG_LOWER)] * 8 + [(LOWER_LONG, LONG_LOWER)] * 6}
    report = write_report(_run(tmp_path, {"base": _base(8, 6), "if_rl": honest}))
    assert report["table"]["ifeval"]["if_rl"] == 100.0 and report["hack_flags"] == []
    markdown = (tmp_path / "report.md").read_text()
    assert "## Gains that look like a hack\n" in markdown and "\nNone.\n" in markdown.split("hack")[1]
    assert "| length_constraints | 6 | 100.0 | 100.0 (+0.0 [+0.0, +0.0]) |" in markdown


def test_shorter_answers_alone_trip_only_the_length_flag(tmp_path: Path) -> None:
    # no prompt asks for a length: the score rises on short lowercase answers; only the median halves
    report = write_report(
        _run(tmp_path, {"base": _base(10, 0), "if_rl": {"ifeval": [(LOWER, SHORT_LOWER)] * 10}})
    )
    assert _kinds(report) == {("ifeval", "if_rl", "shorter")}


def test_a_group_that_falls_beyond_its_interval_trips_only_the_group_flag(tmp_path: Path) -> None:
    # same length; lowercase rises on 10 prompts (+62.5 points) while no_comma falls on 6
    after = {"ifeval": [(LOWER, LONG_LOWER_COMMAS)] * 10 + [(NO_COMMA, LONG_LOWER_COMMAS)] * 6}
    report = write_report(_run(tmp_path, {"base": _base(10, 0, no_comma=6), "if_rl": after}))
    assert report["table"]["ifeval"]["if_rl"] > report["table"]["ifeval"]["base"]
    assert _kinds(report) == {("ifeval", "if_rl", "group_fell")}
    assert report["hack_flags"][0]["detail"].startswith("punctuation fell -100.0 points")
    # a fall inside its interval is noise, not a flag: one of 6 no-comma prompts lost
    after = {
        "ifeval": [(LOWER, LONG_LOWER)] * 10 + [(NO_COMMA, LONG_LOWER)] * 5 + [(NO_COMMA, LONG_LOWER_COMMAS)]
    }
    report = write_report(_run(tmp_path / "noise", {"base": _base(10, 0, no_comma=6), "if_rl": after}))
    assert (
        report["table"]["ifeval"]["if_rl"] > report["table"]["ifeval"]["base"] and report["hack_flags"] == []
    )


def test_no_flag_without_a_gain_and_none_without_samples(tmp_path: Path) -> None:
    # the hacked answers first, the long ones after: answers grew and the score fell, nothing to flag
    hacked = {"ifeval": [(LOWER, SHORT_LOWER)] * 8 + [(LOWER_LONG, SHORT_LOWER)] * 6}
    report = write_report(_run(tmp_path / "a", {"if_rl": hacked, "later": _base(8, 6)}))
    assert report["hack_flags"] == []
    # results.json alone (no samples.jsonl): the score table as before, no flag section
    for samples in (tmp_path / "a" / "eval").glob("*/samples.jsonl"):
        samples.unlink()
    report = write_report(tmp_path / "a")
    assert report["groups"] == {} and "look like a hack" not in (tmp_path / "a" / "report.md").read_text()


def test_ifbench_categories_get_their_own_table(tmp_path: Path) -> None:
    title = {"instruction_id_list": ["format:title_case"], "kwargs": [{}]}
    stages = {
        "base": {"ifeval": [(LOWER, LONG_CAPITALISED)] * 2, "ifbench": [(title, SHORT_LOWER)] * 3},
        "if_rl": {"ifeval": [(LOWER, LONG_LOWER)] * 2, "ifbench": [(title, "The Fox.")] * 3},
    }
    report = write_report(_run(tmp_path, stages))
    markdown = (tmp_path / "report.md").read_text()
    assert "### ifeval" in markdown and "### ifbench" in markdown
    assert "| format | 3 | 0.0 | 100.0 (+100.0 [+100.0, +100.0]) |" in markdown
    assert ("ifbench", "if_rl", "shorter") in _kinds(report)  # 6 -> 2 words while the score rose


def test_report_command_warns_on_a_hack_and_real_gains_flags_it_too(tmp_path: Path) -> None:
    hacked = {"ifeval": [(LOWER, SHORT_LOWER)] * 8 + [(LOWER_LONG, SHORT_LOWER)] * 6}
    run_dir = _run(tmp_path / "seed0", {"base": _base(8, 6), "if_rl": hacked})
    result = CliRunner().invoke(app, ["report", str(run_dir)])
    assert result.exit_code == 0, result.output
    assert "looks like a hack: ifeval rose +57.1 after `if_rl`" in " ".join(result.output.split())
    result = CliRunner().invoke(app, ["report", str(run_dir), "--fail-on-hack"])
    assert result.exit_code == 1
    spec = importlib.util.spec_from_file_location("real_gains", ROOT / "benchmarks" / "real_gains.py")
    real_gains = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(real_gains)
    table = real_gains.seed_table(run_dir)
    assert {flag["kind"] for flag in table["hack_flags"]} == {"shorter", "group_fell", "short_of_length"}
    text = real_gains.render({0: table})
    assert "gain that looks like a hack: ifeval rose +57.1 after `if_rl`" in text
    assert "| length_constraints | 6 | 100.0 | 0.0 (-100.0 [-100.0, -100.0]) |" in text
    json.dumps(table)  # gains.json


def test_short_of_minimum_reads_each_length_constraint_as_ifeval_counts_it() -> None:
    from cascade_cli.evaluation.instruction_groups import asked_minimum, short_of_minimum

    label = {
        "instruction_id_list": [
            "length_constraints:number_sentences", "length_constraints:number_words",
            "length_constraints:number_paragraphs", "length_constraints:nth_paragraph_first_word",
            "punctuation:no_comma",
        ],
        "kwargs": [{"relation": "at least", "num_sentences": 3}, {"relation": "less than", "num_words": 5},
                   {"num_paragraphs": 2}, {"num_paragraphs": 3, "nth_paragraph": 1, "first_word": "one"}, {}],
    }  # fmt: skip
    rows = [
        {"benchmark": "ifeval", "id": "a", "label": label, "response": "One. Two.\n***\nThree. Four."},
        {
            "benchmark": "ifeval",
            "id": "b",
            "label": label,
            "response": "<think>x</think>One.\n\nTwo.\n\nThree.",
        },
    ]
    short = short_of_minimum(rows, "ifeval")
    # a maximum (less than 5 words) and other instructions are not minimums: only places 0, 2 and 3 count
    assert set(short) == {("a", 0), ("a", 2), ("a", 3), ("b", 0), ("b", 2), ("b", 3)}
    assert [short[("a", i)] for i in (0, 2, 3)] == [
        [False],
        [False],
        [True],
    ]  # 4 sentences, 2 *** parts, 1 block
    assert [short[("b", i)] for i in (0, 2, 3)] == [[False], [True], [False]]  # the answer after </think>
    assert (
        asked_minimum("length_constraints:number_words", {"relation": "at least"}) is None
    )  # a broken label


def test_a_malformed_samples_line_names_the_file_and_row(tmp_path: Path) -> None:
    _run(tmp_path, {"base": _base(2, 0), "if_rl": {"ifeval": [(LOWER, SHORT_LOWER)] * 2}})
    samples = stage_eval_dir(tmp_path, "if_rl") / "samples.jsonl"
    samples.write_text(samples.read_text() + "{broken\n")
    with pytest.raises(CascadeUsageError, match=r"if_rl/samples.jsonl: row 3: malformed JSON"):
        write_report(tmp_path)
