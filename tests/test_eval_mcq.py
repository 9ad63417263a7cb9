"""Answer-letter extraction and the `mcq` verifier."""

from __future__ import annotations

import pytest

from cascade_cli.verifiers import get_verifier, verify_batch
from cascade_cli.verifiers.mcq import extract_letter


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Answer: C", "C"),
        ("The answer is (B).", "B"),
        ("the correct answer is **D**", "D"),
        ("I think A could be right... Answer: B", "B"),
        ("First I thought Answer: A, but on reflection the answer is C", "C"),
        ("\\boxed{D}", "D"),
        ("$\\boxed{\\text{A}}$", "A"),
        ("B", "B"),
        ("(C)", "C"),
        ("D.", "D"),
        ("Options (A) and (C) look close; I pick (C)", "C"),
        ("The answer is a matter of taste", None),
        ("no letter here", None),
        ("Answer: Z", None),  # outside A-J for 10 choices
    ],
)
def test_extract_letter(text: str, expected: str | None) -> None:
    assert extract_letter(text, num_choices=10) == expected


def test_extract_letter_respects_the_number_of_choices() -> None:
    assert extract_letter("Answer: E", num_choices=4) is None
    assert extract_letter("Answer: E", num_choices=5) == "E"


def test_mcq_verifier_reads_the_answer_after_think() -> None:
    record = {
        "id": "1",
        "prompt": "q",
        "label": {"answer": "B", "num_choices": 4},
        "response": "<think>\nmaybe Answer: A\n</think>\n\nAnswer: B",
        "domain": "mcq",
    }
    score = get_verifier("mcq").score(record)
    assert score.passed and score.reward == 1.0 and score.details["extracted"] == "B"
    wrong = get_verifier("mcq").score({**record, "response": "<think>Answer: B</think>Answer: A"})
    assert not wrong.passed and wrong.details == {"extracted": "A", "expected": "B"}


def test_mcq_verifier_json_string_label_and_bad_labels() -> None:
    ok, bad_letter, bad_count = verify_batch(
        [
            {"response": "Answer: C", "label": '{"answer": "C"}', "domain": "mcq"},
            {"response": "Answer: C", "label": {"answer": "CC"}, "domain": "mcq"},
            {"response": "Answer: C", "label": {"answer": "C", "num_choices": 1}, "domain": "mcq"},
        ]
    )
    assert ok.passed
    assert not bad_letter.passed and "one letter" in bad_letter.details["error"]
    assert "num_choices" in bad_count.details["error"]
