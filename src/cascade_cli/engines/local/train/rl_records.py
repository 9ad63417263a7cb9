"""Each RL step's metrics.jsonl line (GRPO, RLHF and distill alike), its logged rollouts and the held-out rows
file; the manifest and fingerprints: stage.py. Reads the step's groups and numbers, never the whole run."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import torch

from cascade_cli.config.grpo import PhaseConfig
from cascade_cli.engines.local.train.rl_rewards import Group


def step_metrics(
    phase_index: int, phase: PhaseConfig, sampled: list[Group], kept: list[Group], rounds: int,
    update: dict[str, float], timer: dict[str, float], began: float, *, epoch: int, lr: float, dynamic_filter: bool,
) -> dict[str, Any]:
    """The step's metrics.jsonl line. Rollout statistics cover every sampled group, filtered ones included;
    `epoch`: the prompt sampler's, `lr`: the step's."""
    rewards = [r for g in sampled for r in g.rewards]
    lengths = [len(c.token_ids) for g in sampled for c in g.completions]
    truncated = [c.finish_reason == "length" for g in sampled for c in g.completions]
    passed = [s.passed for g in sampled for s in g.scores]
    filtering = dynamic_filter
    reward_t = torch.tensor(rewards or [0.0], dtype=torch.float64)
    wall = time.perf_counter() - began
    return {
        "phase": phase_index,
        "epoch": epoch,
        "reward_mean": float(reward_t.mean()),
        "reward_std": float(reward_t.std()) if len(rewards) > 1 else 0.0,
        "pass_rate": sum(passed) / max(len(passed), 1),
        "groups": len(kept),  # trained on
        "groups_sampled": len(sampled),
        "generation_rounds": rounds,
        "groups_filtered_frac": sum(g.uniform for g in sampled) / max(len(sampled), 1) if filtering else 0.0,
        "zero_std_groups_frac": sum(g.uniform for g in kept) / max(len(kept), 1),
        "response_len_mean": sum(lengths) / max(len(lengths), 1),
        "response_len_max": max(lengths, default=0),
        "truncation_ratio": sum(truncated) / max(len(truncated), 1),
        **update,  # verify_errors, entropy, grad_norm, loss_tokens[, kl]
        "lr": lr,
        "temperature": phase.temperature,
        "max_response_len": phase.max_response_len,
        "tokens_per_s": sum(lengths) / wall,
        "time_generate": timer["generate"],
        "time_verify": timer["verify"],
        "time_verify_wait": timer["verify_wait"],
        "time_train": timer["train"],
        "time_sync": timer["sync"],
        "time_step": wall,
    }


def sampled_rollouts(
    sampled: list[Group], step: int, *, rows: list[dict[str, Any]], tokenizer: Any, seed: int, count: int
) -> list[dict[str, Any]]:
    """`count` (log_rollouts) of the step's responses, drawn without replacement (seeded by the seed and the step, on
    a generator of their own, so the training's random streams are untouched): the prompt as the model saw
    it, the answer, its training reward, the verifier's verdict (TRL's log_completions)."""
    everything = [(g, j) for g in sampled for j in range(len(g.completions))]
    picked = random.Random(seed * 1_000_003 + step).sample(everything, min(count, len(everything)))
    return [
        {
            "id": str(rows[g.row_index].get("id", g.row_index)),
            "prompt": tokenizer.decode(g.prompt_ids, skip_special_tokens=False),
            "answer": g.completions[j].text,
            "reward": float(g.rewards[j]),
            "passed": bool(g.scores[j].passed),
            "finish_reason": g.completions[j].finish_reason,
        }
        for g, j in sorted(picked, key=lambda pick: (sampled.index(pick[0]), pick[1]))
    ]


HELDOUT_ROWS = "heldout_rows.jsonl"  # each held-out row's greedy reward before and after the stage


def write_heldout_rows(path: Path, before: list[dict[str, Any]], after: list[dict[str, Any]]) -> None:
    """One line per held-out row: its reward and verdict before and after (the same rows, in order)."""
    rows = [
        {"id": b["id"], "domain": b["domain"], "reward_before": b["reward"], "reward_after": a["reward"],
         "passed_before": b["passed"], "passed_after": a["passed"]}
        for b, a in zip(before, after, strict=True)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
