"""Greedy held-out evaluation of a GRPO/RLHF run: accuracy (pass rate) and mean reward on its eval prompts,
scored by the stage's own reward hook (the same verifier path as training)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cascade_cli.engines.local.rl_data import prompt_mode, render_row
from cascade_cli.records import rollout_record

if TYPE_CHECKING:
    from cascade_cli.engines.local.grpo import Run


def evaluate(run: Run) -> dict[str, float]:
    """Greedy held-out accuracy (pass rate) and mean reward of the current policy."""
    config = run.config
    rows = run.eval_rows[: config.eval_limit] if config.eval_limit else run.eval_rows
    modes = [prompt_mode(run.mode, row, i) for i, row in enumerate(rows)]
    prompts = [render_row(row, m, run.tokenizer) for row, m in zip(rows, modes, strict=True)]
    max_new = config.eval_max_new_tokens or run.phases[-1].max_response_len
    outputs = run.generator.generate(prompts, n=1, max_new_tokens=max_new, temperature=0.0)
    records = [
        rollout_record(
            row, group[0].text, domain=run.domain, mode=mode, finish_reason=group[0].finish_reason,
            record_id=row.get("id", index),
        )
        for index, (row, mode, group) in enumerate(zip(rows, modes, outputs, strict=True))
    ]
    scores = run.reward.finalize(records, run.reward.score(records))
    return {
        "accuracy": sum(s.passed for s in scores) / len(scores),
        "reward": sum(s.reward for s in scores) / len(scores),
        "n": len(scores),
    }
