"""`cascade tts swe`: best@k for SWE repair (Nemotron-Cascade §7.4, Fig. 12), execution-free.

Per instance, of its k candidate responses:
1. Filter: drop a response with no patch, a patch that does not parse or apply to `original_files`, or one
   that changes nothing (verifiers/swe.py parses and applies it).
2. Majority vote over the normalised patches (the canonical per-file diffs of the files they really change,
   so patches that differ only in hunk headers, context width or file order are one vote).
3. Ties go to the shortest normalised patch, then to the earliest response.
The paper also runs reproduction and regression tests before the vote; without a repository to execute,
this step is left out. The selected patch is scored by the swe verifier (reward 1 = the golden patch's
result, else its lexical similarity): best@k = the share of instances whose selected patch reaches
`threshold` (default 1.0, the verifier's `passed`); pass@k = the share with any of the k reaching it;
pass@1 = the mean share of candidates reaching it. Both are reported for k = 1, 2, 4, ... up to k, on the
first k candidates of each instance.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from cascade_cli.verifiers.batch import score_records
from cascade_cli.verifiers.swe import PatchError, _file_diffs, apply_patch, extract_patch


def normalised_patch(response: str, original_files: dict[str, str]) -> str | None:
    """The canonical form of a response's patch, or None when it is missing, unparsable, not applicable
    or a no-op (the execution-free filter)."""
    patch = extract_patch(response)
    if patch is None:
        return None
    try:
        changed = apply_patch(patch, original_files)
    except PatchError:
        return None
    diffs = _file_diffs(original_files, changed)
    if not diffs:
        return None
    return "".join(f"--- {path}\n{diff}\n" for path, diff in sorted(diffs.items()))


def majority_vote(patches: list[str | None]) -> int | None:
    """Index of the selected candidate: most frequent normalised patch, ties to the shortest, then the first.
    None when every candidate was filtered out."""
    votes = Counter(p for p in patches if p is not None)
    if not votes:
        return None
    winner = min(votes, key=lambda p: (-votes[p], len(p), patches.index(p)))
    return patches.index(winner)


@dataclass(frozen=True)
class Instance:
    row: dict[str, Any]
    responses: list[str]


def _ks(k: int) -> list[int]:
    ks, value = [], 1
    while value < k:
        ks.append(value)
        value *= 2
    return [*ks, k]


def run_swe_tts(instances: list[Instance], threshold: float = 1.0, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """Score every candidate once (verifiers/batch.py), then best@k / pass@k for each k in 1, 2, 4, ..., k."""
    records = [
        {"id": inst.row.get("id"), "prompt": inst.row.get("prompt"), "response": response,
         "label": inst.row["label"], "domain": "swe", "mode": inst.row.get("mode", "think")}
        for inst in instances
        for response in inst.responses
    ]
    results = iter(score_records(records, "swe", {"swe": dict(options or {})}))
    per_instance: list[dict[str, Any]] = []
    for inst in instances:
        rewards = [next(results).reward for _ in inst.responses]
        patches = [normalised_patch(r, inst.row["label"]["original_files"]) for r in inst.responses]
        per_instance.append({"id": inst.row.get("id"), "rewards": rewards, "patches": patches})
    k_max = min((len(inst.responses) for inst in instances), default=0)
    curve = []
    for k in _ks(k_max) if k_max else []:
        best = passes = mean_rewards = solo = 0.0
        for item in per_instance:
            rewards, patches = item["rewards"][:k], item["patches"][:k]
            pick = majority_vote(patches)
            reward = rewards[pick] if pick is not None else 0.0
            best += reward >= threshold
            mean_rewards += reward
            passes += any(r >= threshold for r in rewards)
            solo += sum(r >= threshold for r in rewards) / k
        n = len(per_instance)
        curve.append({
            "k": k, "best_at_k": round(100 * best / n, 2), "pass_at_k": round(100 * passes / n, 2),
            "pass_at_1": round(100 * solo / n, 2), "selected_reward": round(mean_rewards / n, 4),
        })
    for item in per_instance:
        pick = majority_vote(item["patches"])
        item.update(
            selected=pick,
            kept=sum(p is not None for p in item["patches"]),
            distinct=len({p for p in item["patches"] if p is not None}),
            selected_reward=None if pick is None else item["rewards"][pick],
        )
        del item["patches"]
    return {"k": k_max, "threshold": threshold, "curve": curve, "instances": per_instance}
