"""Scores per benchmark: avg@k (pass@1 averaged over k samples, the paper's metric) and unbiased pass@k.

All numbers are percentages (0-100), as in the paper's tables. Verdicts come from the verifiers' scoring path,
`cascade_cli.verifiers.batch.score_records`.
"""

from __future__ import annotations

from collections import defaultdict
from math import comb
from typing import Any

from cascade_cli.verifiers.batch import score_records


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): 1 - C(n-c, k) / C(n, k), for n samples of which c are correct."""
    if not 0 <= c <= n or k < 1 or k > n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n; got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def avg_at_k(correct: list[list[bool]]) -> float:
    """Mean over problems of the fraction of correct samples (each problem weighs the same)."""
    if not correct:
        return 0.0
    return sum(sum(samples) / len(samples) for samples in correct if samples) / len(correct)


def mean_pass_at_k(correct: list[list[bool]], k: int) -> float:
    if not correct:
        return 0.0
    return sum(pass_at_k(len(samples), sum(samples), k) for samples in correct) / len(correct)


def _instruction_flags(details: dict[str, Any], level: str) -> list[bool] | None:
    """The IF verifier's per-instruction verdicts: `details["instructions"] = [{"id", "strict", "loose"}]`."""
    instructions = details.get("instructions")
    if not isinstance(instructions, list) or not all(
        isinstance(i, dict) and level in i for i in instructions
    ):
        return None
    return [bool(instruction[level]) for instruction in instructions]


def ifeval_metrics(details: list[list[dict[str, Any]]]) -> dict[str, float]:
    """IFEval's four metrics from the IF verifier's per-sample details, averaged over k samples.

    Prompt-level: the fraction of (problem, sample) pairs that follow every instruction, averaged per problem.
    Instruction-level: followed instructions / all instructions, over every sample.
    """
    metrics: dict[str, float] = {}
    for level in ("strict", "loose"):
        prompt_scores: list[float] = []
        followed = total = 0
        for samples in details:
            per_sample = []
            for sample in samples:
                flags = _instruction_flags(sample, level)
                flags = flags if flags is not None else [False]  # an unscorable record follows nothing
                per_sample.append(all(flags))
                followed += sum(flags)
                total += len(flags)
            prompt_scores.append(sum(per_sample) / len(per_sample) if per_sample else 0.0)
        metrics[f"prompt_{level}"] = 100.0 * sum(prompt_scores) / max(1, len(prompt_scores))
        metrics[f"inst_{level}"] = 100.0 * followed / max(1, total)
    return metrics


def group_by_problem(records: list[dict[str, Any]]) -> dict[str, list[int]]:
    """Problem id -> indices of its samples, in first-seen order."""
    groups: dict[str, list[int]] = defaultdict(list)
    for index, record in enumerate(records):
        groups[str(record["id"])].append(index)
    return dict(groups)


def score_benchmark(
    records: list[dict[str, Any]],
    *,
    name: str,
    domain: str,
    metric: str = "accuracy",
    k: int | None = None,
    workers: int = 1,
    options: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Verify rollout records (k per problem, sharing an `id`) -> (result summary, records with verdicts).
    `options`: the verifier's keyword arguments (a benchmark's `verifier_options()`)."""
    results = score_records(records, domain, {domain: options} if options else None, workers=workers)
    verdicts = [
        {**record, "reward": result.reward, "passed": result.passed, "details": result.details}
        for record, result in zip(records, results, strict=True)
    ]
    groups = group_by_problem(verdicts)
    correct = [[bool(verdicts[i]["passed"]) for i in indices] for indices in groups.values()]
    n_min = min((len(samples) for samples in correct), default=0)
    k = min(k or n_min, n_min) if n_min else 0
    metrics: dict[str, float] = {}
    if k:
        metrics[f"avg@{k}"] = 100.0 * avg_at_k(correct)
        metrics[f"pass@{k}"] = 100.0 * mean_pass_at_k(correct, k)
    primary = f"avg@{k}"
    if metric == "ifeval":
        metrics.update(
            ifeval_metrics([[verdicts[i]["details"] for i in indices] for indices in groups.values()])
        )
        primary = "prompt_strict"
    errors = [
        v["details"]["error"]
        for v in verdicts
        if isinstance(v.get("details"), dict) and "error" in v["details"]
    ]
    truncated = sum(1 for v in verdicts if v.get("finish_reason") == "length")
    summary = {
        "benchmark": name,
        "domain": domain,
        "metric": metric,
        "problems": len(groups),
        "samples": len(verdicts),
        "k": k,
        "primary": primary,
        "score": metrics.get(primary, 0.0),
        "metrics": metrics,
        "truncated": truncated,
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
        **({"verifier_options": options} if options else {}),
    }
    return summary, verdicts
