"""The math verifier's reading rule (issue 34): answers any reader reads, the documented classes, answer regions,
GSM8K's extractions; the reading-fidelity set against math-verify's labels; GSM8K's flexible reading against
lm-eval's own filter."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from cascade_cli.verifiers.math import MathVerifier

DATA = Path(__file__).parent / "data"
READING_SET = DATA / "math_reading_fidelity.jsonl"
BUILDER = DATA / "build_math_reading_fidelity.py"
BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_rows() -> list[dict]:
    return [json.loads(line) for line in READING_SET.read_text(encoding="utf-8").splitlines()]


def fidelity_benchmark():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import math_fidelity
    finally:
        sys.path.remove(str(BENCHMARKS))
    return math_fidelity


# The two GSM8K rows where an explicit `#### N` after the working is the answer (documented class 3) and
# math-verify reads a number of the working instead.
ANSWER_LINE_ROWS = ("gsm8k_hashes/258/wrong", "gsm8k_hashes/876/right")
# Styles where cascade's answer region is not the whole response by design (verifiers/math.py's classes).
DOCUMENTED = ("joined_boxes", "near_boxes", "answer_in_thinking")


def sample_rows(per_style: int = 8) -> list[dict]:
    """Every style's first rows (a right and a wrong answer each) and the answer-line rows: a cross-section
    of the set that scores in a few seconds."""
    taken: dict[str, int] = {}
    sample = []
    for row in load_rows():
        taken[row["style"]] = taken.get(row["style"], 0) + 1
        if taken[row["style"]] <= per_style or row["id"] in ANSWER_LINE_ROWS:
            sample.append(row)
    return sample


def score(response: str, label, **options):
    return MathVerifier(code_switch_reward=None, **options).score({"response": response, "label": label})


# ---- the rule on single responses ---------------------------------------------------------------------

# Answers any reader reads, and math-verify too (issue 34's list): reward 1, and math-verify on the whole
# response agrees.
READ_AS_MATH_VERIFY_READS = [
    ("#### 18", "18"),
    ("So she makes 18 dollars every day.", "18"),
    ("Janet makes $18 per day.", "18"),
    ("So the total is **70**.", "70"),
    ("$\\frac{1}{3}$", "\\frac{1}{3}"),
    ("\\(\\frac{1}{3}\\)", "\\frac{1}{3}"),
    ("\\[\\frac{1}{3}\\]", "\\frac{1}{3}"),
    ("$$\\frac{1}{3}$$", "\\frac{1}{3}"),
    ("Answer $9$", "9"),
    ("Therefore $x \\geq 5$ is the solution.", "x \\geq 5"),
    ("The answer is 18. I hope it helps.", "18"),
    ("The total is 1000,99 dollars.", "1000.99"),
    ("The value is 1,22.", "1.22"),
    ("The total is 12,345 apples.", "12345"),
    ("It costs €12.50 in total.", "12.5"),
    ("She spends 25% of her money.", "25\\%"),
    ("\\boxed{1}, \\boxed{2}, \\boxed{3}", "\\{1,2,3\\}"),
    ("The solutions are $1$, $2$ and $3$.", "1, 2, 3"),
    ("Hence $x = \\boxed{3}$ and $y = \\boxed{4}$.", "(3, 4)"),
    ("The speed is 5 m/s.", "5"),
    ("<think>\nmaybe \\boxed{1}\n</think>\n\nSo $\\boxed{2}$.", "2"),
]


@pytest.mark.parametrize(("response", "gold"), READ_AS_MATH_VERIFY_READS)
def test_answers_any_reader_reads_are_read(response: str, gold: str) -> None:
    from cascade_cli.verifiers.math_reference import reference_verdict

    result = score(response, {"answer": gold})
    assert (result.reward, result.details["verdict"]) == (1.0, "correct"), result.details
    assert reference_verdict(gold, response)[0] is True


@pytest.mark.parametrize(
    ("response", "gold", "reward", "math_verify_reward"),
    [
        # comma and space inside math: a list, never 32349 (issue 21's adversarial negatives)
        ("The answer is $\\boxed{32, 349}$.", "32349", 0.0, 0.0),
        ("The answer is $\\boxed{1, 234}$.", "1234", 0.0, 0.0),
        ("The answer is $\\boxed{32,349}$.", "32349", 1.0, 1.0),
        # class 2: boxes are never one number (math-verify joins them into `32,349`)
        ("So \\boxed{32} and \\boxed{349}.", "32349", 0.0, 1.0),
        ("x = \\boxed{12}, y = \\boxed{345}", "12345", 0.0, 1.0),
        ("\\boxed{7} is too big; the answer is \\boxed{6}.", "6", 1.0, 0.0),
        ("The pairs are $\\boxed{(2, 2)}$ and $\\boxed{(6, 2)}$.", "(2, 2), (6, 2)", 1.0, 1.0),
        # class 1: thinking is not answering
        ("<think>\nIt is \\boxed{5}.\n</think>\n\nI could not finish.", "5", 0.0, 1.0),
        ("<think>\nIt is \\boxed{5}.\n</think>\n\nThe answer is \\boxed{6}.", "5", 0.0, 0.0),
        # class 3: an explicit final-answer line after the last box
        ("So \\boxed{x=2} in the first case.\n\n**Final Answer:** 5", "5", 1.0, 0.0),
        ("We add the fee to the answer from the previous step: $4 + 2 = 6$.\n#### 15", "6", 0.0, 1.0),
        ("Amy answered 3 correctly, and 3 * 5 = 15 points.\n#### 41", "41", 1.0, 0.0),
        # class 4: rewrites of readings math-verify misses
        ("So the result is \\fbox{9}.", "9", 1.0, 0.0),
        ("The final answer is $\\boxed{90°}$.", "90^\\circ", 1.0, 0.0),
        ("The final answer is $\\boxed{9 i + 6}$.", "6+9i", 1.0, 0.0),
        # an empty box answers nothing (SmolLM2 writes "the answer is within \\boxed{}")
        ("It is $ab+5b$.\nThe answer is within \\boxed{}. I cannot fill \\boxed{}.", "b(a+5)", 1.0, 1.0),
        # the last number is what math-verify reads of a bare answer
        ("We set $n = 5$ and count the cases that remain.\n\n12", "5", 0.0, 0.0),
        ("We have $x = 5$ and $y = 7$, so there are 12 of them.", "12", 1.0, 1.0),
    ],
)
def test_documented_classes_and_adversarial_negatives(
    response: str, gold: str, reward: float, math_verify_reward: float
) -> None:
    from cascade_cli.verifiers.math_reference import reference_verdict

    assert score(response, {"answer": gold}).reward == reward
    assert float(reference_verdict(gold, response)[0]) == math_verify_reward


@pytest.mark.parametrize(
    ("response", "gold", "extraction", "text", "how"),
    [
        ("<think>\n\\boxed{5} is my guess and I keep thinking", "5", "boxed_first", None, "unfinished"),
        ("Work.\n**Final Answer:** $\\frac{3}{4}$\nCheck: 3/4 = 0.75", "\\frac34", "boxed_first",
         "**Final Answer:** $\\frac{3}{4}$", "answer_line"),
        ("\\boxed{7} no; \\boxed{6}.", "6", "boxed_first", "\\boxed{6}.", "last_box"),
        ("\\boxed{7} and \\boxed{6}.", "6, 7", "boxed_first", "\\boxed{7} and \\boxed{6}.", "response"),
        # empty boxes are no answer (SmolLM2: "the answer is within \boxed{}"): the response is read
        ("It is $ab+5b$.\nThe answer is within \\boxed{}. I cannot fill \\boxed{}.", "b(a+5)", "boxed_first",
         "It is $ab+5b$.\nThe answer is within \\boxed{}. I cannot fill \\boxed{}.", "response"),
        ("So she makes $18.\n\nQuestion 2: 7 eggs.", "18", "flexible", "7", "flexible"),
        ("So she makes $\\boxed{18}$.\n\nMore to come...", "18", "flexible", "18", "flexible"),  # not `$.`, `...`
        ("That is $1,234.", "1234", "flexible", "1,234", "flexible"),
        ("Nothing here", "1", "flexible", None, "none"),
        ("Step 1: 3 + 4 = 7\n#### 7\nAnd 9 more.", "7", "strict", "7", "strict"),
        ("The answer is 7.", "7", "strict", None, "none"),
    ],
)
def test_answer_region(response: str, gold: str, extraction: str, text: str | None, how: str) -> None:
    from cascade_cli.verifiers.math_extraction import answer_region

    region = answer_region(response, gold, extraction)
    assert (region.text, region.how) == (text, how)


def test_gsm8k_extractions_read_as_lm_eval_does() -> None:
    """flexible: the last number (a box earlier does not count); strict: the first `#### N` only."""
    response = "So she makes \\boxed{18} dollars.\n\nIn a week that is 18 * 7 = 126."
    assert score(response, {"answer": "18"}).reward == 1.0  # boxed_first
    assert score(response, {"answer": "126"}, extraction="flexible").reward == 1.0
    assert score(response, {"answer": "18"}, extraction="flexible").reward == 0.0
    assert score("#### 1,234\\nor 5", {"answer": "1234"}, extraction="strict").reward == 1.0
    assert score("#### 1,22", {"answer": "1.22"}, extraction="strict").reward == 1.0  # math-verify's decimal comma
    assert score("The answer is 18.", {"answer": "18"}, extraction="strict").details["verdict"] == "no_answer"
    with pytest.raises(ValueError, match="extraction must be one of"):
        MathVerifier(extraction="loose")


# ---- the reading-fidelity set -------------------------------------------------------------------------


def test_the_set_is_large_varied_and_holds_real_responses() -> None:
    rows = load_rows()
    styles = {row["style"] for row in rows}
    assert len(rows) >= 3000 and len(styles - {"real_gsm8k", "real_math500"}) >= 15
    real = [row for row in rows if row["style"].startswith("real_")]
    assert len(real) >= 500 and {row["style"] for row in real} == {"real_gsm8k", "real_math500"}
    assert all(row["expected"] is None for row in real) and all(row["expected"] is not None for row in rows if row not in real)
    assert sum(row["style"] == "issue21_negative" for row in rows) >= 1000


def test_sample_reads_what_math_verify_reads_outside_the_documented_classes() -> None:
    """On a cross-section of every style: cascade's verdict is math-verify's label, except in the documented
    classes, where it is the construction's truth; a fast-path verdict on a region that is the whole response
    is math-verify's label."""
    from cascade_cli.verifiers import verify_batch
    from cascade_cli.verifiers.math_extraction import answer_region, rewrite

    rows = sample_rows()
    records = [{"response": row["response"], "label": {"answer": row["answer"]}} for row in rows]
    scores = verify_batch(records, domain="math", workers=1, options={"math": {"code_switch_reward": None}})
    fast_checked = 0
    for row, score in zip(rows, scores, strict=True):
        if row["style"] in DOCUMENTED or row["id"] in ANSWER_LINE_ROWS:
            assert score.passed == row["expected"] != row["math_verify"], (row["id"], score.details)
        else:
            assert score.passed == row["math_verify"], (row["id"], score.details)
        region = answer_region(row["response"], rewrite(row["answer"])).text
        if score.details["path"] == "fast" and region == row["response"].strip():
            fast_checked += 1
            assert score.passed == row["math_verify"], (row["id"], score.details)
    assert len({row["style"] for row in rows}) >= 20 and fast_checked >= 80


