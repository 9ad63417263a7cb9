"""verl's RL parquet layout (its `examples/data_preprocess/*.py` write it) as math RL rows:

    {"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": "..."}], "ability": "math",
     "reward_model": {"style": "rule", "ground_truth": "72"}, "extra_info": {...}}

The prompt (messages or text) is kept; `reward_model.ground_truth` is the answer the math verifier checks.
Rows of another `ability` name it: their ground truth has no one shape, so they are mapped by hand.
"""

from __future__ import annotations

import json
from typing import Any

from cascade_cli.data.format_base import Format, FormatError


def _verl(row: dict[str, Any]) -> dict[str, Any]:
    ability = str(row.get("ability") or "math")
    if ability != "math":
        raise FormatError(
            f"format verl: ability {ability!r}: only math rows are read from this layout "
            "(map the others, e.g. --map label=reward_model.ground_truth --domain code)"
        )
    reward = row["reward_model"]
    if isinstance(reward, str):
        reward = json.loads(reward) if reward.lstrip()[:1] == "{" else {"ground_truth": reward}
    truth = reward.get("ground_truth") if isinstance(reward, dict) else None
    if truth is None:
        raise FormatError("column 'reward_model': expected {style, ground_truth}")
    extra = row.get("extra_info") if isinstance(row.get("extra_info"), dict) else {}
    row_id = row.get("id") or (
        f"{row['data_source']}-{extra['index']}" if extra.get("index") is not None else None
    )
    return {"prompt": row["prompt"], "answer": truth, "id": row_id}


VERL_FORMATS = (
    Format("verl", "math", ("prompt", "reward_model"), ("data_source", "reward_model"), _verl),
)  # fmt: skip
