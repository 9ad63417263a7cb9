"""What test-time scaling buys over pass@1, on any code or SWE problem file and checkpoint.

code: runs `cascade tts code`'s loop (tts/code.py) once per seed and prints pass@1 (round-1 responses on the
hidden tests, unfiltered, at the same sampling settings) against the TTS score after each round.
swe: samples k patches per instance once per seed and prints pass@1, best@k and pass@k (tts/swe.py).

    python benchmarks/tts_gains.py code --model runs/tiny/sft --problems runs/tiny/data_code/heldout.jsonl \
        --rounds 4 --generations 8 --max-generations 2000 --max-tokens 96 --temperature 1.0 --seeds 0 1 2
    python benchmarks/tts_gains.py swe --model runs/tiny/swe_rl --problems runs/tiny/data_swe/heldout.jsonl -k 8
    python benchmarks/tts_gains.py code --model /work/models/smollm2-135m --mbpp /work/shared/data/real/mbpp/mbpp.jsonl \
        --limit 50 --max-tokens 384 --temperature 0.6 --top-p 0.95

--mbpp FILE reads MBPP's own rows (test split, task ids 11-510) as code problems: the prompt is the task text
and its first test (the MBPP prompt convention), the label an assert check of all its tests (public: the first).

Each seed's full result goes to OUT/<domain>-seed<S>.json; the summary to OUT/<domain>-summary.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any


def mbpp_rows(path: Path) -> list[dict[str, Any]]:
    """MBPP test-split rows as canonical code rows (assert label; the asserts call the function by name)."""
    import ast

    rows = []
    for line in path.read_text().splitlines():
        task = json.loads(line)
        if not 11 <= task["task_id"] <= 510:
            continue
        defined = {node.name for node in ast.walk(ast.parse(task["code"])) if isinstance(node, ast.FunctionDef)}
        called = [node.func.id for node in ast.walk(ast.parse(task["test_list"][0]))
                  if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)]
        entry = next((name for name in called if name in defined), None)
        if entry is None:
            continue
        setup = "".join(f"    {line}\n" for line in task.get("test_setup_code", "").splitlines() if line.strip())
        test = "def check(candidate):\n" + setup + "".join(f"    {t}\n" for t in task["test_list"])
        prompt = f"{task['text']} Your code should pass this test:\n{task['test_list'][0]}"
        rows.append({"id": f"mbpp-{task['task_id']}", "domain": "code", "prompt": prompt, "public_tests": 1,
                     "label": {"kind": "assert", "test": test, "entry_point": entry}})
    return rows


def run_seed(args: argparse.Namespace, seed: int) -> dict[str, Any]:
    from cascade_cli.tts.sampling import SamplingSettings, load_problems, open_generator, sampler

    if args.mbpp:
        rows = mbpp_rows(args.mbpp)[: args.limit]
    else:
        rows = load_problems(args.problems, args.domain, args.limit)
    sampling = SamplingSettings(args.max_tokens, args.temperature, args.top_p, args.backend, seed)
    generator = open_generator(args.model, sampling)
    try:
        sample = sampler(generator, sampling)
        if args.domain == "code":
            from cascade_cli.tts.code import CodeTTSSettings, run_code_tts

            settings = CodeTTSSettings(
                args.rounds, args.generations, args.max_generations, args.public_tests, feedback=not args.no_feedback
            )
            result = run_code_tts(rows, sample, settings)
            return {"pass_at_1": result["pass_at_1"], "rounds": [r["score"] for r in result["rounds"]],
                    "tts": result["score"], "generations": result["generations"], "full": result}
        from cascade_cli.chat import render_prompt
        from cascade_cli.records import row_prompt
        from cascade_cli.tts.swe import Instance, run_swe_tts

        prompts = [render_prompt(row_prompt(row), row.get("mode", "think")) for row in rows]
        groups = sample(prompts, [args.k] * len(rows))
        result = run_swe_tts([Instance(row, [c.text for c in g]) for row, g in zip(rows, groups, strict=True)],
                             args.threshold)
        last = result["curve"][-1]
        return {"pass_at_1": last["pass_at_1"], "tts": last["best_at_k"], "pass_at_k": last["pass_at_k"],
                "curve": result["curve"], "full": result}
    finally:
        generator.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("domain", choices=["code", "swe"])
    parser.add_argument("--model", required=True)
    parser.add_argument("--problems", type=Path, help="Canonical code/swe rows (JSONL, parquet or a folder).")
    parser.add_argument("--mbpp", type=Path, help="code: MBPP's mbpp.jsonl instead of --problems.")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--generations", type=int, default=8)
    parser.add_argument("--max-generations", type=int, default=100_000)
    parser.add_argument("--public-tests", type=int, default=1)
    parser.add_argument("--no-feedback", action="store_true", help="code: later prompts without feedback")
    parser.add_argument("-k", type=int, default=8)
    parser.add_argument("--threshold", type=float, default=1.0)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--out", type=Path, default=Path("runs/tts_gains"))
    args = parser.parse_args()
    if (args.problems is None) == (args.mbpp is None):
        parser.error("give --problems FILE or --mbpp FILE")
    args.out.mkdir(parents=True, exist_ok=True)

    rows = []
    for seed in args.seeds:
        began = time.perf_counter()
        result = run_seed(args, seed)
        result["seconds"] = round(time.perf_counter() - began, 1)
        (args.out / f"{args.domain}-seed{seed}.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
        extra = f"rounds {result['rounds']}" if args.domain == "code" else f"pass@{args.k} {result['pass_at_k']:.1f}"
        print(f"seed {seed}: pass@1 {result['pass_at_1']:.1f}  tts {result['tts']:.1f}  {extra}  ({result['seconds']} s)")
        rows.append(result)
    summary = {
        "domain": args.domain, "model": args.model, "problems": str(args.problems or args.mbpp), "seeds": args.seeds,
        "pass_at_1": round(statistics.mean(r["pass_at_1"] for r in rows), 2),
        "tts": round(statistics.mean(r["tts"] for r in rows), 2),
        "settings": {k: str(v) for k, v in vars(args).items()},
    }
    (args.out / f"{args.domain}-summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    name = "TTS score" if args.domain == "code" else f"best@{args.k}"
    print(f"mean over {len(rows)} seeds: pass@1 {summary['pass_at_1']:.1f} -> {name} {summary['tts']:.1f} "
          f"(+{summary['tts'] - summary['pass_at_1']:.1f})")


if __name__ == "__main__":
    main()
