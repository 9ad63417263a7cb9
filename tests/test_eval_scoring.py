"""avg@k / pass@k arithmetic (hand-computed cases), IFEval's four metrics, and scoring through the registry."""

from __future__ import annotations

import pytest

from cascade_cli.evaluation.scoring import (
    avg_at_k,
    ifeval_metrics,
    mean_pass_at_k,
    pass_at_k,
    score_benchmark,
)


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 2, 1, 0.4),  # pass@1 = c / n
        (5, 2, 2, 0.7),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (4, 0, 2, 0.0),
        (3, 2, 2, 1.0),  # fewer wrong samples than k: some draw always holds a right one
        (8, 1, 4, 0.5),  # 1 - C(7,4)/C(8,4) = 1 - 35/70
        (10, 3, 5, 1 - 21 / 252),
    ],
)
def test_pass_at_k_hand_computed(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected)


def test_pass_at_k_rejects_impossible_counts() -> None:
    with pytest.raises(ValueError, match="k <= n"):
        pass_at_k(2, 1, 3)
    with pytest.raises(ValueError):
        pass_at_k(2, 3, 1)


def test_avg_at_k_weighs_each_problem_equally() -> None:
    # problem 1: 1 of 4 right, problem 2: 4 of 4 right -> (0.25 + 1) / 2
    assert avg_at_k([[True, False, False, False], [True] * 4]) == pytest.approx(0.625)
    # unequal sample counts: 1/2 and 0/1
    assert avg_at_k([[True, False], [False]]) == pytest.approx(0.25)
    assert mean_pass_at_k([[True, False, False, False], [False] * 4], 2) == pytest.approx((1 - 3 / 6) / 2)


def test_ifeval_metrics_prompt_and_instruction_levels() -> None:
    def sample(strict: list[bool], loose: list[bool]) -> dict:  # the IF verifier's details shape
        return {
            "instructions": [
                {"id": "x", "strict": s, "loose": lo} for s, lo in zip(strict, loose, strict=True)
            ]
        }

    details = [
        [sample([True, True], [True, True]), sample([True, False], [True, True])],  # problem 1, two samples
        [sample([False], [True]), sample([False], [False])],  # problem 2, two samples
    ]
    metrics = ifeval_metrics(details)
    assert metrics["prompt_strict"] == pytest.approx(100 * (0.5 + 0.0) / 2)
    assert metrics["inst_strict"] == pytest.approx(100 * 3 / 6)
    assert metrics["prompt_loose"] == pytest.approx(100 * (1.0 + 0.5) / 2)
    assert metrics["inst_loose"] == pytest.approx(100 * 5 / 6)


def _mcq_record(problem: str, response: str, answer: str = "B") -> dict:
    return {
        "id": problem,
        "prompt": "q",
        "response": response,
        "label": {"answer": answer, "num_choices": 4},
        "domain": "mcq",
        "mode": "think",
        "finish_reason": "stop",
    }


def test_score_benchmark_through_the_verifier_registry() -> None:
    records = [
        _mcq_record("p1", "Answer: B"),
        _mcq_record("p1", "Answer: C"),
        _mcq_record("p2", "Answer: A"),
        {**_mcq_record("p2", "Answer: A"), "finish_reason": "length"},
    ]
    summary, verdicts = score_benchmark(records, name="toy", domain="mcq", k=2)
    assert summary["problems"] == 2 and summary["samples"] == 4 and summary["k"] == 2
    assert summary["metrics"]["avg@2"] == pytest.approx(25.0)
    assert summary["metrics"]["pass@2"] == pytest.approx(50.0)
    assert summary["score"] == summary["metrics"]["avg@2"] and summary["primary"] == "avg@2"
    assert summary["truncated"] == 1 and summary["errors"] == 0
    assert [v["passed"] for v in verdicts] == [True, False, False, False]
    assert verdicts[0]["details"]["extracted"] == "B"


def test_score_benchmark_counts_record_errors() -> None:
    bad = {**_mcq_record("p1", "Answer: B"), "label": {"answer": 7}}
    summary, verdicts = score_benchmark([bad], name="toy", domain="mcq")
    assert summary["errors"] == 1 and "label" in summary["first_error"]
    assert verdicts[0]["reward"] == 0.0