@pytest.mark.slow  # scores the whole set (~6,000 responses, about half a minute on two cores)
def test_goals_agreement_precision_recall() -> None:
    """Agreement with math-verify's verdict >= 99%; no adversarial negative accepted; precision and recall
    (against the construction's truth) at least math-verify's; every disagreement in a documented class or
    one of the answer-line rows."""
    fidelity = fidelity_benchmark().reading_fidelity(load_rows())
    overall = fidelity["all"]
    assert overall["agreement"] >= 0.99, overall
    assert fidelity["adversarial_false_positives"] == 0 and fidelity["adversarial_rows"] >= 1300
    assert overall["recall"] >= overall["mv_recall"] and overall["precision"] >= overall["mv_precision"]
    for row_id, *_ in fidelity["disagreements"]:
        assert row_id.split("/")[0] in DOCUMENTED or row_id in ANSWER_LINE_ROWS, row_id


@pytest.mark.slow  # scores ~4,700 responses
def test_fast_path_verdicts_are_math_verifys_labels() -> None:
    """Where cascade's region is the whole response, every verdict the fast path gives equals math-verify's
    label on that response (the labels were computed by math-verify alone, in the builder)."""
    from cascade_cli.verifiers import verify_batch
    from cascade_cli.verifiers.math_extraction import answer_region, rewrite

    rows = [row for row in load_rows() if not row["style"].startswith("issue21")]
    records = [{"response": row["response"], "label": {"answer": row["answer"]}} for row in rows]
    scores = verify_batch(records, domain="math", workers=2, options={"math": {"code_switch_reward": None}})
    checked = 0
    for row, score in zip(rows, scores, strict=True):
        region = answer_region(row["response"], rewrite(row["answer"])).text
        if score.details["path"] == "fast" and region == row["response"].strip() and rewrite(row["answer"]) == row["answer"]:
            checked += 1
            assert score.passed == row["math_verify"], (row["id"], score.details)
    assert checked >= 1500


