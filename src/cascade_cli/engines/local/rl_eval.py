"""Greedy held-out evaluation of a GRPO/RLHF run: accuracy (pass rate) and mean reward on its eval prompts,
scored by the stage's own reward hook (the same verifier path as training)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cascade_cli.engines.local.rl_data import prompt_mode, render_row
from cascade_cli.records import rollout_record

if TYPE_CHECKING:
    from cascade_cli.engines.local.grpo import Run


def evaluate(run: Run) -> dict[str, float]:
    """Greedy held-out accuracy (pass rate) and mean reward of the current policy; with rows of several
    domains (distill) also each domain's accuracy, `accuracy_DOMAIN`."""
    config = run.config
    rows = limit_rows(run.eval_rows, config.eval_limit, run.domain)
    modes = [prompt_mode(run.mode, row, i) for i, row in enumerate(rows)]
    prompts = [render_row(row, m, run.tokenizer) for row, m in zip(rows, modes, strict=True)]
    max_new = config.eval_max_new_tokens or run.phases[-1].max_response_len
    outputs = run.generator.generate(prompts, n=1, max_new_tokens=max_new, temperature=0.0)
    records = [
        rollout_record(
            row, group[0].text, domain=run.domain or row["domain"], mode=mode, finish_reason=group[0].finish_reason,
            record_id=row.get("id", index),
        )
        for index, (row, mode, group) in enumerate(zip(rows, modes, outputs, strict=True))
    ]
    scores = run.reward.finalize(records, run.reward.score(records))
    result = {
        "accuracy": sum(s.passed for s in scores) / len(scores),
        "reward": sum(s.reward for s in scores) / len(scores),
        "n": len(scores),
    }
    if run.domain is None:
        for domain in dict.fromkeys(r["domain"] for r in records):
            passed = [s.passed for r, s in zip(records, scores, strict=True) if r["domain"] == domain]
            result[f"accuracy_{domain}"] = sum(passed) / len(passed)
    return result


def limit_rows(rows: list[dict[str, Any]], limit: int | None, domain: str | None) -> list[dict[str, Any]]:
    """The first `limit` rows (None: all); with several domains (domain None) the first `limit` of each."""
    if not limit:
        return rows
    if domain is not None:
        return rows[:limit]
    taken: dict[str, int] = {}
    kept = []
    for row in rows:
        taken[row["domain"]] = taken.get(row["domain"], 0) + 1
        if taken[row["domain"]] <= limit:
            kept.append(row)
    return kept
