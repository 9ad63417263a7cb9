"""Held-out evaluation of a training stage: which file it reads, and the greedy path a policy is scored on.

The file: an evaluation key (`eval_prompts`, `eval_data`) names a .jsonl/.json/.parquet file, or a
prepare-data folder, which gives its `heldout.jsonl` (the split `--holdout N` writes), else its `data.jsonl`
(a folder prepared for evaluation only). Never the very file the stage trains on.

The path (SFT before and after, GRPO/RLHF before and after): every prompt rendered in the stage's mode,
answered greedily by the stage's generator, scored by a reward hook (the verifier for RLVR and SFT's math
prompts, the reward model for RLHF) -> accuracy (pass rate), mean reward, n. The reward model's own
held-out metric is pairwise (engines/local/train/reward_model.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cascade_cli.engines.local.train.rl_data import prompt_mode, render_row
from cascade_cli.engines.local.train.rl_rewards import RewardHook
from cascade_cli.errors import CascadeUsageError
from cascade_cli.records import DATA_FILE, HELDOUT_FILE, resolve_rows_path, rollout_record

FOLDER_FILES = (HELDOUT_FILE, DATA_FILE, "data.parquet")  # what a prepare-data folder gives, first found


def heldout_file(path: str | Path, key: str, *train_files: str | Path) -> Path:
    """The file an evaluation key reads (see the module doc); `train_files`: the files the stage trains on."""
    file = resolve_rows_path(path, FOLDER_FILES)
    if any(file.resolve() == Path(train_file).resolve() for train_file in train_files):
        raise CascadeUsageError(
            f"{key}: {file} is the file this stage trains on; expected held-out rows (a prepare-data folder made "
            "with --holdout N has them in heldout.jsonl)"
        )
    return file


def evaluate(
    generator: Any,
    tokenizer: Any,
    rows: list[dict[str, Any]],
    *,
    mode: str,
    domain: str | None,
    reward: RewardHook,
    max_new_tokens: int,
) -> dict[str, Any]:
    """{"accuracy", "reward", "n", "rows"}: the greedy answer to each row, scored by `reward` (`mode`: the stage's prompt
    mode, rl_data.prompt_mode); with `domain` None (rows of several domains, distill) each row's own domain,
    and each domain's accuracy as `accuracy_DOMAIN`."""
    modes = [prompt_mode(mode, row, index) for index, row in enumerate(rows)]
    prompts = [render_row(row, row_mode, tokenizer) for row, row_mode in zip(rows, modes, strict=True)]
    outputs = generator.generate(prompts, n=1, max_new_tokens=max_new_tokens, temperature=0.0)
    records = [
        rollout_record(
            row, group[0].text, domain=domain or row["domain"], mode=row_mode, finish_reason=group[0].finish_reason,
            record_id=row.get("id", index),
        )
        for index, (row, row_mode, group) in enumerate(zip(rows, modes, outputs, strict=True))
    ]
    scores = reward.finalize(records, reward.score(records))
    result = {
        "accuracy": sum(s.passed for s in scores) / len(scores),
        "reward": sum(s.reward for s in scores) / len(scores),
        "n": len(scores),
    }
    result["rows"] = [  # per row, for an interval on the change (grpo.train writes them beside the checkpoint)
        {"id": r["id"], "domain": r["domain"], "reward": s.reward, "passed": s.passed}
        for r, s in zip(records, scores, strict=True)
    ]
    if domain is None:
        for row_domain in dict.fromkeys(r["domain"] for r in records):
            passed = [s.passed for r, s in zip(records, scores, strict=True) if r["domain"] == row_domain]
            result[f"accuracy_{row_domain}"] = sum(passed) / len(passed)
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