def test_gsm8k_flexible_reads_the_number_lm_eval_reads() -> None:
    """On SmolLM2's real GSM8K responses our `flexible` token is lm-eval's flexible-extract token (its own
    RegexFilter, the gsm8k.yaml pattern), cleaned as its metric cleans it, whenever that token has a digit."""
    pytest.importorskip("lm_eval")
    import yaml
    from lm_eval.filters.extraction import RegexFilter

    from cascade_cli.verifiers.math_extraction import answer_region

    task = yaml.safe_load((Path(importlib.util.find_spec("lm_eval").origin).parent / "tasks" / "gsm8k" / "gsm8k.yaml").read_text())
    flexible = next(entry for entry in task["filter_list"] if entry["name"] == "flexible-extract")["filter"][0]
    regex = RegexFilter(regex_pattern=flexible["regex_pattern"], group_select=flexible["group_select"])
    rows = [row for row in load_rows() if row["style"] == "real_gsm8k"]
    tokens = regex.apply([[row["response"]] for row in rows], rows)
    compared = 0
    for row, (token,) in zip(rows, tokens, strict=True):
        if any(char.isdigit() for char in token) and "</think>" not in row["response"]:
            compared += 1
            cleaned = token.replace("$", "").removesuffix(".")
            assert answer_region(row["response"], row["answer"], "flexible").text == cleaned, (row["id"], token)
    assert compared >= 250


@pytest.mark.slow  # labels ~5,000 responses with math-verify (~1-2 min)
def test_reading_set_is_what_its_builder_makes() -> None:
    spec = importlib.util.spec_from_file_location("build_math_reading_fidelity", BUILDER)
    assert spec and spec.loader
    builder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builder)
    assert builder.build() == load_rows()
