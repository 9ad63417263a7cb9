"""IFEval scoring of GPT-4's 541 published responses: ours vs the lm_eval reference, side by side.

Both scorers run in this process on the same rows, strict and loose verdicts for every instruction, after a
warm-up that loads each one's models (Punkt, langdetect profiles) on a text outside the data. Our caches are
cleared before each timed pass, so repeated passes never reuse a verdict. Prints rows/s of each, the ratio
(goal: ours >= 2x faster) and how many rows get identical verdicts.

    PYTHONPATH=src python benchmarks/ifeval_vs_reference.py [--repeats 3]

`run_section()` returns the same numbers as a dict for `benchmarks/verify_throughput.py`.
Data: `shared/data/ifeval` next to (or above) the repository, or $CASCADE_SHARED_DATA.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from cascade_cli.verifiers.instruction import clear_caches, evaluate

PUBLISHED_GPT4 = {
    "prompt_level_strict": 76.89,
    "inst_level_strict": 83.57,
    "prompt_level_loose": 79.30,
    "inst_level_loose": 85.37,
}


def ifeval_folder() -> Path:
    if os.environ.get("CASCADE_SHARED_DATA"):
        return Path(os.environ["CASCADE_SHARED_DATA"]) / "ifeval"
    for folder in Path(__file__).resolve().parents:
        if (folder / "shared" / "data" / "ifeval").is_dir():
            return folder / "shared" / "data" / "ifeval"
    raise SystemExit("shared/data/ifeval not found; set CASCADE_SHARED_DATA")


def load_gpt4_rows() -> list[tuple[dict[str, Any], str]]:
    folder = ifeval_folder()
    rows = [json.loads(line) for line in (folder / "input_data_066e1eda.jsonl").read_text().splitlines()]
    responses = {}
    for line in (folder / "input_response_data_gpt4_20231107_145030.jsonl").read_text().splitlines():
        record = json.loads(line)
        responses[record["prompt"]] = record["response"]
    return [(row, responses[row["prompt"]]) for row in rows]


WARM_UP_ROW = {
    "key": 0,
    "prompt": "warm up",
    "instruction_id_list": [
        "language:response_language",
        "length_constraints:number_sentences",
        "change_case:capital_word_frequency",
    ],
    "kwargs": [
        {"language": "en"},
        {"num_sentences": 1, "relation": "at least"},
        {"capital_frequency": 1, "capital_relation": "at least"},
    ],
}
WARM_UP_TEXT = "The NASA team met at noon. They talked about the launch window for an hour."


def score_ours(rows: list[tuple[dict[str, Any], str]]) -> tuple[list[tuple[list[bool], list[bool]]], float]:
    clear_caches()
    start = time.perf_counter()
    verdicts = []
    for row, response in rows:
        evaluation = evaluate(response, row["instruction_id_list"], row["kwargs"])
        verdicts.append((evaluation.strict, evaluation.loose))
    return verdicts, time.perf_counter() - start


def score_reference(
    rows: list[tuple[dict[str, Any], str]],
) -> tuple[list[tuple[list[bool], list[bool]]], float]:
    from cascade_cli.verifiers.instruction.reference import reference_verdicts

    start = time.perf_counter()
    verdicts = []
    for row, response in rows:
        result = reference_verdicts(row, response)
        verdicts.append((result["strict"], result["loose"]))
    return verdicts, time.perf_counter() - start


def run_section(repeats: int = 1) -> dict[str, Any]:
    """Best-of-`repeats` rows/s of ours and of the reference on the 541 GPT-4 rows, ratio, agreement."""
    from cascade_cli.verifiers.instruction.reference import reference_verdicts

    rows = load_gpt4_rows()
    evaluate(WARM_UP_TEXT, WARM_UP_ROW["instruction_id_list"], WARM_UP_ROW["kwargs"])
    reference_verdicts(WARM_UP_ROW, WARM_UP_TEXT)
    ours_best = reference_best = float("inf")
    for _ in range(max(1, repeats)):
        ours, seconds = score_ours(rows)
        ours_best = min(ours_best, seconds)
        reference, seconds = score_reference(rows)
        reference_best = min(reference_best, seconds)
    identical = [a == b for a, b in zip(ours, reference, strict=True)]
    instructions = sum(len(strict) for strict, _ in ours)
    same_instruction = sum(
        sum(x == y for x, y in zip(a[0] + a[1], b[0] + b[1], strict=True))
        for a, b in zip(ours, reference, strict=True)
    )
    return {
        "rows": len(rows),
        "ours_rows_per_s": len(rows) / ours_best,
        "reference_rows_per_s": len(rows) / reference_best,
        "ratio": reference_best / ours_best,
        "identical_rows": sum(identical),
        "identical_instruction_verdicts": same_instruction,
        "instruction_verdicts": 2 * instructions,
        "disagreeing_keys": [row["key"] for (row, _), same in zip(rows, identical, strict=True) if not same],
    }


def print_result(result: dict[str, Any]) -> None:
    print(f"IFEval, {result['rows']} GPT-4 rows (strict + loose verdicts per instruction)")
    print(f"  ours        {result['ours_rows_per_s']:9.1f} rows/s")
    print(f"  lm_eval ref {result['reference_rows_per_s']:9.1f} rows/s")
    print(f"  ratio       {result['ratio']:9.2f}x  (goal >= 2x)")
    print(
        f"  identical verdicts: {result['identical_rows']}/{result['rows']} rows, "
        f"{result['identical_instruction_verdicts']}/{result['instruction_verdicts']} instruction verdicts"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=1, help="timed passes per scorer; the best counts")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    args = parser.parse_args()
    result = run_section(args.repeats)
    if args.json:
        print(json.dumps(result))
        return
    print_result(result)
    if result["disagreeing_keys"]:
        print(
            f"  disagreeing rows (keys): {result['disagreeing_keys']} "
            "(their `letter` is not a-z: the reference checks a random letter instead)"
        )


if __name__ == "__main__":
    main()
