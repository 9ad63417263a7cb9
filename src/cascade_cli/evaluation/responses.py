"""Read a responses file (another system's outputs, or reference answers) and match it to benchmark rows.

Format: JSON Lines, one row per response (a problem may have several rows: k samples) or per problem:
    {"id": "2024-I-1", "response": "... \\boxed{204}"}                 matched by the benchmark row's id
    {"prompt": "Write a 300+ word ...", "response": "..."}             matched by the raw problem text
    {"id": "...", "responses": ["sample 1", "sample 2", ...]}           k samples in one row
Optional keys: `benchmark` (which benchmark the row belongs to, when several are scored at once),
`finish_reason` ("stop" | "length"). With `--domain D` and no benchmark, rows must carry their own `label`
(rollout records, as `cascade verify` reads them) and are grouped by `id` (or `prompt`) for avg@k.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cascade_cli.errors import CascadeUsageError
from cascade_cli.jsonl import iter_jsonl
from cascade_cli.records import rollout_record


def _prompt_key(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt.strip()
    if isinstance(prompt, list):  # messages: the last user turn identifies the problem
        users = [m.get("content", "") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
        return users[-1].strip() if users else json.dumps(prompt, sort_keys=True)
    return json.dumps(prompt, sort_keys=True)


def read_responses(path: str | Path) -> list[tuple[int, dict[str, Any], list[str]]]:
    """(line, row, responses) for each row; errors name the file and row."""
    path = Path(path)
    if not path.exists():
        raise CascadeUsageError(f"responses file {path}: not found")
    out = []
    for line, row in iter_jsonl(path):
        if "responses" in row:
            responses = row["responses"]
            if (
                not isinstance(responses, list)
                or not all(isinstance(r, str) for r in responses)
                or not responses
            ):
                raise CascadeUsageError(
                    f"{path}: row {line}: 'responses' must be a non-empty list of strings"
                )
        elif "response" in row:
            if not isinstance(row["response"], str):
                raise CascadeUsageError(
                    f"{path}: row {line}: 'response' must be a string; found {type(row['response']).__name__}"
                )
            responses = [row["response"]]
        else:
            raise CascadeUsageError(
                f"{path}: row {line}: expected 'response' (or 'responses'); found keys {sorted(row)}"
            )
        if "id" not in row and "prompt" not in row:
            raise CascadeUsageError(f"{path}: row {line}: expected 'id' or 'prompt' to match it to a problem")
        out.append((line, row, responses))
    return out


def _record(
    row: dict[str, Any], response: str, finish_reason: str, sample_index: int, **fields: Any
) -> dict[str, Any]:
    """A rollout record (records.py) of one response to `row`, with its sample index among the k."""
    fields = {"domain": row.get("domain"), "mode": row.get("mode", "think"), **fields}
    record = rollout_record(row, response, finish_reason=finish_reason, **fields)
    return {**record, "sample_index": sample_index}


def match_responses(
    path: str | Path,
    benchmarks: dict[str, list[dict[str, Any]]],
) -> dict[str, list[dict[str, Any]]]:
    """Benchmark name -> rollout records built from the responses that match its rows.

    Rows match by `id`, else by prompt text (the raw problem or the templated prompt). A response that
    matches no benchmark row is an error; benchmark rows without any response are left out.
    """
    by_id: dict[str, tuple[str, dict[str, Any]]] = {}
    by_name_id: dict[tuple[str, str], tuple[str, dict[str, Any]]] = {}  # ids repeat across benchmarks ("11")
    by_prompt: dict[str, tuple[str, dict[str, Any]]] = {}
    for name, rows in benchmarks.items():
        for row in rows:
            by_id.setdefault(str(row["id"]), (name, row))
            by_name_id.setdefault((name, str(row["id"])), (name, row))
            for text in (row.get("question"), row.get("prompt")):
                if text is not None:
                    by_prompt.setdefault(_prompt_key(text), (name, row))
    records: dict[str, list[dict[str, Any]]] = {name: [] for name in benchmarks}
    counts: dict[tuple[str, str], int] = {}
    for line, response_row, responses in read_responses(path):
        wanted = response_row.get("benchmark")
        if wanted is not None and wanted not in benchmarks:
            raise CascadeUsageError(
                f"{path}: row {line}: benchmark {wanted!r} is not among {', '.join(benchmarks)}"
            )
        match = None
        if "id" in response_row:
            key = str(response_row["id"])
            match = by_id.get(key) if wanted is None else by_name_id.get((wanted, key))
        if match is None and "prompt" in response_row:
            match = by_prompt.get(_prompt_key(response_row["prompt"]))
        if match is None or (wanted is not None and match[0] != wanted):
            what = f"id {response_row['id']!r}" if "id" in response_row else "its prompt"
            raise CascadeUsageError(
                f"{path}: row {line}: {what} matches no problem of {', '.join(benchmarks)} "
                f"(expected an 'id' or 'prompt' from the benchmark)"
            )
        name, row = match
        finish_reason = response_row.get("finish_reason", "stop")
        for response in responses:
            index = counts.get((name, row["id"]), 0)
            counts[(name, row["id"])] = index + 1
            records[name].append(_record(row, response, finish_reason, index))
    return records


def self_labelled_records(path: str | Path, domain: str) -> list[dict[str, Any]]:
    """Rows that carry their own `label` (rollout records): grouped by `id`, else by prompt text."""
    records = []
    counts: dict[str, int] = {}
    for line, row, responses in read_responses(path):
        if "label" not in row:
            raise CascadeUsageError(
                f"{path}: row {line}: expected 'label' (with --domain and no --benchmarks, rows carry their own "
                f"label); found keys {sorted(row)}"
            )
        problem_id = str(row["id"]) if "id" in row else _prompt_key(row["prompt"])
        for response in responses:
            index = counts.get(problem_id, 0)
            counts[problem_id] = index + 1
            row_with_prompt = {"prompt": "", **row}  # a row matched by its id alone keeps an empty prompt
            finish_reason = row.get("finish_reason", "stop")
            records.append(
                _record(row_with_prompt, response, finish_reason, index, domain=domain, record_id=problem_id)
            )
    return records
